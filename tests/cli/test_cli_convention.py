#!/usr/bin/env python3
"""The CLI convention of docs/cli.md, checked on every registered command:

- `brisk CMD --help` and `-h` print the usage on stdout (nothing on stderr) and exit 0;
- an unknown option is a usage error: exit 2 and one line `brisk CMD: error: ...` on stderr;
- every command whose usage lists `-m, --model` takes the model as `-m M`, `--model M` and as
  the first positional `M`, with the same result (MODEL_FORMS says how each one is run; a command
  that takes a model and is missing there fails the test);
- llama.cpp's spellings (-c/--ctx-size, -n/--n-predict, -s/--seed, --temperature, -t/--threads,
  -p/--prompt, -ngl) are accepted; out-of-range values are usage errors naming the option;
- `brisk --version` names the commit.

Runs on a tiny Llama checkpoint written by tiny_hf.py (no shared data needed)."""
import json
import math
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import wave

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_hf  # noqa: E402
from cli_util import BIN, brisk, main  # noqa: E402


def commands():
    out = brisk("help").stdout
    names = re.findall(r"^  (\S+)\s", out.split("commands:", 1)[1], re.M)
    return [n for n in names if not n.startswith("`")]


def serve_models(form, listen=("--port", "0")):
    """Starts `brisk serve FORM`, returns what `brisk ps` says (exit status, first model), stops it."""
    p = subprocess.Popen([BIN, "serve", *form, *listen, "-t", "1"], stderr=subprocess.PIPE, text=True,
                         stdout=subprocess.DEVNULL)
    where = None
    deadline = time.time() + 60
    lines = []
    while time.time() < deadline:
        line = p.stderr.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(r"listening on (?:http://127\.0\.0\.1:(\d+)|unix:(\S+))", line)
        if m:
            where = ["--port", m.group(1)] if m.group(1) else ["--unix", m.group(2)]
            break
    try:
        if where is None:
            return "no listening line: " + "".join(lines)
        ps = brisk("ps", *where)
        return (ps.returncode, ps.stdout.split("\n")[1].split()[0] if ps.returncode == 0 else ps.stderr)
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()


def make_hub_cache(root):
    """A Hugging Face cache holding test-org/Tiny-GGUF@main with one GGUF file."""
    repo = os.path.join(root, "hub", "models--test-org--Tiny-GGUF")
    commit = "0123456789abcdef0123456789abcdef01234567"
    os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
    os.makedirs(os.path.join(repo, "blobs"), exist_ok=True)
    os.makedirs(os.path.join(repo, "snapshots", commit), exist_ok=True)
    with open(os.path.join(repo, "refs", "main"), "w") as f:
        f.write(commit)
    with open(os.path.join(repo, "blobs", "b" * 64), "wb") as f:
        f.write(b"GGUF" + bytes(60))
    os.symlink(os.path.join("..", "..", "blobs", "b" * 64), os.path.join(repo, "snapshots", commit, "tiny-Q8_0.gguf"))


