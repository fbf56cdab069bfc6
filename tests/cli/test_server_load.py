#!/usr/bin/env python3
"""`brisk serve` under load and under attack, on the Qwen3 random-weight fixture, loopback
only, bounded for CI: 2,000 non-streamed requests over kept-alive connections 8 at a time
(p50 latency and requests/s printed); 64 slow connections while /health is probed; a gzip
bomb and a 50 MB chunked body answered 413 while the server's resident memory, sampled,
stays under the model size + 100 MB; a non-streamed request whose client leaves is
cancelled; a second server on the same port fails with "address in use". Exit 77 = skipped."""
import gzip
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

BIN = os.environ.get("BRISK_BIN", "")
SHARED = os.environ.get("BRISK_SHARED_DATA", "")
MODEL_DIR = os.path.join(SHARED, "models", "qwen3", "hf")
REQUESTS = int(os.environ.get("BRISK_LOAD_REQUESTS", "2000"))
CONCURRENCY = 8

if not BIN or not os.path.exists(BIN):
    print("skip: BRISK_BIN not set"); sys.exit(77)
if not os.path.isdir(MODEL_DIR):
    print(f"skip: {MODEL_DIR} missing (shared fixtures)"); sys.exit(77)

failures = []


def check(cond, what):
    print("ok  " if cond else "FAIL", what)
    if not cond:
        failures.append(what)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


PORT = free_port()
CTX = 4096
t_start = time.time()
server = subprocess.Popen([BIN, "serve", "--model", f"qwen3={MODEL_DIR}", "--port", str(PORT), "--ctx", str(CTX),
                           "--parallel", "8", "--header-timeout", "3"], stderr=subprocess.PIPE, text=True)
log_lines = []
threading.Thread(target=lambda: log_lines.extend(server.stderr), daemon=True).start()
MODEL_BYTES = sum(os.path.getsize(os.path.join(MODEL_DIR, f)) for f in os.listdir(MODEL_DIR)
                  if os.path.isfile(os.path.join(MODEL_DIR, f)))


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class RssSampler:
    """Samples the server's resident set every 10 ms while in a `with` block."""

    def __enter__(self):
        self.peak = rss_bytes(server.pid)
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()
        return self

    def run(self):
        while not self.stop:
            self.peak = max(self.peak, rss_bytes(server.pid))
            time.sleep(0.01)

    def __exit__(self, *a):
        self.stop = True
        self.thread.join()


def request(method, path, body=None, headers=None, raw=None, conn=None, timeout=60):
    c = conn or http.client.HTTPConnection("127.0.0.1", PORT, timeout=timeout)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    text = r.read().decode("utf-8", "replace")
    if conn is None:
        c.close()
    try:
        return r.status, json.loads(text)
    except ValueError:
        return r.status, text


def metric(name):
    _, m = request("GET", "/metrics")
    total = 0.0
    for line in m.split("\n"):
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.split()[-1])
    return total


