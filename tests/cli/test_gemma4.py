#!/usr/bin/env python3
"""`brisk run` and `brisk serve` with a Gemma 4 checkpoint, end to end: a tiny Hugging Face folder
assembled here (random float32 weights of a Gemma4ForCausalLM with sliding and full layers, K = V
full layers, KV sharing of both kinds, per-layer embeddings, double-wide MLPs and an MoE block;
the tokenizer of the shared gemma3 fixture; the published Gemma 4 chat template).

- `brisk run -i` through a pipe: two turns, the second prefilling only its own tokens (its prefix
  stays in the cache, sliding-window layers included), exit 0.
- `brisk serve`: a chat completion, the same request again (greedy: the same answer, with the
  prompt reused from the prefix cache), two requests at once (continuous batching) equal to the
  same requests alone, a tool call forced with tool_choice "required" parsed from Gemma 4's
  call syntax into OpenAI tool_calls, and a conversation carrying a tool result and the model's
  earlier reasoning rendered through the template.
Exit 77 (skip) when the binary or the shared data is missing.
"""
import http.client
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

BIN = os.environ.get("BRISK_BIN", "")
SHARED = os.environ.get("BRISK_SHARED_DATA", "")
TOKENIZER_DIR = os.path.join(SHARED, "models", "gemma3", "hf")
TEMPLATE = os.path.join(SHARED, "templates", "google-gemma-4-31B-it.jinja")

HIDDEN, HEADS, HEAD_DIM, GLOBAL_HEAD_DIM, FF, VOCAB, PLE = 64, 4, 16, 32, 96, 1000, 8  # VOCAB: the tokenizer's
LAYERS = ["sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention",
          "full_attention"]
