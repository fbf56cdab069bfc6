#!/usr/bin/env python3
"""Aggregate decode throughput of `brisk serve` with 1 and with N concurrent streams.
usage: bench_streams.py PORT [N=8] [TOKENS=64]
Each stream is a /v1/completions request (ignore_eos, greedy) with a distinct short prompt;
throughput = completion tokens of all streams / wall time from first request to last token."""
import http.client
import json
import sys
import threading
import time

port = int(sys.argv[1])
n = int(sys.argv[2]) if len(sys.argv) > 2 else 8
tokens = int(sys.argv[3]) if len(sys.argv) > 3 else 64


def one(i, out):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = {"prompt": f"Stream {i} says hello", "max_tokens": tokens, "temperature": 0, "ignore_eos": True}
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = json.loads(c.getresponse().read())
    out[i] = r["usage"]["completion_tokens"]


def run(k):
    out = [0] * k
    ts = [threading.Thread(target=one, args=(i, out)) for i in range(k)]
    t0 = time.time()
    for t in ts: t.start()
    for t in ts: t.join()
    dt = time.time() - t0
    return sum(out) / dt


run(1)  # warm up
single = run(1)
multi = run(n)
print(f"1 stream: {single:.2f} tok/s; {n} streams: {multi:.2f} tok/s aggregate; ratio {multi / single:.2f}x")
