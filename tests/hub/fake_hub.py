"""A Hugging Face Hub look-alike for tests: loopback only, in-process, bounded.

Serves the two routes brisk uses, shaped like the real Hub:
  GET  /api/models/{org}/{name}/revision/{rev}[?blobs=true]
       -> {"id", "sha", "siblings": [{"rfilename", "blobId", "size", "lfs": {"sha256", "size"}}]}
  GET|HEAD /{org}/{name}/resolve/{rev}/{path}
       LFS files (*.gguf, *.safetensors, *.bin): 302 to a storage URL on another host name
       (localhost instead of 127.0.0.1) with X-Linked-Etag / X-Linked-Size / X-Repo-Commit;
       other files: 200 with ETag (git blob id).
  GET  /cdn/{sha256}   the storage host: honours Range, and the per-file faults below.
Errors carry X-Error-Code like the Hub: RepoNotFound, RevisionNotFound, EntryNotFound,
GatedRepo (401 without a token, 403 with a wrong one).

Faults (keyed by repo-relative path): cut_once (first transfer stops halfway), corrupt_once /
corrupt_always (a byte flipped), slow (seconds per 16 KiB chunk), claim_size (size the API
announces), api_without_blobs (sizes and hashes only in resolve headers), hide_sizes. Every request is recorded in FakeHub.log as dicts.

Standalone: python3 fake_hub.py ROOT serves ROOT/org/name/** as repos (branch main).
"""
import hashlib
import http.server
import json
import os
import socketserver
import sys
import threading
import time
import urllib.parse

LFS_SUFFIXES = (".gguf", ".safetensors", ".bin", ".pt", ".pth")


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    def __init__(self, repo_id, files, gated=False, branches=None):
        self.repo_id = repo_id
        self.gated = gated
        self.revisions = {}  # name or commit -> (commit, files)
        for name, fs in {"main": files, **(branches or {})}.items():
            h = hashlib.sha1(repo_id.encode() + name.encode())
            for p in sorted(fs):
                h.update(p.encode() + hashlib.sha256(fs[p]).digest())
            commit = h.hexdigest()
            self.revisions[name] = (commit, fs)
            self.revisions[commit] = (commit, fs)


class FakeHub:
    def __init__(self, token="hf_test_token"):
        self.repos = {}
        self.token = token
        self.log = []
        self.blobs = {}  # sha256 -> bytes
        self.cut_once = set()
        self.corrupt_once = set()
        self.corrupt_always = set()
        self.slow = {}
        self.claim_size = {}
        self.api_without_blobs = False  # like a mirror that ignores ?blobs=true
        self.hide_sizes = False         # no sizes in the API nor in X-Linked-Size
        self._done_faults = set()
        self._lock = threading.Lock()
        self.server = None

    def add_repo(self, repo_id, files, gated=False, branches=None):
        repo = Repo(repo_id, files, gated, branches)
        self.repos[repo_id] = repo
        for _, fs in repo.revisions.values():
            for data in fs.values():
                self.blobs[hashlib.sha256(data).hexdigest()] = data
        return repo

    def commit(self, repo_id, revision="main"):
        return self.repos[repo_id].revisions[revision][0]

    def start(self):
        hub = self

        class Handler(_Handler):
            fake = hub

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True

            def handle_error(self, request, client_address):
                if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
                    super().handle_error(request, client_address)  # a client hanging up is normal

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return self.endpoint

    @property
    def endpoint(self):
        return "http://127.0.0.1:%d" % self.port

    @property
    def storage(self):
        return "http://localhost:%d" % self.port

    def stop(self):
        if self.server:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def requests(self, kind=None, path=None):
        with self._lock:
            return [r for r in self.log if (kind is None or r["kind"] == kind)
                    and (path is None or r.get("file") == path)]

    def first_time(self, fault, key):
        with self._lock:
            if (fault, key) in self._done_faults:
                return False
            self._done_faults.add((fault, key))
            return True