KV_SHARED = 2                  # layers 4 and 5 read layers 2 (sliding) and 3 (full)
N_KV, N_KV_FULL = 2, 1         # full layers: K = V with one KV head
EXPERTS, TOP_K, EXPERT_FF = 4, 2, 16
WINDOW = 16

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def write_checkpoint(d):
    """Random float32 weights under transformers' Gemma 4 names, and the published config form."""
    rng = random.Random(4242)
    tensors = {}

    def mat(name, *shape, std=0.08):
        n = 1
        for s in shape:
            n *= s
        tensors[name] = (list(shape), [rng.gauss(0.0, std) for _ in range(n)])

    def vec(name, n, base=1.0, std=0.1):
        tensors[name] = ([n], [base + rng.gauss(0.0, std) for _ in range(n)])

    n_layer = len(LAYERS)
    mat("model.embed_tokens.weight", VOCAB, HIDDEN)
    mat("model.embed_tokens_per_layer.weight", VOCAB, n_layer * PLE)
    mat("model.per_layer_model_projection.weight", n_layer * PLE, HIDDEN)
    vec("model.per_layer_projection_norm.weight", PLE)
    vec("model.norm.weight", HIDDEN)
    first_shared = n_layer - KV_SHARED
    for il, kind in enumerate(LAYERS):
        p = f"model.layers.{il}."
        full = kind == "full_attention"
        hd = GLOBAL_HEAD_DIM if full else HEAD_DIM
        kv = N_KV_FULL if full else N_KV
        ff = FF * (2 if il >= first_shared else 1)
        vec(p + "input_layernorm.weight", HIDDEN)
        mat(p + "self_attn.q_proj.weight", HEADS * hd, HIDDEN)
        vec(p + "self_attn.q_norm.weight", hd)
        if il < first_shared:
            mat(p + "self_attn.k_proj.weight", kv * hd, HIDDEN)
            vec(p + "self_attn.k_norm.weight", hd)
            if not full:
                mat(p + "self_attn.v_proj.weight", kv * hd, HIDDEN)
        mat(p + "self_attn.o_proj.weight", HIDDEN, HEADS * hd)
        vec(p + "post_attention_layernorm.weight", HIDDEN)
        vec(p + "pre_feedforward_layernorm.weight", HIDDEN)
        mat(p + "mlp.gate_proj.weight", ff, HIDDEN)
        mat(p + "mlp.up_proj.weight", ff, HIDDEN)
        mat(p + "mlp.down_proj.weight", HIDDEN, ff)
        vec(p + "post_feedforward_layernorm.weight", HIDDEN)
        mat(p + "router.proj.weight", EXPERTS, HIDDEN)
        vec(p + "router.scale", HIDDEN)
        vec(p + "router.per_expert_scale", EXPERTS)
        mat(p + "experts.gate_up_proj", EXPERTS, 2 * EXPERT_FF, HIDDEN)
        mat(p + "experts.down_proj", EXPERTS, HIDDEN, EXPERT_FF)
        vec(p + "pre_feedforward_layernorm_2.weight", HIDDEN)
        vec(p + "post_feedforward_layernorm_1.weight", HIDDEN)
        vec(p + "post_feedforward_layernorm_2.weight", HIDDEN)
        mat(p + "per_layer_input_gate.weight", PLE, HIDDEN)
        mat(p + "per_layer_projection.weight", HIDDEN, PLE)
        vec(p + "post_per_layer_input_norm.weight", HIDDEN)
        vec(p + "layer_scalar", 1, base=1.0, std=0.2)
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, (shape, values) in tensors.items():
        blob = struct.pack("<%df" % len(values), *values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    config = {
        "architectures": ["Gemma4ForCausalLM"], "model_type": "gemma4_text", "vocab_size": VOCAB,
        "hidden_size": HIDDEN, "intermediate_size": FF, "num_hidden_layers": n_layer,
        "num_attention_heads": HEADS, "num_key_value_heads": N_KV, "head_dim": HEAD_DIM,
        "global_head_dim": GLOBAL_HEAD_DIM, "num_global_key_value_heads": N_KV_FULL, "attention_k_eq_v": True,
        "layer_types": LAYERS, "sliding_window": WINDOW, "num_kv_shared_layers": KV_SHARED,
        "use_double_wide_mlp": True, "hidden_size_per_layer_input": PLE, "vocab_size_per_layer_input": VOCAB,
        "enable_moe_block": True, "num_experts": EXPERTS, "top_k_experts": TOP_K, "moe_intermediate_size": EXPERT_FF,
        "final_logit_softcapping": 30.0, "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6,
        "max_position_embeddings": 4096, "tie_word_embeddings": True,
        "rope_parameters": {"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0,
                                               "rope_type": "proportional"},
                            "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
    }
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(TOKENIZER_DIR, name), d)
    shutil.copy(TEMPLATE, os.path.join(d, "chat_template.jinja"))


def test_run(model):
    script = "Name three colors.\nAnd three more, please, different from those.\n/exit\n"
    p = subprocess.run([BIN, "run", model, "-i", "--temp", "0", "--ctx", "1024", "-n", "24", "-t", "2"],
                       input=script.encode(), capture_output=True, timeout=300)
    err = p.stderr.decode(errors="replace")
    check(p.returncode == 0, f"brisk run exited {p.returncode}: {err[-2000:]}")
    import re
    stats = re.findall(r"\[prompt (\d+) tok \((\d+) new\)", err)
    check(len(stats) == 2, f"brisk run: two turns expected, got {stats}: {err[-2000:]}")
    if len(stats) == 2:
        check(stats[0][0] == stats[0][1], f"first turn prefills everything: {stats[0]}")
        check(int(stats[1][1]) < int(stats[1][0]), f"second turn reuses its prefix: {stats[1]}")
        check(int(stats[1][0]) > WINDOW, f"the conversation is longer than the window: {stats[1]}")


def serve(model):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    proc = subprocess.Popen([BIN, "serve", "--model", f"gemma4={model}", "--port", str(port), "--ctx", "1024",
                             "--parallel", "2", "-t", "2"], stderr=subprocess.PIPE, text=True)
    lines = []
    threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True).start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/v1/models")
            if c.getresponse().status == 200:
                break
        except OSError:
            time.sleep(0.3)
    return proc, port, lines


