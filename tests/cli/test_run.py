#!/usr/bin/env python3
"""`brisk run` driven through a pseudo-terminal as a person would use it.

On the tiny random-weight qwen3 fixture with greedy sampling: two turns, where the second must
prefill only its own tokens plus template glue (the expected count is computed independently
with `brisk template` and `brisk tokenize`); a long answer stopped with Ctrl-C, which stays in
the conversation; Ctrl-C at the prompt clears the line; /save, /clear (the next turn prefills
the whole conversation again), and Ctrl-D, after which the process exits 0. Then the same
conversation through a pipe with -i (no terminal), which must work without escape sequences.
Exit 77 (skip) when the binary or the fixture is missing.
"""
import json
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_util import skip_missing  # noqa: E402

BIN = os.environ.get("BRISK_BIN", "")
SHARED = os.environ.get("BRISK_SHARED_DATA", os.path.join(os.path.dirname(__file__), "../../../shared/data"))
MODEL = os.path.join(SHARED, "models", "qwen3", "model-f32.gguf")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
STATS = re.compile(r"\[prompt (\d+) tok \((\d+) new\)[^\]]*\]")
TIMEOUT = 60.0


def brisk(*args, stdin=None):
    p = subprocess.run([BIN, *args], capture_output=True, input=stdin, timeout=120)
    if p.returncode != 0:
        raise AssertionError(f"brisk {' '.join(args)} failed: {p.stderr.decode(errors='replace')}")
    return p.stdout


def render(tmp, messages, name):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        json.dump({"messages": messages, "add_generation_prompt": True}, f)
    return brisk("template", "--model", MODEL, "--input", path).decode()


def count_tokens(tmp, text, name):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return len(brisk("tokenize", "--model", MODEL, "--parse-special", "--file", path).split())