class _Handler(http.server.BaseHTTPRequestHandler):
    fake = None
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def record(self, kind, **kw):
        entry = {"kind": kind, "method": self.command, "path": self.path, "time": time.monotonic(),
                 "range": self.headers.get("Range"),
                 "auth": self.headers.get("Authorization"), **kw}
        with self.fake._lock:
            self.fake.log.append(entry)

    def send_error_code(self, status, code, message):
        body = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def authorize(self, repo):
        if not repo.gated:
            return True
        auth = self.headers.get("Authorization")
        if auth is None:
            self.send_error_code(401, "GatedRepo", "Access to model %s is restricted." % repo.repo_id)
            return False
        if auth != "Bearer " + self.fake.token:
            self.send_error_code(403, "GatedRepo", "Access to model %s is restricted and you are not in the authorized list." % repo.repo_id)
            return False
        return True

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/")[1:]]
        if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "revision":
            return self.api(parts[2] + "/" + parts[3], "/".join(parts[5:]), url.query)
        if len(parts) >= 5 and parts[2] == "resolve":
            # revision is one path segment (callers escape '/'), the rest is the file
            return self.resolve(parts[0] + "/" + parts[1], parts[3], "/".join(parts[4:]))
        if len(parts) == 2 and parts[0] == "cdn":
            return self.cdn(parts[1])
        self.send_error_code(404, "NotFound", "no route " + url.path)

    def find(self, repo_id, revision):
        repo = self.fake.repos.get(repo_id)
        if repo is None:
            self.send_error_code(404, "RepoNotFound", "Repository not found")
            return None, None, None
        if not self.authorize(repo):
            return None, None, None
        if revision not in repo.revisions:
            self.send_error_code(404, "RevisionNotFound", "Invalid rev id: " + revision)
            return None, None, None
        commit, files = repo.revisions[revision]
        return repo, commit, files

    def api(self, repo_id, revision, query):
        self.record("api", repo=repo_id)
        repo, commit, files = self.find(repo_id, revision)
        if repo is None:
            return
        blobs = "blobs=true" in query.lower() and not self.fake.api_without_blobs
        siblings = []
        for p in sorted(files):
            data = files[p]
            s = {"rfilename": p}
            if blobs:
                size = self.fake.claim_size.get(p, len(data))
                s["blobId"] = git_blob_id(data)
                if not self.fake.hide_sizes:
                    s["size"] = size
                if p.endswith(LFS_SUFFIXES):
                    s["lfs"] = {"sha256": hashlib.sha256(data).hexdigest(), "pointerSize": 134}
                    if not self.fake.hide_sizes:
                        s["lfs"]["size"] = size
            siblings.append(s)
        body = json.dumps({"id": repo_id, "modelId": repo_id, "sha": commit,
                           "gated": "auto" if repo.gated else False,
                           "siblings": siblings}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def resolve(self, repo_id, revision, path):
        self.record("resolve", repo=repo_id, file=path)
        repo, commit, files = self.find(repo_id, revision)
        if repo is None:
            return
        if path not in files:
            self.send_error_code(404, "EntryNotFound", "%s does not exist on %s" % (path, revision))
            return
        data = files[path]
        if path.endswith(LFS_SUFFIXES):
            sha = hashlib.sha256(data).hexdigest()
            self.send_response(302)
            self.send_header("Location", "%s/cdn/%s?file=%s" % (self.fake.storage, sha,
                                                               urllib.parse.quote(path, safe="")))
            self.send_header("X-Repo-Commit", commit)
            self.send_header("X-Linked-Etag", '"%s"' % sha)
            if not self.fake.hide_sizes:
                self.send_header("X-Linked-Size", str(len(data)))
            self.send_header("ETag", '"%s"' % git_blob_id(data))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_content(data, path, extra={"X-Repo-Commit": commit,
                                             "ETag": '"%s"' % git_blob_id(data)})

    def cdn(self, sha):
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        path = query.get("file", [""])[0]
        self.record("cdn", file=path)
        data = self.fake.blobs.get(sha)
        if data is None:
            self.send_error_code(404, "NotFound", "no such object")
            return
        self.send_content(data, path)

    def send_content(self, data, path, extra=None):
        fake = self.fake
        if path in fake.corrupt_always or (path in fake.corrupt_once and self.command == "GET"
                                           and fake.first_time("corrupt", path)):
            data = bytearray(data)
            data[len(data) // 3] ^= 0xFF
            data = bytes(data)
        start = 0
        rng = self.headers.get("Range")
        status = 200
        if rng and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % len(data))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        body = data[start:]
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command == "HEAD":
            return
        cut = None
        if path in fake.cut_once and fake.first_time("cut", path):
            cut = len(body) // 2
        delay = fake.slow.get(path, 0)
        sent = 0
        chunk = 16384
        try:
            while sent < len(body):
                n = min(chunk, len(body) - sent)
                if cut is not None and sent + n > cut:
                    n = cut - sent
                if sent + n == len(body):
                    self.record("sent", file=path)  # before the last bytes: the client may exit
                self.wfile.write(body[sent:sent + n])
                sent += n
                if cut is not None and sent >= cut:
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if delay:
                    time.sleep(delay)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


def serve_directory(root, port=0):
    """Serves ROOT/org/name/** as repos (branch main); returns the started FakeHub."""
    hub = FakeHub(token=os.environ.get("HF_TOKEN", "hf_test_token"))
    for org in sorted(os.listdir(root)):
        for name in sorted(os.listdir(os.path.join(root, org))):
            base = os.path.join(root, org, name)
            files = {}
            for dirpath, _, filenames in os.walk(base):
                for f in filenames:
                    full = os.path.join(dirpath, f)
                    with open(full, "rb") as fh:
                        files[os.path.relpath(full, base)] = fh.read()
            hub.add_repo(org + "/" + name, files)
    hub.start()
    return hub


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: fake_hub.py ROOT")
    h = serve_directory(sys.argv[1])
    print(h.endpoint, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        h.stop()
