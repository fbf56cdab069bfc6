#!/usr/bin/env python3
"""System test of the Ollama API of `brisk serve` on the Qwen3 fixture: the routes on the main
port and on --ollama-port, NDJSON streaming, bad input answered with Ollama's error shape
({"error": "..."}) and the server staying up, keep_alive 0, and the official `ollama` npm
client (tests/server/sdk_ollama.mjs: chat, generate, tools, format, list, show, ps, version,
embed refused for a chat model, pull from a local Hub-shaped server and delete). Exit 77 = skipped."""
import http.client
import json
import os
import subprocess
import sys
import tempfile
import shutil
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_util import free_port, skip_missing, stop_server  # noqa: E402

BIN = os.environ.get("BRISK_BIN", "")
SHARED = os.environ.get("BRISK_SHARED_DATA", "")
SRC = os.environ.get("BRISK_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MODEL_DIR = os.path.join(SHARED, "models", "qwen3", "hf")
KEY = "test-key"
sys.path.insert(0, os.path.join(SRC, "tests", "hub"))
from fake_hub import FakeHub  # noqa: E402

if not BIN or not os.path.exists(BIN):
    print("skip: BRISK_BIN not set"); sys.exit(77)
if not os.path.isdir(MODEL_DIR):
    sys.exit(skip_missing(f"{MODEL_DIR} (shared fixtures)"))

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


tmp = tempfile.mkdtemp(prefix="brisk-ollama-")
hub = FakeHub()
PULL_REPO, SLOW_REPO = "test-org/qwen3-tiny", "test-org/qwen3-slow"
MODEL_FILES = {name: open(os.path.join(MODEL_DIR, name), "rb").read()
               for name in sorted(os.listdir(MODEL_DIR)) if os.path.isfile(os.path.join(MODEL_DIR, name))}
hub.add_repo(PULL_REPO, MODEL_FILES)
hub.add_repo(SLOW_REPO, MODEL_FILES)
hub.start()
env = dict(os.environ)
for k in ("HF_TOKEN", "HF_HUB_OFFLINE", "HF_HUB_CACHE", "HF_TOKEN_PATH", "XDG_CACHE_HOME"):
    env.pop(k, None)
env.update(HF_HOME=os.path.join(tmp, "hf"), HF_ENDPOINT=hub.endpoint)

PORT, OPORT = free_port(), free_port()
server = subprocess.Popen([BIN, "serve", "--model", f"qwen3={MODEL_DIR}", "--port", str(PORT), "--ollama-port", str(OPORT),
                           "--ctx", "1024", "--parallel", "4", "--api-key", KEY, "--max-body", "65536",
                           "--max-models", "2"], stderr=subprocess.PIPE, text=True, env=env)
log_lines = []
ready = threading.Event()


def read_log():
    for line in server.stderr:
        log_lines.append(line)
        if "also listening on" in line:
            ready.set()


threading.Thread(target=read_log, daemon=True).start()


def request(method, path, body=None, raw=None, key=KEY, port=None, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port or PORT, timeout=60)
    h = {"Content-Type": "application/json"}
    if key:
        h["Authorization"] = "Bearer " + key
    h.update(headers or {})
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    text = r.read().decode("utf-8", "replace")
    c.close()
    return r.status, text, r


def jbody(text):
    try:
        return json.loads(text)
    except ValueError:
        return None


try:
    check(ready.wait(120), "server started: " + "".join(log_lines))
    check(any(f"also listening on http://127.0.0.1:{OPORT}" in l for l in log_lines), "second listener announced")

    # 1. Both ports answer the Ollama routes; HEAD / answers (clients probe it).
    for port in (PORT, OPORT):
        st, text, _ = request("GET", "/api/version", port=port)
        check(st == 200 and jbody(text) and "version" in jbody(text), f"version on {port}: {st} {text}")
        st, _, _ = request("HEAD", "/", key=None, port=port)
        check(st == 200, f"HEAD / on {port}: {st}")
    st, text, _ = request("GET", "/api/tags", key=None, port=OPORT)
    check(st == 401 and jbody(text) and isinstance(jbody(text).get("error"), str), f"the key is checked on the second port: {st} {text}")

    # 2. NDJSON streaming by default: one JSON object per line, the last one done.
    base = {"model": "qwen3", "messages": [{"role": "user", "content": "Hello"}], "options": {"temperature": 0, "num_predict": 6},
            "think": False}
    st, text, resp = request("POST", "/api/chat", base)
    lines = [l for l in text.split("\n") if l]
    objs = [jbody(l) for l in lines]
    check(st == 200 and resp.getheader("Content-Type", "").startswith("application/x-ndjson"), f"chat stream type {st} {resp.getheader('Content-Type')}")
    check(all(o is not None for o in objs) and objs and objs[-1].get("done") is True and all(o.get("done") is False for o in objs[:-1]),
          f"chat stream lines: {text[:400]}")
    final = objs[-1] if objs and objs[-1] else {}
    check(final.get("done_reason") == "length" and final.get("eval_count") == 6, f"final object: {final}")
    st, text, _ = request("POST", "/api/chat", dict(base, stream=False))
    one = jbody(text) or {}
    check(st == 200 and one.get("message", {}).get("content") == "".join(o["message"]["content"] for o in objs[:-1]),
          f"stream == non-stream: {text[:300]}")
    # The model name as Ollama clients write it.
    st, text, _ = request("POST", "/api/chat", dict(base, model="qwen3:latest", stream=False))
    check(st == 200 and (jbody(text) or {}).get("model") == "qwen3:latest", f"name:latest maps to the served name: {st} {text[:200]}")
    # options.stop cuts the answer; num_ctx bounds prompt + output.
    st, text, _ = request("POST", "/api/generate", {"model": "qwen3", "prompt": "x", "raw": True, "stream": False,
                                                    "options": {"temperature": 0, "num_predict": 4, "num_ctx": 3}})
    check(st == 200 and (jbody(text) or {}).get("eval_count", 99) <= 2, f"num_ctx bounds the output: {st} {text[:200]}")

    # 3. Bad input: 4xx with {"error": "..."}, and the server stays up.
    bad = [
        ("POST", "/api/chat", "{bad", 400),
        ("POST", "/api/chat", json.dumps(dict(base, model="nope")), 404),
        ("POST", "/api/chat", json.dumps(dict(base, messages=[{"role": "user", "content": "x", "images": ["aGk="]}])), 400),
        ("POST", "/api/chat", json.dumps(dict(base, messages=[{"role": "wizard", "content": "x"}])), 400),
        ("POST", "/api/chat", json.dumps(dict(base, messages="hi")), 400),
        ("POST", "/api/chat", json.dumps(dict(base, options={"temperature": "hot"})), 400),
        ("POST", "/api/chat", json.dumps(dict(base, options={"mirostat": 2})), 400),
        ("POST", "/api/chat", json.dumps(dict(base, options=[1])), 400),
        ("POST", "/api/chat", json.dumps(dict(base, format="yaml")), 400),
        ("POST", "/api/chat", json.dumps(dict(base, format={"type": "object", "not": {}})), 400),
        ("POST", "/api/chat", json.dumps(dict(base, think="very")), 400),
        ("POST", "/api/chat", json.dumps(dict(base, keep_alive="soon")), 400),
        ("POST", "/api/chat", json.dumps(dict(base, tools=[{"type": "function"}])), 400),
        ("POST", "/api/chat", json.dumps(dict(base, tools=[{"type": 5, "function": {"name": "f"}}])), 400),
        ("POST", "/v1/chat/completions", json.dumps(dict(base, tools=[{"type": [], "function": {"name": "f"}}])), 400),
        ("POST", "/api/chat", json.dumps(dict(base, keep_alive="1e999")), 400),
        ("POST", "/api/chat", json.dumps(dict(base, messages=[{"role": "assistant", "content": "", "tool_calls": [{"function": 3}]}])), 400),
        ("POST", "/api/chat", json.dumps(dict(base, options={"num_predict": 100000})), 400),
        ("POST", "/api/generate", json.dumps({"model": "qwen3", "prompt": "x", "images": ["aGk="]}), 400),
        ("POST", "/api/generate", json.dumps({"model": "qwen3", "prompt": "x", "suffix": "y"}), 400),
        ("POST", "/api/generate", json.dumps({"model": "qwen3", "prompt": "x", "context": [-1]}), 400),
        ("POST", "/api/generate", json.dumps({"model": "qwen3", "prompt": 5}), 400),
        ("POST", "/api/embed", json.dumps({"model": "qwen3", "input": "x"}), 400),
        ("POST", "/api/embeddings", json.dumps({"model": "qwen3", "prompt": "x"}), 400),
        ("POST", "/api/embed", json.dumps({"model": "nope", "input": "x"}), 404),
        ("POST", "/api/show", json.dumps({"model": "nope"}), 404),
        ("POST", "/api/show", json.dumps({}), 400),
        ("POST", "/api/pull", json.dumps({"model": "../etc"}), 400),
        ("POST", "/api/pull", json.dumps({"model": "a b c"}), 400),
        ("DELETE", "/api/delete", json.dumps({"model": "qwen3"}), 400),
        ("DELETE", "/api/delete", json.dumps({"model": "nope"}), 404),
        ("GET", "/api/chat", None, 405),
        ("GET", "/api/nothing", None, 404),
    ]
    for method, path, raw, want in bad:
        st, text, _ = request(method, path, raw=raw)
        err = jbody(text)
        # Ollama's error shape on /api/, OpenAI's elsewhere.
        msg = err.get("error") if isinstance(err, dict) else None
        if path.startswith("/v1/") and isinstance(msg, dict):
            msg = msg.get("message")
        check(st == want and isinstance(msg, str) and msg,
              f"{method} {path} {raw and raw[:80]}: want {want} with {{error}}, got {st} {text[:200]}")
    st, text, _ = request("POST", "/api/embed", raw=json.dumps({"model": "qwen3", "input": "x"}))
    check("embeddings are not supported by this model" in text, f"embed message: {text}")
    st, text, _ = request("POST", "/api/chat", dict(base, stream=False))
    check(st == 200, "still serving after bad input")

    # 4. A load-only request, then keep_alive 0 unloads the model.
    st, text, _ = request("POST", "/api/generate", {"model": "qwen3", "stream": False})
    check(st == 200 and (jbody(text) or {}).get("done_reason") == "load", f"load-only generate: {text}")
    st, text, _ = request("POST", "/api/chat", dict(base, stream=False, keep_alive=0))
    st, text, _ = request("GET", "/api/ps")
    check(st == 200 and (jbody(text) or {}).get("models") == [], f"keep_alive 0 unloads: {text}")

    # 5. The official client (skipped when not fetched: scripts/fetch_server_test_assets.sh).
    sdk = os.path.join(os.environ.get("BRISK_TEST_ASSETS", os.path.join(SRC, "build", "test-assets")), "server", "node_modules")
    if os.path.isdir(os.path.join(sdk, "ollama")):
        dst = os.path.join(os.path.dirname(sdk), "sdk_ollama.mjs")  # ESM ignores NODE_PATH: run beside node_modules
        shutil.copyfile(os.path.join(SRC, "tests", "server", "sdk_ollama.mjs"), dst)
        penv = dict(env, BRISK_OLLAMA_HOST=f"http://127.0.0.1:{OPORT}", BRISK_KEY=KEY, BRISK_MODEL="qwen3", BRISK_PULL=PULL_REPO)
        p = subprocess.run(["node", dst], env=penv, capture_output=True, text=True, timeout=300)
        check(p.returncode == 0, f"sdk_ollama.mjs: {p.stdout}{p.stderr}")
        print(p.stdout.strip())
    else:
        rc = skip_missing("the ollama npm client (run scripts/fetch_server_test_assets.sh)")
        if rc != 77:
            failures.append("ollama client missing")

    # 6. A pull whose client leaves is cancelled (the partial file stays); the next one resumes.
    hub.slow["model.safetensors"] = 0.05  # 16 KiB per 50 ms: about 3 s for the weights
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
    c.request("POST", "/api/pull", body=json.dumps({"model": SLOW_REPO}), headers={"Authorization": "Bearer " + KEY})
    r = c.getresponse()
    seen = b""
    while b"completed" not in seen:
        line = r.fp.readline()
        if not line:
            break
        seen += line
    c.close()  # mid-download
    blobs = os.path.join(tmp, "hf", "hub", "models--test-org--qwen3-slow", "blobs")
    time.sleep(1.5)
    partial = [f for f in os.listdir(blobs) if f.endswith(".incomplete")] if os.path.isdir(blobs) else []
    check(b"pulling" in seen and partial, f"cancelled pull leaves a partial file: {seen[:200]} {partial}")
    st, text, _ = request("GET", "/api/tags")
    check(st == 200 and SLOW_REPO not in text, f"a cancelled pull serves nothing: {text[:300]}")
    check(any("pull of 'test-org/qwen3-slow' failed" in l and "cancelled" in l for l in log_lines),
          "the server cancelled the download")
    hub.slow.clear()
    st, text, _ = request("POST", "/api/pull", {"model": SLOW_REPO, "stream": False})
    check(st == 200 and (jbody(text) or {}).get("status") == "success", f"pull again: {st} {text}")
    st, text, _ = request("POST", "/api/chat", dict(base, model=SLOW_REPO, stream=False))
    check(st == 200 and (jbody(text) or {}).get("message", {}).get("content") == one.get("message", {}).get("content"),
          f"the resumed copy answers as the original: {st} {text[:200]}")
finally:
    stop_server(server, check)
    hub.stop()
    shutil.rmtree(tmp, ignore_errors=True)

if failures:
    print("".join(log_lines[-30:]))
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("test_server_ollama: ok")
