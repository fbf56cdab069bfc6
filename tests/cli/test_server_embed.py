#!/usr/bin/env python3
"""System test of `brisk serve` with encoder models: the shared BERT fixture (no tokenizer: token-id
inputs) and a cross-encoder made from it (a classification head added), beside the Qwen3 chat
fixture. /v1/embeddings (ids, arrays of ids, float and base64, dimensions, usage, the vector equal to
transformers' mean pooling), the rerank routes (scores ordered, top_n, return_documents), Ollama's
/api/embed and /api/embeddings, concurrent requests sharing forwards, each model kind refusing the
other's routes, bad input answered 4xx with a JSON error while the server keeps serving, and the
official OpenAI SDK's embeddings.create (float and base64) when fetched. Exit 77 = skipped."""
import base64
import http.client
import json
import math
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_util import free_port  # noqa: E402

BIN = os.environ.get("BRISK_BIN", "")
SHARED = os.environ.get("BRISK_SHARED_DATA", "")
SRC = os.environ.get("BRISK_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BERT = os.path.join(SHARED, "models", "wave2", "bert_embed")
CHAT = os.path.join(SHARED, "models", "qwen3", "hf")
KEY = "embed-key"

if not BIN or not os.path.exists(BIN):
    print("skip: BRISK_BIN not set"); sys.exit(77)
if not os.path.isdir(BERT):
    print("skip: shared BERT fixture missing"); sys.exit(77)

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)




def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = (v["shape"], data[a:b])
    return out


def write_safetensors(path, tensors):
    head, blobs, off = {}, [], 0
    for k, (shape, raw) in tensors.items():
        head[k] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(head).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


tmp = tempfile.mkdtemp(prefix="brisk_embed_")
# A cross-encoder: the fixture's encoder under bert., its pooler, and a 1-label classifier.
ranker = os.path.join(tmp, "ranker")
os.makedirs(ranker)
cfg = json.load(open(os.path.join(BERT, "hf", "config.json")))
cfg["architectures"] = ["BertForSequenceClassification"]
cfg["id2label"] = {"0": "LABEL_0"}
json.dump(cfg, open(os.path.join(ranker, "config.json"), "w"))
t = {"bert." + k: v for k, v in read_safetensors(os.path.join(BERT, "hf", "model.safetensors")).items()}
rng = random.Random(5)
d = cfg["hidden_size"]
t["classifier.weight"] = ([1, d], struct.pack(f"<{d}f", *[rng.gauss(0, 0.3) for _ in range(d)]))
t["classifier.bias"] = ([1], struct.pack("<f", 0.1))
write_safetensors(os.path.join(ranker, "model.safetensors"), t)

ref = json.load(open(os.path.join(BERT, "ref.json")))
PORT = free_port()
args = [BIN, "serve", "--model", f"bert={os.path.join(BERT, 'hf')}", "--model", f"ranker={ranker}", "--port", str(PORT),
        "--api-key", KEY, "--max-models", "3", "-t", "2", "--device", "cpu"]
have_chat = os.path.isdir(CHAT)
if have_chat:
    args += ["--model", f"qwen3={CHAT}", "--ctx", "512"]
server = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
log = []
threading.Thread(target=lambda: log.extend(server.stderr), daemon=True).start()
for _ in range(600):
    try:
        socket.create_connection(("127.0.0.1", PORT), timeout=0.2).close()
        break
    except OSError:
        time.sleep(0.1)


def post(path, body, raw=None):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=300)
    data = raw if raw is not None else json.dumps(body)
    c.request("POST", path, body=data, headers={"Content-Type": "application/json", "Authorization": "Bearer " + KEY})
    r = c.getresponse()
    text = r.read()
    try:
        j = json.loads(text)
    except ValueError:
        j = None
    return r.status, j


def is_error(st, j, status, needle=""):
    return st == status and isinstance(j, dict) and "error" in j and needle in json.dumps(j["error"])