def post(port, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    c.request("POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    text = r.read().decode("utf-8", "replace")
    try:
        return r.status, json.loads(text)
    except ValueError:
        return r.status, text


def test_serve(model):
    proc, port, log = serve(model)
    try:
        long_user = " ".join(f"item{i}" for i in range(40)) + ". Which item comes after item7?"
        chat = {"model": "gemma4", "temperature": 0, "max_tokens": 12,
                "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": long_user}]}
        status, first = post(port, chat)
        check(status == 200, f"chat completion: {status} {first}")
        if status != 200:
            return
        answer = first["choices"][0]["message"].get("content") or ""
        check(first["usage"]["prompt_tokens"] > WINDOW, f"the prompt is longer than the window: {first['usage']}")
        status, again = post(port, chat)
        check(status == 200 and (again["choices"][0]["message"].get("content") or "") == answer,
              f"the repeated request (prefix cache) answers the same: {again}")

        other = dict(chat, messages=[{"role": "user", "content": "Count from one to five."}])
        status, alone = post(port, other)
        check(status == 200, f"second prompt: {status} {alone}")
        results = [None, None]

        def run(i, body):
            results[i] = post(port, body)

        threads = [threading.Thread(target=run, args=(0, chat)), threading.Thread(target=run, args=(1, other))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        check(results[0][0] == 200 and results[0][1]["choices"][0]["message"].get("content") == answer,
              f"batched request 1 equals it alone: {results[0]}")
        check(results[1][0] == 200 and results[1][1]["choices"][0]["message"].get("content")
              == alone["choices"][0]["message"].get("content"), f"batched request 2 equals it alone: {results[1]}")

        tools = [{"type": "function", "function": {
            "name": "get_weather", "description": "Weather of a city",
            "parameters": {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome"]},
                                                            "days": {"enum": [1, 2, 3]}},
                           "required": ["city"]}}}]
        status, call = post(port, {"model": "gemma4", "temperature": 0, "max_tokens": 200, "tools": tools,
                                   "tool_choice": "required",
                                   "messages": [{"role": "user", "content": "Weather in Paris?"}]})
        check(status == 200, f"forced tool call: {status} {call}")
        if status == 200:
            msg = call["choices"][0]["message"]
            calls = msg.get("tool_calls") or []
            check(call["choices"][0]["finish_reason"] == "tool_calls" and len(calls) == 1,
                  f"one tool call parsed from the Gemma 4 syntax: {call}")
            if calls:
                check(calls[0]["function"]["name"] == "get_weather", f"tool name: {calls[0]}")
                try:
                    args = json.loads(calls[0]["function"]["arguments"])
                    check(args.get("city") in ("Paris", "Rome"), f"arguments carry the required city: {args}")
                except ValueError as e:
                    check(False, f"arguments are not JSON ({e}): {calls[0]}")

        history = [{"role": "user", "content": "Weather in Paris?"},
                   {"role": "assistant", "content": "", "reasoning_content": "The user wants the weather.",
                    "tool_calls": [{"id": "c1", "type": "function",
                                    "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
                   {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 21}"}]
        status, after = post(port, {"model": "gemma4", "temperature": 0, "max_tokens": 8, "tools": tools,
                                    "messages": history})
        check(status == 200 and isinstance(after["choices"][0]["message"].get("content"), (str, type(None))),
              f"a conversation with a tool result: {status} {after}")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    if failures:
        print("server log:\n" + "".join(log[-40:]))


def main():
    if not BIN or not os.path.exists(BIN):
        print("skip: BRISK_BIN not set")
        return 77
    for path in (TOKENIZER_DIR, TEMPLATE):
        if not os.path.exists(path):
            print(f"skip: {path} missing (shared data)")
            return 77
    tmp = tempfile.mkdtemp(prefix="brisk_gemma4_e2e_")
    try:
        write_checkpoint(tmp)
        test_run(tmp)
        test_serve(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failures" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
