#!/usr/bin/env python3
"""System test of `brisk serve` on the Qwen3 random-weight fixture (real tokenizer and chat
template): greedy output equals `brisk generate`, streaming, usage, prefix-cache reuse per
session, fresh sampling seeds unless one is given, 16 concurrent streams each equal to their solo answer, bad input answered without
the server dying, disconnect mid-stream, auth, the official SDKs (when fetched), a soak with
stable resident memory, graceful SIGTERM. Exit 77 = skipped."""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

BIN = os.environ.get("BRISK_BIN", "")
SHARED = os.environ.get("BRISK_SHARED_DATA", "")
SRC = os.environ.get("BRISK_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MODEL_DIR = os.path.join(SHARED, "models", "qwen3", "hf")
KEY = "test-key"
SOAK = int(os.environ.get("BRISK_SOAK", "300"))

if not BIN or not os.path.exists(BIN):
    print("skip: BRISK_BIN not set"); sys.exit(77)
if not os.path.isdir(MODEL_DIR):
    print(f"skip: {MODEL_DIR} missing (shared fixtures)"); sys.exit(77)

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


PORT = free_port()
server = subprocess.Popen([BIN, "serve", "--model", f"qwen3={MODEL_DIR}", "--port", str(PORT), "--ctx", "1024",
                           "--parallel", "8", "--api-key", KEY, "--max-body", "65536", "--max-tokens", "512"],
                          stderr=subprocess.PIPE, text=True)
log_lines = []
threading.Thread(target=lambda: log_lines.extend(server.stderr), daemon=True).start()


def request(method, path, body=None, headers=None, raw=None, key=KEY):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
    h = {"Content-Type": "application/json"}
    if key:
        h["Authorization"] = "Bearer " + key
    h.update(headers or {})
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    text = r.read().decode("utf-8", "replace")
    c.close()
    try:
        return r.status, json.loads(text)
    except ValueError:
        return r.status, text


def chat(messages, max_tokens=16, **kw):
    body = {"model": "qwen3", "messages": messages, "max_tokens": max_tokens, "temperature": 0}
    body.update(kw)
    return request("POST", "/v1/chat/completions", body)


def stream_text(messages, max_tokens):
    st, text = request("POST", "/v1/chat/completions", {"model": "qwen3", "messages": messages, "max_tokens": max_tokens,
                                                          "temperature": 0, "stream": True})
    out = ""
    for line in text.split("\n"):
        if line.startswith("data: ") and line != "data: [DONE]":
            ch = json.loads(line[6:])["choices"]
            if ch:
                out += ch[0]["delta"].get("content", "")
    return st, out


def rss():
    _, m = request("GET", "/metrics")
    for line in m.split("\n"):
        if line.startswith("brisk_resident_memory_bytes "):
            return int(line.split()[1])
    return 0


try:
    for _ in range(100):
        try:
            if request("GET", "/health")[0] == 200:
                break
        except OSError:
            time.sleep(0.1)
    else:
        print("server did not start:", "".join(log_lines)); sys.exit(1)

    user = [{"role": "user", "content": "Hello there"}]
    # 1. Greedy through the server == brisk generate on the same rendered prompt.
    gen = subprocess.run([BIN, "generate", "--model", MODEL_DIR, "--prompt", "Hello there", "-n", "16", "--temp", "0",
                          "--ctx", "1024"], capture_output=True, text=True, check=True).stdout
    gen_text = gen[:-1] if gen.endswith("\n") else gen
    st, r = chat(user, 16)
    check(st == 200, f"chat status {st} {r}")
    check(r["choices"][0]["message"]["content"] == gen_text,
          f"server greedy {r['choices'][0]['message']['content']!r} != generate {gen_text!r}")
    st, s = stream_text(user, 16)
    check(s == r["choices"][0]["message"]["content"], "stream == non-stream")

    # 1b. Sampling without a seed differs from request to request; the same seed repeats.
    unseeded = [chat(user, 24, temperature=1.0)[1]["choices"][0]["message"]["content"] for _ in range(3)]
    check(len(set(unseeded)) > 1, f"unseeded sampling repeated itself: {unseeded}")
    seeded = [chat(user, 24, temperature=1.0, seed=11)[1]["choices"][0]["message"]["content"] for _ in range(2)]
    check(seeded[0] == seeded[1], f"seed 11 gave {seeded}")

    # 2. Second turn reports the first turn's tokens as cached; another session shares nothing.
    conv = [{"role": "user", "content": "Tell me a story about a lighthouse keeper and the sea."}]
    st, t1 = chat(conv, 24, user="alice")
    conv2 = conv + [{"role": "assistant", "content": t1["choices"][0]["message"]["content"]},
                    {"role": "user", "content": "And then?"}]
    st, t2 = chat(conv2, 8, user="alice")
    cached = t2["usage"]["prompt_tokens_details"]["cached_tokens"]
    check(cached >= t1["usage"]["prompt_tokens"] - 16, f"second turn cached {cached} of {t1['usage']['prompt_tokens']}")
    st, t3 = chat(conv2, 8, user="bob")
    check(t3["usage"]["prompt_tokens_details"]["cached_tokens"] == 0, "other session reuses nothing")
    check(t3["choices"][0]["message"]["content"] == t2["choices"][0]["message"]["content"], "cache does not change output")

    # 3. 16 concurrent streams: each equals its solo answer.
    prompts = [[{"role": "user", "content": f"Question number {i}: what is {i * 7} plus {i}?"}] for i in range(16)]
    solo = [stream_text(p, 24)[1] for p in prompts]
    got = [None] * 16
    def run(i):
        got[i] = stream_text(prompts[i], 24)[1]
    threads = [threading.Thread(target=run, args=(i,)) for i in range(16)]
    for t in threads: t.start()
    for t in threads: t.join()
    for i in range(16):
        check(got[i] == solo[i], f"concurrent stream {i}: {got[i]!r} != solo {solo[i]!r}")

    # 4. Bad input: each answered as specified, the server keeps serving.
    st, e = request("POST", "/v1/chat/completions", raw="{oops")
    check(st == 400 and "error" in e, f"malformed JSON -> {st}")
    st, e = request("POST", "/v1/chat/completions", {"model": "qwen3", "messages": user, "temperature": "hot"})
    check(st == 400 and e["error"]["param"] == "temperature", f"wrong type -> {st} {e}")
    st, e = request("POST", "/v1/chat/completions", raw=" " * 100000)
    check(st == 413, f"huge body -> {st}")
    st, e = chat(user, 100000)
    check(st == 400 and "512" in e["error"]["message"], f"oversized max_tokens -> {st} {e}")
    st, e = chat([{"role": "user", "content": "word " * 1200}], 16)
    check(st == 400 and "1024" in e["error"]["message"], f"context overflow -> {st} {e}")
    st, e = request("POST", "/v1/chat/completions", {"model": "nope", "messages": user})
    check(st == 404 and e["error"]["code"] == "model_not_found", f"unknown model -> {st}")
    st, e = request("POST", "/v1/chat/completions", {"model": "qwen3", "messages": user}, key=None)
    check(st == 401, f"missing key -> {st}")
    st, e = request("POST", "/v1/messages", {"model": "qwen3", "messages": user, "max_tokens": 4}, key=None,
                    headers={"x-api-key": "wrong"})
    check(st == 401 and e.get("type") == "error", f"wrong key (anthropic) -> {st} {e}")
    # Disconnect mid-stream.
    sock = socket.create_connection(("127.0.0.1", PORT))
    body = json.dumps({"model": "qwen3", "messages": user, "max_tokens": 500, "stream": True})
    sock.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                  f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode())
    sock.recv(1000)
    sock.close()
    time.sleep(1.0)
    _, m = request("GET", "/metrics")
    active = [l for l in m.split("\n") if l.startswith("brisk_active_sequences")]
    check(active and active[0].endswith(" 0"), f"slot freed after disconnect: {active}")
    # (A non-streamed request whose client leaves: test_server_load.py, on a generation long
    # enough that the cancellation is certain.)
    st, r = chat(user, 4)
    check(st == 200, "still serving after bad input")

    # 5. Official SDKs (skipped when not fetched: scripts/fetch_server_test_assets.sh).
    sdk = os.path.join(SRC, "build", "test-assets", "server", "node_modules")
    if os.path.isdir(os.path.join(sdk, "openai")) and os.path.isdir(os.path.join(sdk, "@anthropic-ai")):
        env = dict(os.environ, NODE_PATH=sdk, BRISK_URL=f"http://127.0.0.1:{PORT}/v1", BRISK_BASE=f"http://127.0.0.1:{PORT}",
                   BRISK_KEY=KEY, BRISK_MODEL="qwen3")
        for script in ("sdk_openai.mjs", "sdk_anthropic.mjs"):
            # ESM ignores NODE_PATH: run from a copy next to node_modules.
            dst = os.path.join(os.path.dirname(sdk), script)
            with open(os.path.join(SRC, "tests", "server", script)) as f, open(dst, "w") as g:
                g.write(f.read())
            p = subprocess.run(["node", dst], env=env, capture_output=True, text=True, timeout=300)
            check(p.returncode == 0, f"{script}: {p.stdout}{p.stderr}")
            print(p.stdout.strip())
    else:
        print("note: SDK tests skipped (run scripts/fetch_server_test_assets.sh)")

    # 6. Soak: mixed good and bad requests; resident memory stays within 10%.
    for i in range(50):
        chat(user, 4)
    before = rss()
    for i in range(SOAK):
        k = i % 5
        if k == 0: chat([{"role": "user", "content": f"soak {i}"}], 8, user=f"u{i % 7}")
        elif k == 1: request("POST", "/v1/chat/completions", raw="{bad")
        elif k == 2: stream_text([{"role": "user", "content": f"s {i}"}], 6)
        elif k == 3: request("POST", "/v1/messages", {"model": "qwen3", "max_tokens": 4, "messages": user})
        else: chat(user, 100000)
    after = rss()
    print(f"soak: {SOAK} requests, resident memory {before / 1e6:.1f} MB -> {after / 1e6:.1f} MB")
    check(abs(after - before) <= 0.10 * before, f"memory drift {before} -> {after}")
finally:
    server.send_signal(signal.SIGTERM)
    try:
        rc = server.wait(timeout=30)
        check(rc == 0, f"exit code after SIGTERM {rc}")
    except subprocess.TimeoutExpired:
        server.kill()
        check(False, "server did not stop on SIGTERM")

if failures:
    print(f"{len(failures)} failures"); sys.exit(1)
print("server system test: ok")
