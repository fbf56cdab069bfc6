#!/usr/bin/env python3
"""System test of `brisk bench`: the JSON report of a short run on a fixture model has the
tests asked for, positive speeds, the bytes per token of the model (weights, plus a hybrid's
recurrent state read and written per token), a probe per decode
repetition and the fraction computed from them; a list of depths gives every test per depth and
the ratio of decode speeds; the table names pp and tg; --tp 2 runs on 2 CPU ranks; bad arguments
are errors."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_util import skip_missing  # noqa: E402

BIN = os.environ.get("BRISK_BIN", "")
DATA = os.environ.get("BRISK_SHARED_DATA", "")


def run(*args):
    return subprocess.run([BIN, "bench", *args], capture_output=True, text=True)


def main():
    model = os.path.join(DATA, "models", "qwen3", "model-q8_0.gguf")
    if not BIN:
        print("skip: BRISK_BIN not set")
        return 77
    if not os.path.exists(model):
        return skip_missing(model + " missing (shared data)")
    failures = []
    p = run("-m", model, "-p", "16", "-n", "4", "-r", "2", "-t", "2", "--depth", "8", "--json", "--bw-mib", "16")
    if p.returncode != 0:
        print("FAIL: bench --json:", p.stderr)
        return 1
    j = json.loads(p.stdout)
    names = [t["test"] for t in j["tests"]]
    if names != ["pp16 @ d8", "tg4 @ d8"]:
        failures.append("tests %r" % names)
    for t in j["tests"]:
        if len(t["samples"]) != 2 or not all(s > 0 for s in t["samples"]) or t["tokens_per_s"] <= 0 or t["sd"] < 0:
            failures.append("bad samples %r" % t)
    if j["weight_bytes_per_token"] <= 0 or j["read_bandwidth_bytes_per_s"] <= 0:
        failures.append("bytes/token %r, bandwidth %r" % (j["weight_bytes_per_token"], j["read_bandwidth_bytes_per_s"]))
    # A model without recurrent layers moves its weights only.
    if j["state_bytes_per_token"] != 0 or j["bytes_per_token"] != j["weight_bytes_per_token"]:
        failures.append("dense bytes/token %r" % {k: j[k] for k in ("weight_bytes_per_token", "state_bytes_per_token",
                                                                     "bytes_per_token")})
    # Each decode repetition is divided by the probe taken right before it.
    tgt = j["tests"][1]
    bws = tgt.get("read_bandwidth_samples", [])
    if len(bws) != 2 or not all(b > 0 for b in bws):
        failures.append("probe samples %r" % bws)
    else:
        expect = sum(t * j["bytes_per_token"] / b for t, b in zip(tgt["samples"], bws)) / len(bws)
        for got in (tgt["bandwidth_fraction"], j["decode_bandwidth_fraction"]):
            if abs(got - expect) > 1e-9 * max(1.0, expect):
                failures.append("fraction %r, expected %r" % (got, expect))
    if j["threads"] != 2 or j["mmap"] is not False or j["depth"] != 8 or j["depths"] != [8]:
        failures.append("echoed options %r" % {k: j[k] for k in ("threads", "mmap", "depth", "depths")})

    # A list of depths: every test per depth, in the order given, and the ratio line.
    p = run("-m", model, "-p", "0", "-n", "3", "-r", "2", "--depth", "0,16", "--bw-mib", "16")
    if p.returncode != 0 or "| tg3 |" not in p.stdout or "| tg3 @ d16 |" not in p.stdout or "tg3 @ d16 / tg3:" not in p.stdout:
        failures.append("depth list: %r %r" % (p.stdout, p.stderr))
    p = run("-m", model, "-p", "0", "-n", "3", "-r", "1", "--depth", "16,0", "--json", "--bw-mib", "16")
    if p.returncode != 0 or [t["test"] for t in json.loads(p.stdout)["tests"]] != ["tg3 @ d16", "tg3"]:
        failures.append("depth list json: %r %r" % (p.stdout, p.stderr))

    p = run("-m", model, "-p", "8", "-n", "2", "-r", "1", "--mmap", "--bw-mib", "16")
    if p.returncode != 0 or "| pp8 |" not in p.stdout or "| tg2 |" not in p.stdout:
        failures.append("table output: %r %r" % (p.stdout, p.stderr))
    # A hybrid's recurrent state is read and written per token: counted in B/token and said so.
    hybrid = os.path.join(tempfile.mkdtemp(prefix="brisk_bench_"), "hybrid.gguf")
    p = subprocess.run([BIN, "make-random-model", "--shape", "tiny-hybrid", "--type", "q8_0", "--out", hybrid],
                       capture_output=True, text=True)
    if p.returncode != 0:
        failures.append("make-random-model tiny-hybrid: %r" % p.stderr)
    else:
        p = run("-m", hybrid, "-p", "0", "-n", "2", "-r", "1", "--json", "--bw-mib", "16")
        h = json.loads(p.stdout) if p.returncode == 0 else {}
        if (h.get("state_bytes_per_token", 0) <= 0
                or h["bytes_per_token"] != h["weight_bytes_per_token"] + h["state_bytes_per_token"]):
            failures.append("hybrid bytes/token: %r %r" % (p.stdout, p.stderr))
        p = run("-m", hybrid, "-p", "0", "-n", "2", "-r", "1", "--bw-mib", "16")
        if p.returncode != 0 or "of recurrent state (read and written once per token)" not in p.stdout:
            failures.append("hybrid legend: %r %r" % (p.stdout, p.stderr))
        os.remove(hybrid)
        os.rmdir(os.path.dirname(hybrid))
    # Tensor parallelism over 2 CPU ranks (F32: the q8_0 MLP's 80 columns per rank are not whole blocks).
    f32 = os.path.join(DATA, "models", "qwen3", "model-f32.gguf")
    p = run("-m", f32, "-p", "8", "-n", "4", "-r", "1", "-t", "2", "--device", "cpu", "--tp", "2", "--json",
            "--bw-mib", "16")
    if p.returncode != 0 or json.loads(p.stdout).get("tp") != 2:
        failures.append("bench --tp 2: %r %r" % (p.stdout, p.stderr))
    p = run("-m", model, "-p", "8", "-n", "4", "-r", "1", "--device", "cpu", "--tp", "2", "--bw-mib", "16")
    if p.returncode == 0 or "block boundaries" not in p.stderr:
        failures.append("bench --tp 2 of a q8_0 MLP of 80 columns per rank: %r" % p.stderr)
    for bad in (["-m", model, "-r", "0"], ["-m", model, "-p", "x"], ["-p", "8"], ["-m", model, "--bogus"],
                ["-m", model, "--tp", "0"],
                ["-m", model, "--depth", "0,x"], ["-m", model, "--depth", "0,"], ["-m", model, "--depth", "-4"],
                ["-m", os.path.join(DATA, "missing.gguf"), "--bw-mib", "16"]):
        p = run(*bad)
        if p.returncode == 0 or not p.stderr.strip():
            failures.append("accepted %r" % bad)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
