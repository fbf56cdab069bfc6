#!/usr/bin/env python3
"""`brisk serve --unix PATH`: the socket is created mode 0600, requests over it are served
(plain and streaming), the internal loopback TCP port refuses requests that do not come
through the socket, a stale socket file is replaced, a regular file is not, and SIGTERM
removes the socket. Exit 77 = skipped."""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time

BIN = os.environ.get("BRISK_BIN", "")
SHARED = os.environ.get("BRISK_SHARED_DATA", "")
MODEL_DIR = os.path.join(SHARED, "models", "qwen3", "hf")
if not BIN or not os.path.exists(BIN):
    print("skip: BRISK_BIN not set"); sys.exit(77)
if not os.path.isdir(MODEL_DIR):
    print(f"skip: {MODEL_DIR} missing (shared fixtures)"); sys.exit(77)

failures = []
checks = []


def check(cond, what):
    print("ok  " if cond else "FAIL", what)
    checks.append(what)
    if not cond:
        failures.append(what)


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=60):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


tmp = tempfile.mkdtemp(prefix="brisk-unix-")
path = os.path.join(tmp, "brisk.sock")
# A stale socket file from an earlier run must be replaced.
stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
stale.bind(path)
stale.close()

server = subprocess.Popen([BIN, "serve", "--model", f"qwen3={MODEL_DIR}", "--unix", path, "--ctx", "512",
                           "--parallel", "2"], stderr=subprocess.PIPE, text=True)
log = []
threading.Thread(target=lambda: log.extend(server.stderr), daemon=True).start()
deadline = time.time() + 120
while time.time() < deadline and not any("listening on unix:" in l for l in log):
    if server.poll() is not None:
        break
    time.sleep(0.1)
check(any("listening on unix:" in l for l in log), "server reports the Unix socket")

try:
    mode = stat.S_IMODE(os.stat(path).st_mode)
    check(stat.S_ISSOCK(os.stat(path).st_mode) and mode == 0o600, f"socket mode is 0600 (got {oct(mode)})")

    c = UnixHTTPConnection(path)
    c.request("GET", "/v1/models")
    r = c.getresponse()
    body = json.loads(r.read())
    check(r.status == 200 and body["data"][0]["id"] == "qwen3", "GET /v1/models over the socket")
    c.close()

    req = {"model": "qwen3", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "temperature": 0}
    c = UnixHTTPConnection(path)
    c.request("POST", "/v1/chat/completions", body=json.dumps(req), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    body = json.loads(r.read())
    check(r.status == 200 and body["usage"]["completion_tokens"] >= 1, "chat completion over the socket")
    c.close()

    req["stream"] = True
    c = UnixHTTPConnection(path)
    c.request("POST", "/v1/chat/completions", body=json.dumps(req), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    text = r.read().decode()
    check(r.status == 200 and text.rstrip().endswith("data: [DONE]"), "streamed chat over the socket")
    c.close()

    # The internal loopback port: find it from /proc and check it refuses direct requests.
    inode_ports = []
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        f = line.split()
        if f[3] == "0A" and f[1].startswith("0100007F:"):
            inode_ports.append((f[9], int(f[1].split(":")[1], 16)))
    fds = set()
    for fd in os.listdir(f"/proc/{server.pid}/fd"):
        try:
            m = re.match(r"socket:\[(\d+)\]", os.readlink(f"/proc/{server.pid}/fd/{fd}"))
        except OSError:
            continue
        if m:
            fds.add(m.group(1))
    ports = [p for inode, p in inode_ports if inode in fds]
    check(len(ports) == 1, f"one internal loopback listener ({ports})")
    if ports:
        c = http.client.HTTPConnection("127.0.0.1", ports[0], timeout=30)
        c.request("GET", "/v1/models")
        r = c.getresponse()
        r.read()
        check(r.status == 403, f"direct TCP request refused with 403 (got {r.status})")
        c.close()
finally:
    server.send_signal(signal.SIGTERM)
    try:
        rc = server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()
        rc = -1
check(rc == 0, f"exit 0 on SIGTERM (got {rc})")
check(not os.path.exists(path), "socket file removed on exit")

# A regular file at the path is never replaced.
with open(path, "w") as f:
    f.write("keep")
p = subprocess.run([BIN, "serve", "--model", f"qwen3={MODEL_DIR}", "--unix", path], capture_output=True, text=True,
                   timeout=120)
check(p.returncode != 0 and "not a socket" in p.stderr and open(path).read() == "keep",
      "a regular file at the socket path is left alone with an error")

shutil.rmtree(tmp, ignore_errors=True)
print(f"{len(checks) - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
