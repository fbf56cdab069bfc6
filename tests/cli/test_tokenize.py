#!/usr/bin/env python3
"""`brisk tokenize` driven as a user would: a tokenizer folder and a GGUF file of the tiny
fixture models give the reference prompt ids; --file, --show-pieces, --parse-special and
--add-special work; bad input gives an error message and a non-zero exit."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_util import skip_missing  # noqa: E402

BIN = os.environ.get("BRISK_BIN", "build/release/brisk")
DATA = os.environ.get("BRISK_SHARED_DATA", "../shared/data")


def run(*args, ok=True):
    p = subprocess.run([BIN, "tokenize", *args], capture_output=True, text=True, timeout=120)
    if ok and p.returncode != 0:
        raise AssertionError(f"brisk tokenize {args} failed ({p.returncode}): {p.stderr}")
    return p


def main():
    model = os.path.join(DATA, "models", "qwen3")
    if not os.path.exists(os.path.join(model, "ref.json")):
        return skip_missing(f"{model} missing (shared data)")
    ref = json.load(open(os.path.join(model, "ref.json"), encoding="utf-8"))
    want = " ".join(map(str, ref["input_ids"]))
    failures = 0

    def check(name, cond, detail=""):
        nonlocal failures
        print(("ok   " if cond else "FAIL ") + name + ("" if cond else f": {detail}"))
        failures += 0 if cond else 1

    out = run("--model", os.path.join(model, "hf"), ref["prompt"]).stdout.strip()
    check("hf folder ids", out == want, out)
    gguf = os.path.join(model, "model-f32.gguf")
    if os.path.exists(gguf):
        out = run("--model", gguf, ref["prompt"]).stdout.strip()
        check("gguf ids", out == want, out)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        f.write(ref["prompt"])
    out = run("--model", os.path.join(model, "hf"), "--file", f.name).stdout.strip()
    os.unlink(f.name)
    check("--file", out == want, out)

    lines = run("--model", os.path.join(model, "hf"), "--show-pieces", "Hello\nworld").stdout.splitlines()
    check("--show-pieces", len(lines) >= 2 and all("\t" in l for l in lines) and "\\n" in "".join(lines),
          repr(lines))

    plain = run("--model", os.path.join(model, "hf"), "<|im_end|>").stdout.split()
    parsed = run("--model", os.path.join(model, "hf"), "--parse-special", "<|im_end|>").stdout.split()
    check("--parse-special", len(parsed) == 1 and len(plain) > 1, f"{plain} {parsed}")

    bad = run("--model", "/nonexistent/model", "x", ok=False)
    check("missing model fails", bad.returncode != 0 and "nonexistent" in bad.stderr, bad.stderr)
    usage = run("--model", os.path.join(model, "hf"), ok=False)
    check("no text is a usage error", usage.returncode == 2, usage.stderr)

    print(f"{7 - failures if os.path.exists(gguf) else 6 - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
