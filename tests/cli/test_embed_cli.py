#!/usr/bin/env python3
"""System test of `brisk embed` and `brisk embed-bench` on the shared BERT fixture (no tokenizer:
--ids): JSON lines, the vector equal to transformers' mean pooling, stdin lines, --dimensions,
--pooling cls, errors for text without a tokenizer and for too-long inputs. Exit 77 = skipped."""
import json
import os
import subprocess
import sys

BIN = os.environ.get("BRISK_BIN", "")
SHARED = os.environ.get("BRISK_SHARED_DATA", "")
BERT = os.path.join(SHARED, "models", "wave2", "bert_embed")
if not BIN or not os.path.exists(BIN):
    print("skip: BRISK_BIN not set"); sys.exit(77)
if not os.path.isdir(BERT):
    print("skip: shared BERT fixture missing"); sys.exit(77)

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(args, stdin=None):
    return subprocess.run([BIN] + args, input=stdin, capture_output=True, text=True, timeout=300)


ref = json.load(open(os.path.join(BERT, "ref.json")))
ids = ",".join(str(i) for i in ref["input_ids"])
model = os.path.join(BERT, "hf")
p = run(["embed", "-m", model, "--ids", ids, "1,2,3", "-t", "2"])
check(p.returncode == 0, f"embed: {p.stderr}")
lines = [json.loads(l) for l in p.stdout.splitlines()]
check(len(lines) == 2 and lines[0]["index"] == 0 and lines[0]["tokens"] == len(ref["input_ids"]), f"lines {p.stdout[:200]}")
if lines:
    check(max(abs(a - b) for a, b in zip(lines[0]["embedding"], ref["mean_pooled"])) < 1e-5, "mean pooled vector")
p = run(["embed", "-m", model, "--ids", "--pooling", "cls", "-t", "2"], stdin=ids + "\n")
check(p.returncode == 0, f"stdin: {p.stderr}")
if p.returncode == 0:
    v = json.loads(p.stdout.splitlines()[0])["embedding"]
    check(max(abs(a - b) for a, b in zip(v, ref["cls"])) < 1e-4, "--pooling cls from stdin")
p = run(["embed", "-m", model, "--ids", ids, "--dimensions", "8", "-t", "2"])
check(p.returncode == 0 and len(json.loads(p.stdout)["embedding"]) == 8, "--dimensions")
p = run(["embed", "-m", model, "hello"])
check(p.returncode != 0 and "tokenizer" in p.stderr, f"text without tokenizer: {p.stderr}")
p = run(["embed", "-m", model, "--ids", ",".join(["5"] * 200)])
check(p.returncode != 0 and "input 0 has 200 tokens" in p.stderr, f"too long: {p.stderr}")
p = run(["embed", "-m", model, "--ids", ",".join(["5"] * 200), "--truncate", "-t", "2"])
check(p.returncode == 0 and json.loads(p.stdout)["tokens"] == 128, f"--truncate: {p.stderr}")
p = run(["rerank", "-m", model, "--query", "1,2", "--ids", "3,4"])
check(p.returncode != 0 and "classification head" in p.stderr, f"rerank without a head: {p.stderr}")
p = run(["embed-bench", "--shape", "bert-tiny", "-n", "8", "-l", "32", "-r", "1", "-t", "2"])
check(p.returncode == 0 and "tokens/s" in p.stdout and "query of 16 tokens" in p.stdout, f"embed-bench: {p.stdout}{p.stderr}")
# An unknown device is a usage error naming it, not a crash.
p = run(["embed-bench", "--shape", "bert-tiny", "-n", "1", "-l", "4", "-r", "1", "--device", "tpu"])
check(p.returncode != 0 and "tpu" in p.stderr, f"embed-bench --device tpu: {p.returncode} {p.stderr}")

if failures:
    print(f"{len(failures)} failures"); sys.exit(1)
print("embed cli system test: ok")
