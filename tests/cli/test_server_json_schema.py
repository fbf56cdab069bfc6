#!/usr/bin/env python3
"""System test of structured output in `brisk serve` on the Qwen3 random-weight fixture: sampled
answers (temperature 1, many seeds) under response_format json_schema (chat and completions), Anthropic's
output_config.format and tool_choice required / named (JSON, Qwen XML and Gemma 4 call syntax) are checked against their schemas with
the `jsonschema` package as the oracle; malformed or unsupported schemas get a 400 with a JSON
error body. A random-weight model writes the widest range of texts the constraint allows, so
this exercises the recognizer rather than the model. Exit 77 = skipped."""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

try:
    import jsonschema
except ImportError:
    print("skip: python3-jsonschema is not installed"); sys.exit(77)

BIN = os.environ.get("BRISK_BIN", "")
SHARED = os.environ.get("BRISK_SHARED_DATA", "")
MODEL_DIR = os.path.join(SHARED, "models", "qwen3", "hf")
XML_TEMPLATE = os.path.join(SHARED, "templates", "Qwen3.5-4B.jinja")  # <function=...> tool calls
GEMMA4_TEMPLATE = os.path.join(SHARED, "templates", "google-gemma-4-31B-it.jinja")  # call:NAME{k:v}
SEEDS = range(1, 9)

if not BIN or not os.path.exists(BIN):
    print("skip: BRISK_BIN not set"); sys.exit(77)
if not os.path.isdir(MODEL_DIR):
    print(f"skip: {MODEL_DIR} missing (shared fixtures)"); sys.exit(77)

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


s = socket.socket()
s.bind(("127.0.0.1", 0))
PORT = s.getsockname()[1]
s.close()

def with_template(template, prefix):
    """The same weights and tokenizer under another chat template (another tool-call syntax)."""
    if not os.path.exists(template):
        return None
    d = tempfile.mkdtemp(prefix=prefix)
    for f in os.listdir(MODEL_DIR):
        if f != "chat_template.jinja":
            os.symlink(os.path.join(os.path.abspath(MODEL_DIR), f), os.path.join(d, f))
    with open(template) as src, open(os.path.join(d, "chat_template.jinja"), "w") as dst:
        dst.write(src.read())
    return d


xml_dir = with_template(XML_TEMPLATE, "brisk_xml_")
gemma4_dir = with_template(GEMMA4_TEMPLATE, "brisk_gemma4_")
models = ["--model", f"qwen3={MODEL_DIR}", "--max-models", "3"]
if xml_dir:
    models += ["--model", f"qwen35xml={xml_dir}"]
if gemma4_dir:
    models += ["--model", f"gemma4={gemma4_dir}"]
server = subprocess.Popen([BIN, "serve", *models, "--port", str(PORT), "--ctx", "2048",
                           "--parallel", "4", "-t", "2"], stderr=subprocess.PIPE, text=True)
log_lines = []
threading.Thread(target=lambda: log_lines.extend(server.stderr), daemon=True).start()


def post(path, body):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=120)
    c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    text = r.read().decode("utf-8", "replace")
    c.close()
    try:
        return r.status, json.loads(text)
    except ValueError:
        return r.status, text


def validate(schema, text, what):
    try:
        value = json.loads(text)
    except ValueError as e:
        check(False, f"{what}: not JSON ({e}): {text!r}")
        return
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as e:
        check(False, f"{what}: does not conform ({e.message}): {text!r}")