class Pty:
    def __init__(self, argv, env):
        pid, fd = pty.fork()
        if pid == 0:
            try:
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        self.pid, self.fd, self.buf = pid, fd, ""

    def send(self, data):
        os.write(self.fd, data.encode())

    def expect(self, pattern, timeout=TIMEOUT):
        """Reads until `pattern` (regex, on text without ANSI codes) matches what came after the
        previous match; returns the match."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(ANSI.sub("", self.buf))
            if m:
                plain = ANSI.sub("", self.buf)
                self.buf = plain[m.end():]
                return m
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out waiting for {pattern!r}; output so far:\n{self.buf[-3000:]}")
            r, _, _ = select.select([self.fd], [], [], min(left, 1.0))
            if r:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"output ended while waiting for {pattern!r}:\n{self.buf[-3000:]}")
                self.buf += chunk.decode(errors="replace")

    def wait(self, timeout=TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                r, _, _ = select.select([self.fd], [], [], 0.2)
                if r:
                    os.read(self.fd, 65536)
            except OSError:
                pass
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        raise AssertionError("brisk run did not exit")

    def kill(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


class RunTest(unittest.TestCase):
    FIRST = "Hello there"
    SECOND = "What is the capital of France?"
    LONG = "Write a very long story about a dragon"
    AFTER_CLEAR = "Start again"

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="brisk_run_test_")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.env = dict(os.environ, HOME=self.tmp, HF_HUB_OFFLINE="1", TERM="xterm")
        self.env.pop("XDG_STATE_HOME", None)

    def argv(self):
        return [BIN, "run", MODEL, "--temp", "0", "--ctx", "4096", "-n", "1000", "-t", "1"]

    def test_chat_through_a_terminal(self):
        p = Pty(self.argv(), self.env)
        try:
            p.expect(r">>> ")
            # Turn 1: everything is new.
            p.send(self.FIRST + "\r")
            t1 = p.expect(STATS.pattern)
            self.assertEqual(t1.group(1), t1.group(2), "first turn: all prompt tokens are new")
            p.expect(r">>> ")
            # Turn 2 typed in two lines with a '\' continuation.
            first, rest = self.SECOND.split(" ", 1)
            p.send(first + "\\\r")
            p.expect(r"\.\.\. ")
            p.send(rest + "\r")
            t2 = p.expect(STATS.pattern)
            p.expect(r">>> ")
            saved = os.path.join(self.tmp, "two_turns.json")
            p.send(f"/save {saved}\r")
            p.expect(r"saved 4 messages")
            p.expect(r">>> ")

            # Ctrl-C at the prompt clears the line: the text typed is not sent.
            p.send("this line is abandoned")
            p.expect(r"abandoned")
            p.send("\x03")
            p.expect(r"\^C")
            p.expect(r">>> ")

            # A long answer stopped with Ctrl-C once it has started streaming.
            p.send(self.LONG + "\r")
            p.expect(re.escape(self.LONG) + r"\r*\n[\s\S]{20}")
            p.send("\x03")
            t3 = p.expect(STATS.pattern + r".*")
            self.assertIn("stopped", t3.group(0))
            p.expect(r">>> ")
            saved3 = os.path.join(self.tmp, "three_turns.json")
            p.send(f"/save {saved3}\r")
            p.expect(r"saved 6 messages")
            p.expect(r">>> ")

            # /clear: the next turn prefills its whole (one-message) conversation.
            p.send("/clear\r")
            p.expect(r"new conversation")
            p.expect(r">>> ")
            p.send(self.AFTER_CLEAR + "\r")
            t4 = p.expect(STATS.pattern)
            p.expect(r">>> ")
            p.send("\x04")
            self.assertEqual(p.wait(), 0)
        finally:
            p.kill()

        # Second turn: the KV cache held the first prompt and answer, so only the text after
        # them is prefilled.
        with open(saved) as f:
            messages = json.load(f)["messages"]
        self.assertEqual([m["role"] for m in messages], ["user", "assistant"] * 2)
        self.assertEqual(messages[0]["content"], self.FIRST)
        self.assertEqual(messages[2]["content"], self.SECOND.replace(" ", "\n", 1))
        t1_text = render(self.tmp, messages[:1], "c1.json")
        t2_text = render(self.tmp, messages[:3], "c2.json")
        self.assertEqual(int(t1.group(1)), count_tokens(self.tmp, t1_text, "t1.txt"))
        held = t1_text + messages[1]["content"]
        self.assertTrue(t2_text.startswith(held), "the template keeps the first turn as it was")
        expected_new = count_tokens(self.tmp, t2_text[len(held):], "glue.txt")
        self.assertEqual(int(t2.group(2)), expected_new, t2.group(0))
        self.assertLess(int(t2.group(2)), int(t2.group(1)))

        # The stopped answer stayed in the conversation.
        with open(saved3) as f:
            messages3 = json.load(f)["messages"]
        self.assertEqual(messages3[:4], messages)
        self.assertEqual(messages3[4], {"role": "user", "content": self.LONG})
        self.assertEqual(messages3[5]["role"], "assistant")
        self.assertGreater(len(messages3[5]["content"]), 0)

        # After /clear everything is prefilled again.
        t4_text = render(self.tmp, [{"role": "user", "content": self.AFTER_CLEAR}], "c4.json")
        self.assertEqual(int(t4.group(1)), int(t4.group(2)))
        self.assertEqual(int(t4.group(2)), count_tokens(self.tmp, t4_text, "t4.txt"))

        # History file under ~/.local/state/brisk/.
        with open(os.path.join(self.tmp, ".local", "state", "brisk", "history")) as f:
            history = f.read().splitlines()
        self.assertIn(self.FIRST, history)
        self.assertNotIn("this line is abandoned", history)

    def test_chat_through_a_pipe(self):
        # -i: a chat from a pipe, one message per line (without it, stdin is one prompt).
        script = f"{self.FIRST}\n\"\"\"\n{self.SECOND}\n\"\"\"\n/exit\n"
        p = subprocess.run(self.argv() + ["-i"], input=script.encode(), capture_output=True, env=self.env, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        self.assertNotIn(b"\x1b", p.stdout)
        self.assertNotIn(b"\x1b", p.stderr)
        self.assertNotIn(b">>>", p.stdout)
        stats = STATS.findall(p.stderr.decode())
        self.assertEqual(len(stats), 2, p.stderr.decode())
        self.assertEqual(stats[0][0], stats[0][1])
        self.assertLess(int(stats[1][1]), int(stats[1][0]))

    def test_bad_arguments(self):
        p = subprocess.run([BIN, "run", MODEL, "--bogus"], capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 2)
        self.assertIn(b"brisk run: error: unknown option '--bogus'", p.stderr)
        h = subprocess.run([BIN, "run", "--help"], capture_output=True, timeout=60)
        self.assertEqual(h.returncode, 0)
        self.assertIn(b"Qwen/Qwen3-0.6B-GGUF:Q8_0", h.stdout)


if __name__ == "__main__":
    if not BIN or not os.path.exists(BIN):
        print("BRISK_BIN not set or missing: skipping")
        sys.exit(77)
    if not os.path.exists(MODEL):
        sys.exit(skip_missing(f"fixture {MODEL} missing (shared data)"))
    unittest.main()