try:
    for _ in range(600):
        try:
            if request("GET", "/health", timeout=2)[0] == 200:
                break
        except OSError:
            time.sleep(0.1)
    else:
        print("server did not start:", "".join(log_lines)); sys.exit(1)

    # 1. A second server on the same port fails at once with "address in use".
    p = subprocess.run([BIN, "serve", "--model", f"qwen3={MODEL_DIR}", "--port", str(PORT)], capture_output=True, text=True,
                       timeout=60)
    check(p.returncode != 0 and "address in use" in p.stderr, f"second server on port {PORT}: rc {p.returncode}, {p.stderr.strip()[-160:]}")

    # 2. 2,000 non-streamed requests over kept-alive connections, 8 at a time.
    user = [{"role": "user", "content": "Hi"}]
    latencies, errors = [], []
    counter = iter(range(REQUESTS))
    lock = threading.Lock()

    def worker():
        conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                break
            t0 = time.perf_counter()
            try:
                st, r = request("POST", "/v1/chat/completions",
                                {"model": "qwen3", "messages": user, "max_tokens": 1, "temperature": 0}, conn=conn)
            except (OSError, http.client.HTTPException) as e:
                st, r = 0, str(e)
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
            dt = time.perf_counter() - t0
            with lock:
                latencies.append(dt)
                if st != 200:
                    errors.append((st, r))
        conn.close()

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(CONCURRENCY)]
    for t in threads: t.start()
    for t in threads: t.join()
    wall = time.perf_counter() - t0
    latencies.sort()
    p50 = latencies[len(latencies) // 2] * 1000
    p99 = latencies[int(len(latencies) * 0.99)] * 1000
    print(f"load: {REQUESTS} requests, {CONCURRENCY} kept-alive connections: {REQUESTS / wall:.0f} requests/s, "
          f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, {wall:.1f} s")
    check(not errors, f"every request answered 200 ({len(errors)} not: {errors[:3]})")
    check(len(latencies) == REQUESTS, "every request completed")

    # 3. 64 slow connections (half a request line each) while /health is probed.
    slow = []
    for _ in range(64):
        s = socket.create_connection(("127.0.0.1", PORT))
        s.sendall(b"GET /v1/mo")
        slow.append(s)
    worst = 0.0
    for _ in range(10):
        t0 = time.perf_counter()
        st, _ = request("GET", "/health", timeout=5)
        worst = max(worst, time.perf_counter() - t0)
        check(st == 200, "/health answers while 64 slow connections are open")
    st, r = request("POST", "/v1/chat/completions", {"model": "qwen3", "messages": user, "max_tokens": 2})
    check(st == 200, f"generation is served while 64 slow connections are open ({st})")
    print(f"slow clients: /health worst {worst * 1000:.1f} ms with 64 half requests open")
    check(worst < 1.0, f"/health within 1 s ({worst:.2f} s)")
    # Their heads do not arrive within --header-timeout: 408, then closed.
    slow[0].settimeout(10)
    reply = b""
    try:
        while True:
            b = slow[0].recv(4096)
            if not b:
                break
            reply += b
    except OSError:
        pass
    check(reply.startswith(b"HTTP/1.1 408"), f"a slow head gets 408 ({reply[:40]!r})")
    for s in slow:
        s.close()

    # 4. A gzip bomb: 50 MB inflated from about 50 KB.
    bomb = gzip.compress(json.dumps({"model": "qwen3", "messages": [{"role": "user", "content": " " * (50 << 20)}]}).encode(), 9)
    with RssSampler() as rss:
        t0 = time.perf_counter()
        st, e = request("POST", "/v1/chat/completions", raw=bomb, headers={"Content-Encoding": "gzip"})
        bomb_s = time.perf_counter() - t0
    print(f"gzip bomb: {len(bomb)} bytes -> 413 in {bomb_s * 1000:.0f} ms, peak RSS {rss.peak / 1e6:.1f} MB "
          f"(model {MODEL_BYTES / 1e6:.1f} MB)")
    check(st == 413, f"gzip bomb -> {st} {str(e)[:200]}")
    check(rss.peak < MODEL_BYTES + (100 << 20), f"gzip bomb: peak RSS {rss.peak / 1e6:.1f} MB")

    # 5. A 50 MB chunked body: refused at the limit, not read to the end.
    with RssSampler() as rss:
        s = socket.create_connection(("127.0.0.1", PORT))
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b"100000\r\n" + b" " * 0x100000 + b"\r\n"
        sent, reply = 0, b""
        s.settimeout(0.2)
        try:
            for _ in range(50):
                s.sendall(chunk)
                sent += 1
                try:
                    reply += s.recv(4096)
                except socket.timeout:
                    pass
                if reply:
                    break
        except OSError:
            pass
        s.settimeout(5)
        try:
            while b"}" not in reply:
                b = s.recv(4096)
                if not b:
                    break
                reply += b
        except OSError:
            pass
        s.close()
    print(f"chunked 50 MB: {sent} MB sent before the reply, peak RSS {rss.peak / 1e6:.1f} MB")
    check(reply.startswith(b"HTTP/1.1 413"), f"chunked oversize -> {reply[:60]!r}")
    check(sent < 50, "the chunked body was refused before it was all sent")
    check(rss.peak < MODEL_BYTES + (100 << 20), f"chunked oversize: peak RSS {rss.peak / 1e6:.1f} MB")

    # 6. A non-streamed request whose client leaves is cancelled (counted once), its slot freed.
    cancelled_before = metric('brisk_generations_total{reason="cancelled"}')
    tokens_before = metric("brisk_generated_tokens_total ")
    body = json.dumps({"model": "qwen3", "messages": user, "max_tokens": CTX - 64, "ignore_eos": True, "temperature": 0})
    s = socket.create_connection(("127.0.0.1", PORT))
    s.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
    busy = False
    for _ in range(200):
        if metric("brisk_active_sequences") > 0:
            busy = True
            break
        time.sleep(0.02)
    s.close()
    freed = False
    for _ in range(100):
        time.sleep(0.05)
        if metric("brisk_active_sequences") == 0:
            freed = True
            break
    cancelled = metric('brisk_generations_total{reason="cancelled"}') - cancelled_before
    generated = metric("brisk_generated_tokens_total ") - tokens_before
    print(f"non-streamed disconnect: cancelled {cancelled:.0f}, {generated:.0f} of {CTX - 64} tokens generated")
    check(busy and freed, f"the generation ran and its slot was freed (busy={busy}, freed={freed})")
    check(cancelled == 1, f"cancelled counted once ({cancelled})")
    check(generated < CTX - 64, "the generation stopped before max_tokens")

    st, _ = request("POST", "/v1/chat/completions", {"model": "qwen3", "messages": user, "max_tokens": 2})
    check(st == 200, "still serving")
finally:
    server.send_signal(signal.SIGTERM)
    try:
        rc = server.wait(timeout=30)
        check(rc == 0, f"exit code after SIGTERM {rc}")
    except subprocess.TimeoutExpired:
        server.kill()
        check(False, "server did not stop on SIGTERM")

print(f"load test: {time.time() - t_start:.1f} s")
if failures:
    print(f"{len(failures)} failures"); sys.exit(1)
print("server load test: ok")