SCHEMAS = {
    "person": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 12},
            "age": {"type": "integer"},
            "email": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 3},
        },
        "required": ["name", "age", "tags"],
        "additionalProperties": False,
    },
    "pydantic_nested": {  # what pydantic's model_json_schema() emits: $defs, $ref, titles
        "$defs": {
            "Item": {"properties": {"sku": {"title": "Sku", "type": "string"}, "qty": {"title": "Qty", "type": "integer"}},
                     "required": ["sku", "qty"], "title": "Item", "type": "object"},
        },
        "properties": {
            "items": {"items": {"$ref": "#/$defs/Item"}, "title": "Items", "type": "array", "maxItems": 4},
            "total": {"title": "Total", "type": "number"},
            "status": {"enum": ["open", "closed"], "title": "Status", "type": "string"},
        },
        "required": ["items", "total", "status"],
        "title": "Order",
        "type": "object",
    },
    "map_of_booleans": {"type": "object", "additionalProperties": {"type": "boolean"}, "maxProperties": 100},
    "tuple": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}],
              "items": False, "minItems": 3},
    "recursive_tree": {
        "$defs": {"node": {"type": "object", "properties": {
            "v": {"type": "integer"},
            "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
            "required": ["v", "kids"], "additionalProperties": False}},
        "$ref": "#/$defs/node",
    },
    "top_level_enum": {"enum": ["yes", "no", 3, None]},
    "bounded_numbers": {"type": "object", "properties": {
        "n": {"type": "integer", "minimum": -5, "exclusiveMaximum": 6},
        "x": {"type": "number", "exclusiveMinimum": 0, "maximum": 1.5},
        "big": {"type": "integer", "minimum": 1000000}},
        "required": ["n", "x", "big"], "additionalProperties": False},
    "property_counts": {"type": "object", "additionalProperties": {"type": "integer", "maximum": 9},
                        "minProperties": 1, "maxProperties": 2},
}

