"""What the CLI system tests share: the binary, a list of failed checks, and a main that skips
without BRISK_BIN, runs the checks in a temporary folder and reports."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

BIN = os.environ.get("BRISK_BIN", "")


class Checks:
    def __init__(self):
        self.failures = []

    def __call__(self, name, cond, detail=""):
        """Records a failure unless cond; returns cond, so a check can guard the next ones."""
        if not cond:
            self.failures.append("%s: %s" % (name, detail))
        return bool(cond)


def brisk(*args, env=None, stdin=None, timeout=120):
    """Runs the binary; stdin is a string (or nothing: an empty, non-terminal stdin)."""
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout, env=e,
                          input=stdin if stdin is not None else "")


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def stop_server(proc, check):
    """SIGTERM to a `brisk serve`; check(cond, what) that it exits 0 within 30 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=30)
        check(rc == 0, f"exit code after SIGTERM {rc}")
    except subprocess.TimeoutExpired:
        proc.kill()
        check(False, "server did not stop on SIGTERM")


def one_error_line(r, cmd, status=1):
    """Exit `status` with exactly one line on stderr, `brisk CMD: error: ...`."""
    lines = r.stderr.splitlines()
    return r.returncode == status and len(lines) == 1 and lines[0].startswith("brisk %s: error: " % cmd)


def assets_required():
    """The required-assets mode (CI=true or BRISK_REQUIRE_ASSETS=1, set by .ci/run): a test
    input that is absent (npm assets, SDKs, ../shared data) fails the test instead of skipping."""
    req = os.environ.get("BRISK_REQUIRE_ASSETS", "")
    if req:
        return req != "0"
    return os.environ.get("CI", "") in ("true", "1")


def skip_missing(message):
    """The exit status of a test whose input is missing: 77 (skip) with the message, or 1 with
    it in the required-assets mode."""
    if assets_required():
        print("FAIL: required test asset missing (CI / BRISK_REQUIRE_ASSETS=1): " + message)
        sys.stdout.flush()
        return 1
    print("skip: " + message)
    sys.stdout.flush()
    return 77


def main(name, run_checks):
    """run_checks(check, tmp) in a fresh temporary folder; exit status 77 (skip) without a binary."""
    if not BIN or not os.path.exists(BIN):
        print("skip: BRISK_BIN not set")
        return 77
    check = Checks()
    tmp = tempfile.mkdtemp(prefix="brisk-" + name + "-")
    try:
        run_checks(check, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for f in check.failures:
        print("FAIL:", f)
    print("%s: %d failures" % (name, len(check.failures)))
    sys.stdout.flush()
    return 1 if check.failures else 0
