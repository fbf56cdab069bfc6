#!/usr/bin/env python3
"""`brisk template` as a user drives it: argument errors, missing or malformed files, variants,
and GGUF vs Hugging Face folder loading of the same model (shared data, when present)."""
import glob
import json
import os
import subprocess
import sys
import tempfile

SOURCE_DIR = os.environ.get("BRISK_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONV = os.path.join(SOURCE_DIR, "tests", "jinja", "conversations", "02_system_multi_turn.json")
failures = []


def brisk(*args):
    return subprocess.run([os.environ["BRISK_BIN"], "template", *args], capture_output=True)


def check(name, cond, detail=""):
    if not cond:
        failures.append(f"{name}: {detail}")


def main():
    if not os.environ.get("BRISK_BIN") or not os.path.exists(os.environ["BRISK_BIN"]):
        print("skip: BRISK_BIN not set")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        tpl = os.path.join(tmp, "t.jinja")
        with open(tpl, "w") as f:
            f.write("{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}{{ kw }}")
        conv = os.path.join(tmp, "c.json")
        with open(conv, "w") as f:
            json.dump({"messages": [{"role": "user", "content": "hé"}], "kwargs": {"kw": 7}}, f)
        r = brisk("--template", tpl, "--input", conv)
        check("render", r.returncode == 0 and r.stdout == "<user>hé\n7".encode(), r)

        r = brisk("--input", conv)
        check("needs a template", r.returncode == 2 and b"exactly one of" in r.stderr, r)
        r = brisk("--template", tpl)
        check("needs an input", r.returncode == 2 and b"--input" in r.stderr, r)
        r = brisk("--template", tpl, "--input", conv, "--bogus")
        check("unknown flag", r.returncode == 2, r)
        r = brisk("--template", os.path.join(tmp, "missing.jinja"), "--input", conv)
        check("missing template", r.returncode == 1 and b"cannot open" in r.stderr, r)
        with open(os.path.join(tmp, "bad.json"), "w") as f:
            f.write("{not json")
        r = brisk("--template", tpl, "--input", os.path.join(tmp, "bad.json"))
        check("bad json", r.returncode == 1 and b"invalid JSON" in r.stderr, r)
        with open(os.path.join(tmp, "bad.jinja"), "w") as f:
            f.write("line\n{% if %}")
        r = brisk("--template", os.path.join(tmp, "bad.jinja"), "--input", conv)
        check("syntax error position", r.returncode == 1 and b"bad.jinja:2:7: syntax error" in r.stderr, r)

        hf = os.path.join(tmp, "hf")
        os.makedirs(hf)
        with open(os.path.join(hf, "tokenizer_config.json"), "w") as f:
            json.dump({"chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]}, f)
        r = brisk("--model", hf, "--list")
        check("list variants", r.stdout == b"default\ntool_use\n", r)
        r = brisk("--model", hf, "--input", conv, "--variant", "tool_use")
        check("explicit variant", r.stdout == b"T", r)
        r = brisk("--model", hf, "--input", conv, "--variant", "nope")
        check("unknown variant", r.returncode == 1 and b"no chat template variant 'nope'" in r.stderr, r)

    shared = os.environ.get("BRISK_SHARED_DATA", "")
    for gguf in sorted(glob.glob(os.path.join(shared, "models", "*", "model-q8_0.gguf"))):
        hf = os.path.join(os.path.dirname(gguf), "hf")
        a, b = brisk("--model", gguf, "--input", CONV), brisk("--model", hf, "--input", CONV)
        check(f"gguf vs hf {gguf}", a.returncode == 0 and a.stdout == b.stdout and a.stdout, (a, b))

    for f in failures:
        print("FAIL", f)
    print("ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