def run_checks(check, tmp):
    model = tiny_hf.write(os.path.join(tmp, "tiny"))
    conv = os.path.join(tmp, "conv.json")
    with open(conv, "w") as f:
        json.dump({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": True}, f)

    v = brisk("--version")
    check("--version", v.returncode == 0 and re.match(r"^brisk \S+ \(commit \S+\)$", v.stdout.strip()), v.stdout)

    cmds = commands()
    check("commands listed", len(cmds) >= 15 and "generate" in cmds and "ps" in cmds, cmds)
    takes_model = []
    for c in cmds:
        for flag in ("--help", "-h"):
            r = brisk(c, flag)
            check("%s %s exit 0" % (c, flag), r.returncode == 0, r.returncode)
            check("%s %s on stdout" % (c, flag), r.stdout.startswith("usage: brisk " + c), r.stdout[:80])
            check("%s %s nothing on stderr" % (c, flag), r.stderr == "", r.stderr[:200])
        r = brisk("help", c)
        check("help %s" % c, r.returncode == 0 and r.stdout.startswith("usage: brisk " + c), r.stdout[:80])
        if re.search(r"^  -m, --model ", brisk(c, "--help").stdout, re.M):
            takes_model.append(c)
        r = brisk(c, "--no-such-option")
        check("%s unknown option: exit 2" % c, r.returncode == 2, (r.returncode, r.stderr))
        lines = r.stderr.splitlines()
        check("%s unknown option: one line with the prefix" % c,
              len(lines) == 1 and lines[0].startswith("brisk %s: error: " % c), r.stderr)
    r = brisk("no-such-command")
    check("unknown command", r.returncode == 2 and r.stderr.startswith("brisk: error: unknown command"), r.stderr)

    # ---- the model argument: -m M, --model M and positional M give the same result ----------
    gguf = os.path.join(tmp, "tiny-f32.gguf")
    q = brisk("quantize", model, gguf, "F32")
    check("quantize the fixture", q.returncode == 0, q.stderr)
    hub_env = {"HF_HOME": os.path.join(tmp, "hf"), "HF_HUB_OFFLINE": "1"}
    dump_dir = os.path.join(tmp, "dump")

    def plain(cmd, rest, env=None):
        def go(form):
            r = brisk(cmd, *form, *rest, env=env)
            return (r.returncode, r.stdout)
        return go

    def quantize(form):
        out = os.path.join(tmp, "q-%d.gguf" % len(form))
        r = brisk("quantize", *form, out, "Q8_0")
        return (r.returncode, open(out, "rb").read() if r.returncode == 0 else r.stderr)

    def bench(form):
        r = brisk("bench", *form, "-p", "8", "-n", "2", "-r", "1", "--json", "--bw-mib", "4", "-t", "1")
        if r.returncode != 0:
            return (r.returncode, r.stderr)
        j = json.loads(r.stdout)
        return (0, j["model"], j["n_params"], [t["test"] for t in j["tests"]])

    def rm(form):
        shutil.rmtree(hub_env["HF_HOME"], ignore_errors=True)
        make_hub_cache(hub_env["HF_HOME"])
        r = brisk("rm", *form, env=hub_env)
        return (r.returncode, r.stdout, os.path.exists(os.path.join(hub_env["HF_HOME"], "hub", "models--test-org--Tiny-GGUF")))

    def pull(form):
        shutil.rmtree(hub_env["HF_HOME"], ignore_errors=True)
        make_hub_cache(hub_env["HF_HOME"])
        r = brisk("pull", *form, env=hub_env)
        return (r.returncode, r.stdout)

    def transcribe(form):
        r = brisk("transcribe", *form, wav, "--format", "json", "--language", "en", "-n", "4", "-t", "1")
        return (r.returncode, r.stdout if r.returncode == 0 else r.stderr)

    # A random speech model with a tokenizer (tools/make_random_whisper.py) and one second of a tone.
    whisper = os.path.join(tmp, "whisper")
    g = subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                                                     "make_random_whisper.py"), whisper, "--shape", "tiny-test"],
                       capture_output=True, text=True)
    check("make_random_whisper", g.returncode == 0, g.stderr)
    wav = os.path.join(tmp, "tone.wav")
    with wave.open(wav, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * i / 16000)))
                               for i in range(16000)))

    # Random encoders (an embedding model and a cross-encoder) without tokenizers: token ids.
    bert = os.path.join(tmp, "bert.gguf")
    ranker = os.path.join(tmp, "ranker.gguf")
    for shape, out in (("bert-tiny", bert), ("bert-tiny-rerank", ranker)):
        g = brisk("make-random-model", "--shape", shape, "--out", out)
        check("make-random-model " + shape, g.returncode == 0, g.stderr)

    def embed_bench(form):
        r = brisk("embed-bench", *form, "-n", "2", "-l", "8", "-q", "4", "-r", "1", "-t", "1")
        return (r.returncode, r.stdout.splitlines()[0] if r.returncode == 0 and r.stdout else r.stderr)

    model_forms = {
        "embed": (bert, plain("embed", ["--ids", "1,2,3", "-t", "1"])),
        "rerank": (ranker, plain("rerank", ["--query", "1,2", "--ids", "3,4", "5", "-t", "1"])),
        "embed-bench": (bert, embed_bench),
        "generate": (model, plain("generate", ["--prompt-ids", "72,101,108", "-n", "4", "--show-ids", "-t", "1"])),
        "run": (model, plain("run", ["Hello", "-n", "4", "--temp", "0", "-t", "1"])),
        "tokenize": (model, plain("tokenize", ["Hello world"])),
        "template": (model, plain("template", ["--input", conv])),
        "inspect": (gguf, plain("inspect", [])),
        "dump": (gguf, plain("dump", ["--prompt-ids", "1,2", "--out", dump_dir])),
        "bench": (gguf, bench),
        "quantize": (model, quantize),
        "serve": (model, serve_models),
        "pull": ("test-org/Tiny-GGUF:Q8_0", pull),
        "rm": ("test-org/Tiny-GGUF@main", rm),
        "transcribe": (whisper, transcribe),
    }
    for c in takes_model:
        if c not in model_forms:
            check("model forms of %s" % c, False, "takes a model: add it to model_forms in this test")
            continue
        m, go = model_forms[c]
        results = [go(["-m", m]), go(["--model", m]), go([m])]
        check("%s: -m / --model / positional give the same result" % c, results[0] == results[1] == results[2],
              [str(r)[:300] for r in results])
        check("%s: the model forms succeed" % c, results[0][0] == 0, str(results[0])[:300])
    check("every model command lists -m", set(model_forms) <= set(takes_model), sorted(set(model_forms) - set(takes_model)))

    # ---- brisk ps: a server on a Unix socket, and no server at all ---------------------------
    sock = os.path.join(tmp, "s.sock")
    check("ps over a Unix socket", serve_models(["-m", "tiny=" + model], ("--unix", sock)) == (0, "tiny"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = str(s.getsockname()[1])
    r = brisk("ps", "--port", free)
    check("ps without a server", r.returncode == 1 and "no server answers" in r.stderr
          and r.stderr.startswith("brisk ps: error: "), r.stderr)

    # ---- llama.cpp spellings --------------------------------------------------------------
    r = brisk("generate", model, "-p", "Hi", "-c", "128", "--n-predict", "3", "-s", "5", "--temperature", "0.7",
              "-t", "1", "--ctx-size", "64", "--show-ids")
    check("llama.cpp aliases", r.returncode == 0 and re.search(r"^ids:( \d+){1,3}$", r.stdout, re.M), r.stderr)
    r = brisk("generate", model, "-p", "Hi", "-n", "2", "-ngl", "0")
    check("-ngl 0 is --device cpu, with a note", r.returncode == 0 and "-ngl 0" in r.stderr and "--device cpu" in r.stderr,
          r.stderr)
    r = brisk("generate", model, "-p", "Hi", "-n", "2", "--ctx=100", "--temp=0")
    check("--opt=value", r.returncode == 0, r.stderr)
    r1 = brisk("generate", model, "-p", "Hi", "-n", "6", "--temp", "1", "-s", "11", "--show-ids")
    r2 = brisk("generate", model, "-p", "Hi", "-n", "6", "--temp", "1", "--seed", "11", "--show-ids")
    check("-s is --seed", r1.returncode == 0 and r1.stdout == r2.stdout, (r1.stdout, r2.stdout))

    # ---- values out of range are usage errors naming the option ---------------------------
    for args, name in [(["generate", model, "-p", "x", "--temp", "-1"], "--temp"),
                       (["generate", model, "-p", "x", "--top-p", "2"], "--top-p"),
                       (["generate", model, "-p", "x", "--min-p", "-0.5"], "--min-p"),
                       (["generate", model, "-p", "x", "-t", "1000"], "--threads"),
                       (["generate", model, "-p", "x", "--ctx", "-5"], "--ctx"),
                       (["run", model, "x", "-n", "-1"], "--n-predict"),
                       (["run", model, "x", "-n", "0"], "--n-predict"),
                       (["run", model, "x", "--top-k", "-3"], "--top-k"),
                       (["bench", gguf, "-r", "0"], "--repetitions"),
                       (["serve", model, "--port", "70000"], "--port"),
                       (["generate", model, "-p", "x", "-n"], "-n")]:
        r = brisk(*args)
        check("%s rejected" % " ".join(args[2:]), r.returncode == 2 and name in r.stderr
              and r.stderr.startswith("brisk %s: error: " % args[0]), (r.returncode, r.stderr))

    # --ctx beyond the model's trained context (512 here): used at the maximum, said in one line.
    r = brisk("generate", model, "-p", "Hi", "-n", "2", "--ctx", "100000")
    check("--ctx clamped with a note", r.returncode == 0 and "more than the model's 512 positions" in r.stderr
          and "; ctx 512;" in r.stderr, r.stderr)
    r = brisk("generate", model, "-p", "Hi", "-n", "2", "--ctx", "0")
    check("--ctx 0 is the model's maximum", r.returncode == 0 and "; ctx 512;" in r.stderr, r.stderr)
    r = brisk("generate", model, "-p", "Hi", "-n", "2", "--ctx", "200")
    check("--ctx within the maximum", r.returncode == 0 and "; ctx 200;" in r.stderr and "more than" not in r.stderr,
          r.stderr)

    print("%d commands, %d of them take a model" % (len(cmds), len(takes_model)))


if __name__ == "__main__":
    sys.exit(main("test_cli_convention", run_checks))
