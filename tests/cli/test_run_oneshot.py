#!/usr/bin/env python3
"""`brisk run` outside the interactive terminal, and what every run prints around the answer:

- `brisk run MODEL "prompt"` answers once and exits; a prompt on stdin (not a terminal) too; with
  -i, stdin is a chat with one message per line;
- a conversation that outgrows --ctx keeps going: the oldest turns are dropped, with one line
  saying so (naming /clear and --ctx), and no error;
- a broken chat template fails before the weights load (the weights here are broken too: their
  error must not be the one reported);
- without a GPU driver nothing is said about CUDA; `--device cuda` is one clear error line;
- no load indicator when stdout/stderr are not terminals.

Runs on a tiny Llama checkpoint written by tiny_hf.py (no shared data needed)."""
import ctypes
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_hf  # noqa: E402
from cli_util import brisk, main  # noqa: E402


def run(*args, stdin=None):
    return brisk("run", *args, stdin=stdin)


def run_checks(check, tmp):
    model = tiny_hf.write(os.path.join(tmp, "tiny"), padding_wins=False)
    opts = ["--temp", "0", "-t", "1", "-n", "8"]

    # One prompt on the command line: one answer on stdout, exit 0, no chat banner.
    r = run(model, "Hello", *opts)
    check("one-shot exit", r.returncode == 0, r.stderr)
    check("one-shot no banner or prompt", "chat with" not in r.stdout and ">>>" not in r.stdout, r.stdout)
    check("one-shot answers", len(r.stdout) > 0, repr(r.stdout))
    check("one-shot no stats without --verbose", "[prompt " not in r.stderr, r.stderr)
    check("no load indicator off a terminal", "loading" not in r.stderr and "\r" not in r.stderr, r.stderr)
    v = run(model, "Hello", *opts, "--verbose")
    check("--verbose stats", v.returncode == 0 and "[prompt " in v.stderr and v.stdout == r.stdout, (v.stdout, v.stderr))
    # The same prompt from stdin gives the same answer (greedy).
    s = run(model, *opts, stdin="Hello\n")
    check("prompt from stdin", s.returncode == 0 and s.stdout == r.stdout, (s.stdout, r.stdout, s.stderr))
    s = run(model, *opts, stdin="")
    check("empty stdin is a usage error", s.returncode == 2 and "empty" in s.stderr, s.stderr)

    # -i: a chat read from stdin, one answer per line (one stats line each).
    chat = run(model, *opts, "-i", stdin="Hello\nHow are you?\nBye\n")
    check("-i answers each line", chat.returncode == 0 and chat.stderr.count("[prompt ") == 3, chat.stderr)

    # A conversation longer than the context keeps going, dropping its oldest turns.
    lines = "".join("message number %d: tell me about the sea and the sky and the hills\n" % i for i in range(10))
    full = run(model, "--ctx", "160", "--system", "Be brief.", "-i", *opts, stdin=lines)
    check("full context: no error", full.returncode == 0 and "error" not in full.stderr, full.stderr)
    check("full context: 10 answers", full.stderr.count("[prompt ") == 10, full.stderr)
    check("full context: says what it dropped, names /clear and --ctx",
          "dropped" in full.stderr and "/clear" in full.stderr and "--ctx" in full.stderr, full.stderr)
    huge = run(model, "--ctx", "64", *opts, "x " * 200)
    errors = [l for l in huge.stderr.splitlines() if not l.startswith("brisk: info:")]
    check("a message larger than the context: one error naming --ctx",
          huge.returncode == 1 and len(errors) == 1 and errors[0].startswith("brisk run: error: ")
          and "--ctx" in errors[0], huge.stderr)

    # A broken template fails before the weights load: the weights are cut too, and their error
    # is not the one reported.
    broken = os.path.join(tmp, "broken")
    shutil.copytree(model, broken)
    with open(os.path.join(broken, "chat_template.jinja"), "w") as f:
        f.write("{% for m in messages %}{{ m.content }\n{% endfor %}")
    with open(os.path.join(broken, "model.safetensors"), "r+b") as f:
        f.truncate(1000)
    r = run(broken, "Hello", *opts)
    check("broken template first", r.returncode == 1 and "chat_template.jinja" in r.stderr
          and "safetensors" not in r.stderr, r.stderr)
    r = run(model, "Hello", *opts, "--template", os.path.join(broken, "chat_template.jinja"))
    check("broken --template", r.returncode == 1 and "chat_template.jinja:1" in r.stderr, r.stderr)

    # CUDA: silent where no driver was ever installed; an explicit request is one clear line.
    try:  # as brisk looks for the driver
        ctypes.CDLL("libcuda.so.1")
        no_driver = False
    except OSError:
        no_driver = True
    r = run(model, "Hello", *opts)
    if no_driver:
        check("no CUDA talk without a driver", "CUDA" not in r.stderr and "cuda" not in r.stderr, r.stderr)
    check("at most one CUDA line", r.stderr.count("CUDA") <= 1, r.stderr)
    g = brisk("generate", "-m", model, "--prompt-ids", "1,2", "-n", "2")
    if no_driver:
        check("generate: no CUDA talk without a driver", g.returncode == 0 and "CUDA" not in g.stderr, g.stderr)
    check("generate: at most one CUDA line, not doubled", g.stderr.count("no usable CUDA device") <= 1, g.stderr)
    for dev in (["--device", "cuda"], ["--device", "cuda:0"]):
        r = run(model, "Hello", *opts, *dev)
        if no_driver:
            lines = r.stderr.splitlines()
            check("%s without a GPU" % dev[1], r.returncode == 1 and len(lines) == 1
                  and lines[0].startswith("brisk run: error: --device " + dev[1]), r.stderr)
    r = run(model, "Hello", *opts, "-ngl", "99")
    check("-ngl 99 runs (on the GPU when one is usable)", r.returncode == 0 and "--device auto" in r.stderr, r.stderr)


if __name__ == "__main__":
    sys.exit(main("test_run_oneshot", run_checks))
