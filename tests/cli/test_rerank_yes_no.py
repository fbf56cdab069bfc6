#!/usr/bin/env python3
"""System test of a yes/no reranker (a causal LM scored as logit("yes") - logit("no") after the
Qwen3-Reranker prompt) through `brisk rerank` and `brisk serve`: the shared Qwen3 chat fixture
copied into a folder named tiny-Qwen3-Reranker (recognised by its name, as llama.cpp's converter
does) with "yes" and "no" added to its tokenizer. The CLI's scores, ordered, equal /v1/rerank's;
top_n and return_documents; --raw gives the logit difference whose sigmoid is the score;
--yes-no off makes it a chat model again (no classification head), and the served reranker
refuses chat. Exit 77 = skipped."""
import http.client
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_util import free_port  # noqa: E402

BIN = os.environ.get("BRISK_BIN", "")
SHARED = os.environ.get("BRISK_SHARED_DATA", "")
CHAT = os.path.join(SHARED, "models", "qwen3", "hf")
if not BIN or not os.path.exists(BIN):
    print("skip: BRISK_BIN not set"); sys.exit(77)
if not os.path.isdir(CHAT):
    print("skip: shared Qwen3 fixture missing"); sys.exit(77)

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(args):
    return subprocess.run([BIN] + args, capture_output=True, text=True, timeout=300)


tmp = tempfile.mkdtemp(prefix="brisk_yes_no_")
model = os.path.join(tmp, "tiny-Qwen3-Reranker")
shutil.copytree(CHAT, model)
tok = json.load(open(os.path.join(model, "tokenizer.json")))
n_vocab = json.load(open(os.path.join(model, "config.json")))["vocab_size"]
first_free = max(list(tok["model"]["vocab"].values()) + [a["id"] for a in tok["added_tokens"]]) + 1
assert first_free + 2 <= n_vocab, "the fixture's embedding has no free rows"
for i, word in enumerate(("yes", "no")):
    tok["added_tokens"].append({"id": first_free + i, "content": word, "single_word": False, "lstrip": False,
                                "rstrip": False, "normalized": False, "special": False})
json.dump(tok, open(os.path.join(model, "tokenizer.json"), "w"))

query = "what is brisk"
docs = ["brisk is an inference engine", "the weather is fine", "engines infer quickly", "brisk"]
try:
    p = run(["rerank", "-m", model, "--query", query, "-t", "2"] + docs)
    check(p.returncode == 0, f"rerank: {p.stderr}")
    cli = [json.loads(line) for line in p.stdout.splitlines()] if p.returncode == 0 else []
    check(len(cli) == len(docs) and all(0.0 < r["score"] < 1.0 for r in cli), f"scores {cli}")
    check([r["score"] for r in cli] == sorted((r["score"] for r in cli), reverse=True), "ordered")
    check(len(set(r["score"] for r in cli)) == len(docs), "each document its own score")
    p = run(["rerank", "-m", model, "--query", query, "--raw", "-t", "2"] + docs)
    raw = {r["index"]: r["score"] for r in map(json.loads, p.stdout.splitlines())} if p.returncode == 0 else {}
    check(all(abs(1.0 / (1.0 + math.exp(-raw[r["index"]])) - r["score"]) < 1e-6 for r in cli if r["index"] in raw)
          and len(raw) == len(docs), "--raw: the logit difference whose sigmoid is the score")
    p = run(["rerank", "-m", model, "--query", query, "--yes-no", "off", "-t", "2"] + docs)
    check(p.returncode != 0 and "embedding model" in p.stderr, f"--yes-no off: {p.stderr}")

    port = free_port()
    server = subprocess.Popen([BIN, "serve", "--model", f"ranker={model}", "--port", str(port), "-t", "2",
                               "--device", "cpu"], stderr=subprocess.PIPE, text=True)
    log = []
    threading.Thread(target=lambda: log.extend(server.stderr), daemon=True).start()
    for _ in range(600):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)

    def post(path, body):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, json.loads(r.read() or b"null")

    try:
        st, j = post("/v1/rerank", {"model": "ranker", "query": query, "documents": docs, "return_documents": True})
        check(st == 200, f"/v1/rerank: {st} {j}")
        if st == 200 and cli:
            got = [(r["index"], r["relevance_score"]) for r in j["results"]]
            want = [(r["index"], r["score"]) for r in cli]
            check([i for i, _ in got] == [i for i, _ in want], f"order {got} vs {want}")
            check(all(abs(a[1] - b[1]) < 1e-5 for a, b in zip(got, want)), "server scores equal the CLI's")
            check(all(r["document"]["text"] == docs[r["index"]] for r in j["results"]), "return_documents")
        st, j = post("/rerank", {"model": "ranker", "query": query, "documents": docs, "top_n": 2})
        check(st == 200 and len(j["results"]) == 2, f"top_n: {st}")
        st, j = post("/v1/chat/completions", {"model": "ranker", "messages": [{"role": "user", "content": "hi"}]})
        check(st == 400, f"the reranker asked to chat: {st} {j}")
    finally:
        server.terminate()
        server.wait(timeout=30)
finally:
    shutil.rmtree(tmp, ignore_errors=True)

if failures:
    print(f"{len(failures)} failures"); sys.exit(1)
print("yes/no reranker system test: ok")
