#!/usr/bin/env python3
"""What the commands say on stderr around a load: `serve --ctx` beyond the model's trained
context says so in one line naming the model (as generate and run do); the CPU memory sums are
not printed on a plain run, only with BRISK_LOG=info or `run --verbose`."""
import os
import select
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_hf  # noqa: E402
from cli_util import BIN, brisk, main  # noqa: E402


def serve_stderr(model, *args):
    """serve's stderr up to its 'listening' line (or 30 s), then SIGTERM."""
    p = subprocess.Popen([BIN, "serve", model, "--port", "0", "-t", "1", "--shutdown-grace", "0", *args], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    lines = []
    deadline = time.time() + 30
    try:
        while time.time() < deadline:
            r, _, _ = select.select([p.stderr], [], [], 1.0)
            if not r:
                if p.poll() is not None:
                    break
                continue
            line = p.stderr.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
            if "listening on" in line:
                break
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
    return lines


def run_checks(check, tmp):
    model = tiny_hf.write(os.path.join(tmp, "tiny"), max_positions=512)
    lines = serve_stderr(model, "--ctx", "100000")
    notes = [l for l in lines if "--ctx 100000" in l]
    check("serve --ctx beyond the model", len(notes) == 1 and "512" in notes[0] and "tiny" in notes[0],
          "stderr: %s" % lines)
    lines = serve_stderr(model, "--ctx", "256")
    check("serve --ctx within the model: no note", not any("--ctx" in l for l in lines), "stderr: %s" % lines)
    check("serve starts", any("listening on" in l for l in lines), "stderr: %s" % lines)

    quiet = {"BRISK_LOG": ""}
    r = brisk("generate", model, "-p", "Hello", "-n", "2", "-t", "1", env=quiet)
    check("generate: no memory line", r.returncode == 0 and "memory:" not in r.stderr, r.stderr)
    r = brisk("generate", model, "-p", "Hello", "-n", "2", "-t", "1", env={"BRISK_LOG": "info"})
    check("generate BRISK_LOG=info: memory line", r.returncode == 0 and "cpu memory:" in r.stderr, r.stderr)
    r = brisk("run", model, "Hello", "-n", "2", "-t", "1", env=quiet)
    check("run: no memory line", r.returncode == 0 and "memory:" not in r.stderr, r.stderr)
    r = brisk("run", model, "Hello", "-n", "2", "-t", "1", "--verbose", env=quiet)
    check("run --verbose: memory line", r.returncode == 0 and "cpu memory:" in r.stderr, r.stderr)


if __name__ == "__main__":
    sys.exit(main("test_cli_notes", run_checks))
