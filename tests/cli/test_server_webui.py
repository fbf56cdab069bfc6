#!/usr/bin/env python3
"""System test of the chat page of `brisk serve`: its files served from the binary (ETag and
304, the Content-Security-Policy, public without the API key; --no-webui is a unit test,
ServerOllama.ChatPageIsServedWithAnETag), the Markdown
renderer against hostile output (tests/server/webui_markdown.mjs, Node), and the page in the
system Chromium driven by puppeteer-core (tests/server/webui_browser.mjs: API key prompt,
streamed answer, stop, model switch, stored conversations, no XSS). BRISK_SCREENSHOT=PATH
saves a screenshot (docs/images/webui.png is made that way). Exit 77 = skipped."""
import http.client
import json
import os
import shutil
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_util import free_port, skip_missing, stop_server  # noqa: E402

BIN = os.environ.get("BRISK_BIN", "")
SHARED = os.environ.get("BRISK_SHARED_DATA", "")
SRC = os.environ.get("BRISK_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
QWEN = os.path.join(SHARED, "models", "qwen3", "hf")
LLAMA = os.path.join(SHARED, "models", "llama", "hf")
KEY = "page-key"

if not BIN or not os.path.exists(BIN):
    print("skip: BRISK_BIN not set"); sys.exit(77)
for d in (QWEN, LLAMA):
    if not os.path.isdir(d):
        sys.exit(skip_missing(f"{d} (shared fixtures)"))

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def start(*extra):
    port = free_port()
    p = subprocess.Popen([BIN, "serve", "--model", f"qwen3={QWEN}", "--model", f"llama={LLAMA}", "--port", str(port),
                          "--ctx", "4096", "--parallel", "2", "--max-models", "2", "--api-key", KEY, *extra],
                         stderr=subprocess.PIPE, text=True)
    ready = threading.Event()
    lines = []

    def read():
        for line in p.stderr:
            lines.append(line)
            if "listening on" in line:
                ready.set()
    threading.Thread(target=read, daemon=True).start()
    check(ready.wait(120), "server started")
    return p, port, lines


def get(port, path, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", path, headers=headers or {})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body, r


# 1. The Markdown renderer against hostile output (Node only).
p = subprocess.run(["node", os.path.join(SRC, "tests", "server", "webui_markdown.mjs")],
                   env=dict(os.environ, BRISK_WEBUI=os.path.join(SRC, "webui")), capture_output=True, text=True, timeout=60)
check(p.returncode == 0, f"webui_markdown.mjs: {p.stdout}{p.stderr}")
print(p.stdout.strip())

# 2. The page's files, without the key; the API still wants it.
server, port, log = start()
try:
    st, body, r = get(port, "/")
    check(st == 200 and r.getheader("Content-Type", "").startswith("text/html") and b'src="/webui/app.js"' in body,
          f"GET / is the page: {st} {body[:120]}")
    etag = r.getheader("ETag", "")
    check(etag.startswith('"') and len(etag) > 4, f"ETag {etag}")
    check("script-src 'self'" in r.getheader("Content-Security-Policy", ""), "CSP header")
    check(r.getheader("Cache-Control") == "no-cache", "Cache-Control")
    st, body, _ = get(port, "/", {"If-None-Match": etag})
    check(st == 304 and body == b"", f"conditional GET: {st}")
    for name, ctype in (("app.js", "text/javascript"), ("markdown.js", "text/javascript"), ("style.css", "text/css")):
        st, body, r = get(port, f"/webui/{name}")
        with open(os.path.join(SRC, "webui", name), "rb") as f:
            check(st == 200 and body == f.read() and r.getheader("Content-Type", "").startswith(ctype), f"/webui/{name}: {st}")
    st, body, _ = get(port, "/webui/nothing.js")
    check(st == 404 and "error" in json.loads(body), f"unknown file: {st}")
    st, body, _ = get(port, "/webui/../CMakeLists.txt")
    check(st in (400, 404), f"no path escape: {st}")
    st, _, _ = get(port, "/v1/models")
    check(st == 401, f"the API keeps its key: {st}")

    # 3. The page in Chromium (skipped without chromium or puppeteer-core).
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    mods = os.path.join(os.environ.get("BRISK_TEST_ASSETS", os.path.join(SRC, "build", "test-assets")), "server", "node_modules")
    if not chromium:
        rc = skip_missing("chromium (scripts/setup.sh installs it)")
        if rc != 77:
            failures.append("chromium missing")
    elif not os.path.isdir(os.path.join(mods, "puppeteer-core")):
        rc = skip_missing("puppeteer-core (scripts/fetch_server_test_assets.sh)")
        if rc != 77:
            failures.append("puppeteer-core missing")
    else:
        dst = os.path.join(os.path.dirname(mods), "webui_browser.mjs")  # ESM ignores NODE_PATH: run beside node_modules
        shutil.copyfile(os.path.join(SRC, "tests", "server", "webui_browser.mjs"), dst)
        env = dict(os.environ, BRISK_BASE=f"http://127.0.0.1:{port}", BRISK_KEY=KEY, BRISK_MODELS="qwen3,llama",
                   BRISK_CHROMIUM=chromium, PUPPETEER_SKIP_DOWNLOAD="1")
        p = subprocess.run(["node", dst], env=env, capture_output=True, text=True, timeout=180)
        check(p.returncode == 0, f"webui_browser.mjs: {p.stdout}{p.stderr}")
        print(p.stdout.strip())
finally:
    stop_server(server, check)

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("test_server_webui: ok")