try:
    for _ in range(200):
        try:
            c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=5)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                break
        except OSError:
            time.sleep(0.1)
    else:
        print("server did not start:", "".join(log_lines)); sys.exit(1)

    user = [{"role": "user", "content": "Give me the data."}]
    finished = 0
    for name, schema in SCHEMAS.items():
        for seed in SEEDS:
            st, r = post("/v1/chat/completions", {
                "model": "qwen3", "messages": user, "max_tokens": 400, "temperature": 1.0, "seed": seed,
                "response_format": {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}})
            check(st == 200, f"{name} seed {seed}: status {st} {r}")
            if st != 200:
                continue
            choice = r["choices"][0]
            if choice["finish_reason"] == "stop":  # "length" leaves a valid prefix only
                finished += 1
                validate(schema, choice["message"]["content"], f"{name} seed {seed}")
    print(f"response_format json_schema: {finished} finished answers checked")
    check(finished >= 20, f"only {finished} answers finished within max_tokens")

    # /v1/completions takes response_format too.
    schema = SCHEMAS["tuple"]
    for seed in SEEDS:
        st, r = post("/v1/completions", {"model": "qwen3", "prompt": "Data:", "max_tokens": 200, "temperature": 1.0,
                                         "seed": seed, "response_format": {"type": "json_schema",
                                                                           "json_schema": {"name": "t", "schema": schema}}})
        check(st == 200, f"completions: status {st} {r}")
        if st == 200 and r["choices"][0]["finish_reason"] == "stop":
            validate(schema, r["choices"][0]["text"], f"completions seed {seed}")

    # Anthropic structured output (output_config.format).
    schema = SCHEMAS["person"]
    for seed in SEEDS:
        st, r = post("/v1/messages", {"model": "qwen3", "max_tokens": 400, "temperature": 1.0, "messages": user,
                                      "output_config": {"format": {"type": "json_schema", "schema": schema}}})
        check(st == 200, f"anthropic: status {st} {r}")
        if st == 200 and r.get("stop_reason") == "end_turn":
            validate(schema, r["content"][0]["text"], f"anthropic seed {seed}")

    # Forced tool calls: the arguments follow the function's parameters schema.
    tools = [
        {"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                             "unit": {"enum": ["celsius", "fahrenheit"]},
                                             "days": {"type": "integer"}},
            "required": ["city", "unit"], "additionalProperties": False}}},
        {"type": "function", "function": {"name": "search", "parameters": {
            "type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["query"]}}},
    ]
    params = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    calls = 0
    for seed in SEEDS:
        for choice in ("required", {"type": "function", "function": {"name": "search"}}):
            st, r = post("/v1/chat/completions", {"model": "qwen3", "messages": user, "max_tokens": 300,
                                                  "temperature": 1.0, "seed": seed, "tools": tools,
                                                  "tool_choice": choice})
            check(st == 200, f"tools seed {seed}: status {st} {r}")
            if st != 200 or r["choices"][0]["finish_reason"] == "length":
                continue
            # A named tool_choice ends with "stop" (as OpenAI's does), required with "tool_calls".
            want = "stop" if isinstance(choice, dict) else "tool_calls"
            check(r["choices"][0]["finish_reason"] == want, f"finish_reason {r['choices'][0]['finish_reason']} for {choice}")
            for call in r["choices"][0]["message"]["tool_calls"]:
                fn = call["function"]["name"]
                if isinstance(choice, dict):
                    check(fn == "search", f"named tool_choice gave {fn}")
                calls += 1
                validate(params[fn], call["function"]["arguments"], f"tool {fn} seed {seed}")
    check(calls >= 8, f"only {calls} forced calls finished")

    # Forced calls in the XML syntax (<function=NAME><parameter=P>...) and the Gemma 4 one
    # (call:NAME{key:value}): parsed back into arguments that follow the parameters schema.
    for model_name, model_dir in (("qwen35xml", xml_dir), ("gemma4", gemma4_dir)):
        if not model_dir:
            continue
        # (Gemma 4 checks a parameter's top-level type only, not what is nested in it.)
        note = ({"type": "object", "properties": {"k": {"type": "null"}}, "additionalProperties": False}
                if model_name == "qwen35xml" else {"type": "object"})
        xml_tools = [{"type": "function", "function": {"name": "set_mode", "parameters": {
            "type": "object", "properties": {"mode": {"enum": ["eco", "turbo"]}, "level": {"type": "integer"},
                                             "on": {"type": "boolean"}, "note": note},
            "required": ["mode", "on"], "additionalProperties": False}}}]
        xml_calls = 0
        for seed in range(1, 17):
            st, r = post("/v1/chat/completions", {"model": model_name, "messages": user, "max_tokens": 600,
                                                  "temperature": 1.0, "seed": seed, "tools": xml_tools,
                                                  "tool_choice": "required",
                                                  "chat_template_kwargs": {"enable_thinking": False}})
            check(st == 200, f"{model_name} tools seed {seed}: status {st} {r}")
            if st != 200 or r["choices"][0]["finish_reason"] != "tool_calls":
                continue
            for call in r["choices"][0]["message"]["tool_calls"]:
                xml_calls += 1
                check(call["function"]["name"] == "set_mode", f"{model_name} call named {call['function']['name']}")
                validate(xml_tools[0]["function"]["parameters"], call["function"]["arguments"], f"{model_name} call seed {seed}")
        print(f"{model_name} forced calls: {xml_calls} checked")
        check(xml_calls >= 3, f"only {xml_calls} forced {model_name} calls finished")

    # Bad schemas: 400 with an error body naming the parameter.
    for bad in ({"$ref": "#/$defs/missing"}, {"type": "objekt"}, False, {"enum": []},
                {"type": "array", "minItems": 2, "maxItems": 1}, {"allOf": [{"type": "string"}, {"minLength": 2}]},
                # Keywords the recognizer does not enforce are refused, never ignored.
                {"type": "string", "pattern": "^a+$"}, {"not": {"type": "null"}}, {"if": {"type": "string"}},
                {"type": "array", "uniqueItems": True}, {"type": "object", "patternProperties": {"^x": {}}},
                {"oneOf": [{"type": "number"}, {"type": "integer"}]}, {"type": "integer", "minimum": 3, "maximum": 2}):
        st, r = post("/v1/chat/completions", {"model": "qwen3", "messages": user, "max_tokens": 4, "response_format": {
            "type": "json_schema", "json_schema": {"name": "bad", "schema": bad}}})
        check(st == 400 and isinstance(r, dict) and r.get("error", {}).get("param") == "response_format",
              f"bad schema {bad}: {st} {r}")
    st, r = post("/v1/messages", {"model": "qwen3", "max_tokens": 4, "messages": user,
                                  "output_config": {"format": {"type": "json_schema"}}})
    check(st == 400 and isinstance(r, dict) and "error" in r, f"anthropic format without schema: {st} {r}")
finally:
    for d in (xml_dir, gemma4_dir):
        if d:
            subprocess.run(["rm", "-rf", d])
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()

if failures:
    print(f"{len(failures)} failures"); sys.exit(1)
print("structured output system test: ok")
