#!/usr/bin/env python3
"""`brisk serve --unix PATH`: the socket is created mode 0600 and requests over it are served
(plain and streaming); the server holds no TCP or UDP socket at all; another local user (run
with runuser / setpriv as `nobody`) is refused by the socket and finds no other way in (the
socket path, /proc links to it, every loopback TCP listener); a stale socket file is replaced,
a live one or a regular file is not, and SIGTERM removes the socket. Exit 77 = skipped."""
import http.client
import json
import os
import pwd
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
import uuid

BIN = os.environ.get("BRISK_BIN", "")
SHARED = os.environ.get("BRISK_SHARED_DATA", "")
MODEL_DIR = os.path.join(SHARED, "models", "qwen3", "hf")
if not BIN or not os.path.exists(BIN):
    print("skip: BRISK_BIN not set"); sys.exit(77)
if not os.path.isdir(MODEL_DIR):
    print(f"skip: {MODEL_DIR} missing (shared fixtures)"); sys.exit(77)

failures = []
checks = []
# A name no other server on this machine uses: the other user's probe looks for it.
MODEL = "unix-only-" + uuid.uuid4().hex[:12]


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


def inet_socket_inodes():
    """Inodes of every TCP / UDP socket in this network namespace."""
    inodes = set()
    for table in ("tcp", "tcp6", "udp", "udp6"):
        try:
            lines = open(f"/proc/net/{table}").read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9:
                inodes.add(f[9])
    return inodes


def process_socket_inodes(pid):
    out = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            m = re.match(r"socket:\[(\d+)\]", os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
        if m:
            out.add(m.group(1))
    return out


# Run by another user: every way around the socket file it can think of.
PROBE = r'''
import json, os, re, socket, sys
path, pid, model = sys.argv[1], sys.argv[2], sys.argv[3]
report = {"uid": os.getuid(), "served": [], "socket_error": None, "proc_paths": {}, "ports_tried": 0}
def ask(sock):
    sock.settimeout(2)
    sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = b""
    try:
        while True:
            b = sock.recv(65536)
            if not b: break
            data += b
    except OSError:
        pass
    return data.decode("utf-8", "replace")
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(path)
    if model in ask(s): report["served"].append("unix:" + path)
except OSError as e:
    report["socket_error"] = e.__class__.__name__
for p in (f"/proc/{pid}/root{path}", f"/proc/{pid}/cwd", f"/proc/{pid}/fd"):
    try:
        if p.endswith(path):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(p)
            if model in ask(s): report["served"].append(p)
        else:
            os.listdir(p)
        report["proc_paths"][p] = "open"
    except OSError as e:
        report["proc_paths"][p] = e.__class__.__name__
for table, fam in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
    try:
        lines = open(f"/proc/net/{table}").read().splitlines()[1:]
    except OSError:
        continue
    for line in lines:
        f = line.split()
        if f[3] != "0A":
            continue
        port = int(f[1].split(":")[1], 16)
        host = "127.0.0.1" if fam == socket.AF_INET else "::1"
        report["ports_tried"] += 1
        try:
            s = socket.socket(fam, socket.SOCK_STREAM); s.connect((host, port))
            if model in ask(s): report["served"].append(f"tcp:{host}:{port}")
        except OSError:
            pass
print(json.dumps(report))
'''


def as_other_user(argv):
    """argv run as `nobody`, or None (with the reason) when no unprivileged user can be used."""
    if os.geteuid() != 0:
        return None, "not root: cannot switch to another user"
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        return None, "no user 'nobody'"
    if shutil.which("runuser"):
        return ["runuser", "-u", "nobody", "--"] + argv, None
    if shutil.which("setpriv"):
        pw = pwd.getpwnam("nobody")
        return ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups"] + argv, None
    return None, "neither runuser nor setpriv is installed"


tmp = tempfile.mkdtemp(prefix="brisk-unix-")
os.chmod(tmp, 0o755)  # others may reach the socket file: only its own mode keeps them out
path = os.path.join(tmp, "brisk.sock")
# A stale socket file from an earlier run must be replaced.
stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
stale.bind(path)
stale.close()

server = subprocess.Popen([BIN, "serve", "--model", f"{MODEL}={MODEL_DIR}", "--unix", path, "--ctx", "512",
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
    check(r.status == 200 and body["data"][0]["id"] == MODEL, "GET /v1/models over the socket")
    c.close()

    req = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "temperature": 0}
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

    # By construction: no TCP or UDP socket in the server process, so no port to find.
    shared_inodes = process_socket_inodes(server.pid) & inet_socket_inodes()
    check(not shared_inodes, f"the server holds no TCP/UDP socket (found inodes {sorted(shared_inodes)})")

    # A second server on the live socket does not take it over.
    p = subprocess.run([BIN, "serve", "--model", f"x={MODEL_DIR}", "--unix", path], capture_output=True, text=True,
                       timeout=120)
    check(p.returncode != 0 and "address in use" in p.stderr, f"a live socket is not taken over: {p.stderr.strip()[-200:]}")

    # Another local user: refused by the socket's mode, and no other route serves it.
    probe_file = os.path.join(tmp, "probe.py")
    with open(probe_file, "w") as f:
        f.write(PROBE)
    os.chmod(probe_file, 0o644)
    # The system interpreter: another user may not reach one installed under root's home.
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    argv, why = as_other_user([python, probe_file, path, str(server.pid), MODEL])
    if argv is None:
        print(f"skip: the other-user part ({why})")
    else:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        try:
            report = json.loads(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            report = None
        check(report is not None, f"the probe ran as another user: {p.stdout}{p.stderr}")
        if report:
            print("other-user probe:", json.dumps(report))
            check(report["uid"] != 0, "the probe ran unprivileged")
            check(report["socket_error"] == "PermissionError", f"the socket refuses another user ({report['socket_error']})")
            check(report["served"] == [], f"no route serves another user: {report['served']}")
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