try:
    ids = ref["input_ids"]
    st, j = post("/v1/embeddings", {"model": "bert", "input": ids})
    check(st == 200, f"ids: {st} {j}")
    if st == 200:
        v = j["data"][0]["embedding"]
        want = ref["mean_pooled"]
        check(len(v) == len(want), "width")
        check(max(abs(a - b) for a, b in zip(v, want)) < 1e-5, "mean pooled vector equals transformers'")
        check(j["usage"]["prompt_tokens"] == len(ids), f"usage {j['usage']}")
        check(j["object"] == "list" and j["data"][0]["object"] == "embedding" and j["model"] == "bert", "shape")
    st, j = post("/v1/embeddings", {"model": "bert", "input": [ids, ids[:5], [7]], "encoding_format": "base64"})
    check(st == 200 and len(j["data"]) == 3, f"base64: {st}")
    if st == 200:
        raw = base64.b64decode(j["data"][0]["embedding"])
        v = struct.unpack(f"<{len(raw) // 4}f", raw)
        check(max(abs(a - b) for a, b in zip(v, ref["mean_pooled"])) < 1e-5, "base64 decodes to the vector")
        check([x["index"] for x in j["data"]] == [0, 1, 2], "indices")
        check(j["usage"]["prompt_tokens"] == len(ids) + 6, "usage of 3 inputs")
    st, j = post("/v1/embeddings", {"model": "bert", "input": ids, "dimensions": 8})
    check(st == 200 and len(j["data"][0]["embedding"]) == 8, "dimensions")

    # Concurrent requests: all answered with the vector each gets alone.
    alone = {}
    for n in range(1, 9):
        st, j = post("/v1/embeddings", {"model": "bert", "input": ids[:n + 3]})
        alone[n] = j["data"][0]["embedding"]
    results = {}

    def one(n):
        st, j = post("/v1/embeddings", {"model": "bert", "input": ids[:n + 3]})
        results[n] = (st, j)
    threads = [threading.Thread(target=one, args=(n,)) for n in range(1, 9)]
    for th in threads: th.start()
    for th in threads: th.join()
    for n in range(1, 9):
        st, j = results[n]
        check(st == 200 and max(abs(a - b) for a, b in zip(j["data"][0]["embedding"], alone[n])) < 1e-5,
              f"concurrent request {n}")

    # Bad input: 4xx with a JSON error, the server keeps serving.
    check(is_error(*post("/v1/embeddings", {"model": "bert", "input": "hello"}), 400, "tokenizer"), "text without tokenizer")
    long = [5] * 200
    check(is_error(*post("/v1/embeddings", {"model": "bert", "input": [ids, long]}), 400, "input 1"), "too long names index")
    st, j = post("/v1/embeddings", {"model": "bert", "input": [long], "truncate": True})
    check(st == 200 and j["usage"]["prompt_tokens"] == 128, f"truncate: {st} {j and j.get('usage')}")
    check(is_error(*post("/v1/embeddings", {"model": "bert", "input": [1, 99999]}), 400, "input"), "id out of range")
    check(is_error(*post("/v1/embeddings", {"model": "bert", "input": []}), 400, "input"), "empty input")
    check(is_error(*post("/v1/embeddings", {"model": "bert", "input": [[]]}), 400, "input"), "empty inner input")
    check(is_error(*post("/v1/embeddings", {"model": "bert"}), 400, "input"), "missing input")
    check(is_error(*post("/v1/embeddings", {"model": "bert", "input": ids, "encoding_format": "hex"}), 400,
                   "encoding_format"), "bad encoding_format")
    check(is_error(*post("/v1/embeddings", {"model": "bert", "input": ids, "dimensions": 4096}), 400, "dimensions"),
          "dimensions too large")
    check(is_error(*post("/v1/embeddings", None, raw="{not json"), 400), "malformed JSON")
    check(is_error(*post("/v1/embeddings", {"model": "nope", "input": ids}), 404), "unknown model")
    check(is_error(*post("/v1/chat/completions", {"model": "bert", "messages": [{"role": "user", "content": "hi"}]}),
                   400, "embedding model"), "embedding model asked to chat")
    if have_chat:
        check(is_error(*post("/v1/embeddings", {"model": "qwen3", "input": "hi"}), 400, "not an embedding model"),
              "chat model asked for embeddings")

    # Rerank: the cross-encoder's sigmoid scores, ordered; top_n and return_documents.
    docs = [ids[1:6], ids[3:12], [9, 8, 7, 6]]
    for path in ("/v1/rerank", "/rerank", "/v2/rerank"):
        st, j = post(path, {"model": "ranker", "query": ids[1:4], "documents": docs})
        check(st == 200 and len(j["results"]) == 3, f"{path}: {st} {j}")
        if st == 200:
            s = [r["relevance_score"] for r in j["results"]]
            check(s == sorted(s, reverse=True) and all(0 < x < 1 for x in s), f"{path}: ordered sigmoid scores {s}")
            check(sorted(r["index"] for r in j["results"]) == [0, 1, 2], f"{path}: indices")
    st, j = post("/v1/rerank", {"model": "ranker", "query": ids[1:4], "documents": docs, "top_n": 1})
    check(st == 200 and len(j["results"]) == 1, "top_n")
    check(is_error(*post("/v1/rerank", {"model": "bert", "query": [1], "documents": [[2]]}), 400, "classification head"),
          "rerank on an embedding model")
    check(is_error(*post("/v1/rerank", {"model": "ranker", "query": [1], "documents": []}), 400, "documents"),
          "rerank without documents")
    check(is_error(*post("/v1/rerank", {"model": "ranker", "query": "text", "documents": ["a"]}), 400, "tokenizer"),
          "rerank text without tokenizer")

    # Ollama: /api/embed normalises; /api/embeddings gives the pipeline's vector.
    st, j = post("/api/embed", {"model": "bert", "input": [ids]})
    check(st == 200 and len(j["embeddings"]) == 1 and j["prompt_eval_count"] == len(ids), f"/api/embed: {st} {j}")
    if st == 200:
        v = j["embeddings"][0]
        check(max(abs(a - b) for a, b in zip(v, ref["mean_pooled_normalized"])) < 1e-5, "/api/embed normalised vector")
    check(is_error(*post("/api/embeddings", {"model": "bert", "prompt": "x"}), 400, "tokenizer"), "/api/embeddings text")

    st, j = post("/v1/embeddings", {"model": "bert", "input": ids})
    check(st == 200, f"still serving after bad input: {st}")

    sdk = os.path.join(SRC, "build", "test-assets", "server", "node_modules")
    if os.path.isdir(os.path.join(sdk, "openai")):
        dst = os.path.join(os.path.dirname(sdk), "sdk_openai_embed.mjs")
        shutil.copyfile(os.path.join(SRC, "tests", "server", "sdk_openai_embed.mjs"), dst)
        env = dict(os.environ, BRISK_URL=f"http://127.0.0.1:{PORT}/v1", BRISK_KEY=KEY, BRISK_MODEL="bert",
                   BRISK_DIM=str(len(ref["mean_pooled"])), BRISK_IDS=json.dumps([ids, ids[2:9]]))
        p = subprocess.run(["node", dst], env=env, capture_output=True, text=True, timeout=600)
        check(p.returncode == 0, f"sdk_openai_embed.mjs: {p.stdout}{p.stderr}")
        print(p.stdout.strip())
    else:
        print("note: SDK test skipped (run scripts/fetch_server_test_assets.sh)")
finally:
    server.send_signal(signal.SIGTERM)
    try:
        rc = server.wait(timeout=30)
        check(rc == 0, f"exit code after SIGTERM {rc}")
    except subprocess.TimeoutExpired:
        server.kill()
        check(False, "server did not stop on SIGTERM")
    shutil.rmtree(tmp, ignore_errors=True)

if failures:
    print("".join(log[-40:]))
    print(f"{len(failures)} failures"); sys.exit(1)
print("server embeddings system test: ok")
