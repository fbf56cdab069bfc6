"""System tests of `brisk pull`, `brisk list` and `brisk rm` against tests/hub/fake_hub.py.

Each test gets a fresh HF_HOME and a fake Hub on 127.0.0.1 (HF_ENDPOINT points at it). The
cache is checked the way huggingface_hub looks files up: refs/<revision> -> commit,
snapshots/<commit>/<path> a relative symlink to ../../blobs/<etag>, the blob's sha256.
"""
import hashlib
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

BIN = os.environ.get("BRISK_BIN")
SRC = os.environ.get("BRISK_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tests", "hub"))
from fake_hub import FakeHub, git_blob_id  # noqa: E402

GGUF_REPO = "test-org/Tiny-GGUF"
ST_REPO = "test-org/Tiny"
GATED_REPO = "test-org/Gated-GGUF"


def gguf_bytes(arch, n_pad, seed):
    """A small GGUF v3 header (general.architecture, general.name, no tensors) + padding."""
    def string(s):
        b = s.encode()
        return struct.pack("<Q", len(b)) + b
    kv = string("general.architecture") + struct.pack("<I", 8) + string(arch)
    kv += string("general.name") + struct.pack("<I", 8) + string("tiny")
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, 2) + kv
    rnd = random.Random(seed)
    return head + rnd.randbytes(n_pad)


def make_hub():
    hub = FakeHub()
    gguf = {
        "README.md": b"# tiny\n",
        "tiny-Q4_K_M.gguf": gguf_bytes("llama", 40000, 1),
        "tiny-Q8_0.gguf": gguf_bytes("llama", 300000, 2),
        "F16/tiny-F16-00001-of-00002.gguf": gguf_bytes("llama", 50000, 3),
        "F16/tiny-F16-00002-of-00002.gguf": bytes(30000),
        "mmproj-tiny-f16.gguf": gguf_bytes("clip", 1000, 4),
    }
    v1 = {"README.md": b"old\n", "tiny-Q8_0.gguf": gguf_bytes("llama", 20000, 5)}
    hub.add_repo(GGUF_REPO, gguf, branches={"v1": v1})
    index = {"metadata": {"total_size": 4},
             "weight_map": {"a": "model-00001-of-00002.safetensors",
                            "b": "model-00002-of-00002.safetensors"}}
    hub.add_repo(ST_REPO, {
        "config.json": json.dumps({"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"]}).encode(),
        "generation_config.json": b"{}",
        "model.safetensors.index.json": json.dumps(index).encode(),
        "model-00001-of-00002.safetensors": os.urandom(70000),
        "model-00002-of-00002.safetensors": os.urandom(50000),
        "tokenizer.json": b'{"model": {}}',
        "tokenizer_config.json": b"{}",
        "chat_template.jinja": b"{{ messages }}",
        "pytorch_model.bin": os.urandom(1000),
        "original/consolidated.pth": os.urandom(1000),
        "README.md": b"readme",
    })
    hub.add_repo(GATED_REPO, {"gated-Q8_0.gguf": gguf_bytes("qwen3", 20000, 6)}, gated=True)
    return hub


class HubTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="brisk-hub-")
        self.hub = make_hub()
        self.hub.start()
        self.env = dict(os.environ)
        for k in ("HF_TOKEN", "HF_HUB_OFFLINE", "HF_HUB_CACHE", "HF_TOKEN_PATH", "XDG_CACHE_HOME"):
            self.env.pop(k, None)
        self.env.update(HF_HOME=os.path.join(self.tmp, "hf"), HF_ENDPOINT=self.hub.endpoint)
        self.cache = os.path.join(self.tmp, "hf", "hub")

    def tearDown(self):
        self.hub.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def brisk(self, *args, env=None, ok=True):
        e = dict(self.env)
        e.update(env or {})
        p = subprocess.run([BIN, *args], env=e, capture_output=True, text=True, timeout=60)
        if ok is None:
            pass
        elif ok:
            self.assertEqual(p.returncode, 0, "brisk %s failed:\n%s" % (" ".join(args), p.stderr))
        else:
            self.assertNotEqual(p.returncode, 0, "brisk %s should fail:\n%s" % (" ".join(args), p.stdout))
        return p

    def repo_dir(self, repo_id):
        return os.path.join(self.cache, "models--" + repo_id.replace("/", "--"))

    def hf_lookup(self, repo_id, revision, path):
        """huggingface_hub's try_to_load_from_cache: refs -> snapshot -> file."""
        root = self.repo_dir(repo_id)
        commit = revision
        ref = os.path.join(root, "refs", revision)
        if os.path.isfile(ref):
            with open(ref) as f:
                commit = f.read()
        p = os.path.join(root, "snapshots", commit, path)
        return p if os.path.isfile(p) else None

    def assert_cached(self, repo_id, path, revision="main"):
        p = self.hf_lookup(repo_id, revision, path)
        self.assertIsNotNone(p, "%s/%s not found in the cache by revision %s" % (repo_id, path, revision))
        self.assertTrue(os.path.islink(p))
        target = os.readlink(p)
        depth = path.count("/")
        self.assertTrue(target.startswith("../../" + "../" * depth + "blobs/"), target)
        commit, files = self.hub.repos[repo_id].revisions[revision]
        data = files[path]
        with open(p, "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).hexdigest(), hashlib.sha256(data).hexdigest())
        etag = hashlib.sha256(data).hexdigest() if path.endswith(".gguf") or path.endswith(".safetensors") else git_blob_id(data)
        self.assertEqual(os.path.basename(target), etag)
        return p

    def snapshot_files(self, repo_id, revision="main"):
        commit = self.hub.commit(repo_id, revision)
        base = os.path.join(self.repo_dir(repo_id), "snapshots", commit)
        out = []
        for d, _, fs in os.walk(base):
            out += [os.path.relpath(os.path.join(d, f), base) for f in fs]
        return sorted(out)

    def incomplete_files(self, repo_id):
        blobs = os.path.join(self.repo_dir(repo_id), "blobs")
        return [f for f in os.listdir(blobs) if f.endswith(".incomplete")] if os.path.isdir(blobs) else []

    # ---- reference forms ------------------------------------------------------------
    def test_pull_quant_case_insensitive(self):
        p = self.brisk("pull", GGUF_REPO + ":q8_0")
        path = p.stdout.strip()
        self.assertEqual(path, self.assert_cached(GGUF_REPO, "tiny-Q8_0.gguf"))
        self.assertEqual(self.snapshot_files(GGUF_REPO), ["tiny-Q8_0.gguf"])
        self.assertIn("downloading tiny-Q8_0.gguf", p.stderr)  # plain lines when not a TTY
        # storage host (other origin) never sees the token even when one is set
        self.brisk("pull", GGUF_REPO + ":Q4_K_M", env={"HF_TOKEN": "hf_test_token"})
        cdn = self.hub.requests("cdn")
        self.assertTrue(cdn and all(r["auth"] is None for r in cdn))
        self.assertTrue(all(r["auth"] for r in self.hub.requests("api")[1:]))

    def test_pull_default_quant_and_sharded_and_file(self):
        path = self.brisk("pull", GGUF_REPO).stdout.strip()
        self.assertEqual(path, self.assert_cached(GGUF_REPO, "tiny-Q4_K_M.gguf"))
        path = self.brisk("pull", GGUF_REPO + ":f16").stdout.strip()
        self.assertEqual(path, self.assert_cached(GGUF_REPO, "F16/tiny-F16-00001-of-00002.gguf"))
        self.assert_cached(GGUF_REPO, "F16/tiny-F16-00002-of-00002.gguf")
        path = self.brisk("pull", GGUF_REPO + "/tiny-Q8_0.gguf").stdout.strip()
        self.assertEqual(path, self.assert_cached(GGUF_REPO, "tiny-Q8_0.gguf"))
        self.assertNotIn("mmproj-tiny-f16.gguf", self.snapshot_files(GGUF_REPO))
        # pulling again downloads nothing
        before = len(self.hub.requests("cdn"))
        self.brisk("pull", GGUF_REPO + ":Q8_0")
        self.assertEqual(len(self.hub.requests("cdn")), before)

    def test_shards_download_in_parallel_with_a_bar(self):
        for f in ("F16/tiny-F16-00001-of-00002.gguf", "F16/tiny-F16-00002-of-00002.gguf"):
            self.hub.slow[f] = 0.05
        p = self.brisk("pull", GGUF_REPO + ":F16", "--progress", "bar")
        self.assertIn("ETA", p.stderr)
        self.assertIn("100%", p.stderr)
        starts = [r["time"] for r in self.hub.requests("cdn")]
        ends = [r["time"] for r in self.hub.requests("sent")]
        self.assertEqual((len(starts), len(ends)), (2, 2))
        self.assertLess(max(starts), min(ends))  # both transfers were running at once
        p = self.brisk("pull", GGUF_REPO + ":Q4_K_M", "--jobs", "1", "--quiet")
        self.assertEqual(p.stderr, "")

    def test_mirror_without_blob_metadata(self):
        self.hub.api_without_blobs = True
        self.brisk("pull", GGUF_REPO + ":Q8_0")
        self.assert_cached(GGUF_REPO, "tiny-Q8_0.gguf")
        self.brisk("pull", ST_REPO)
        self.assert_cached(ST_REPO, "config.json")
        self.assertTrue(self.hub.requests("resolve"))

    def test_pull_revision(self):
        path = self.brisk("pull", GGUF_REPO + "@v1:Q8_0").stdout.strip()
        self.assertEqual(path, self.assert_cached(GGUF_REPO, "tiny-Q8_0.gguf", revision="v1"))
        commit = self.hub.commit(GGUF_REPO, "v1")
        self.assertIn(commit, path)
        path2 = self.brisk("pull", GGUF_REPO + "@" + commit + ":Q8_0").stdout.strip()
        self.assertEqual(path, path2)
        self.assertFalse(os.path.exists(os.path.join(self.repo_dir(GGUF_REPO), "refs", commit)))
        p = self.brisk("pull", GGUF_REPO + "@nope", ok=False)
        self.assertIn("revision 'nope' not found", p.stderr)

    def test_pull_safetensors(self):
        path = self.brisk("pull", ST_REPO).stdout.strip()
        commit = self.hub.commit(ST_REPO)
        self.assertEqual(path, os.path.join(self.repo_dir(ST_REPO), "snapshots", commit))
        self.assertEqual(self.snapshot_files(ST_REPO), sorted([
            "chat_template.jinja", "config.json", "generation_config.json",
            "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
            "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json"]))
        for f in ("config.json", "model-00002-of-00002.safetensors"):
            self.assert_cached(ST_REPO, f)

    # ---- integrity and resume -------------------------------------------------------
    def test_cut_download_resumes_and_verifies(self):
        self.hub.cut_once.add("tiny-Q8_0.gguf")
        p = self.brisk("pull", GGUF_REPO + ":Q8_0")
        self.assertIn("interrupted", p.stderr)
        self.assert_cached(GGUF_REPO, "tiny-Q8_0.gguf")
        cdn = self.hub.requests("cdn", "tiny-Q8_0.gguf")
        self.assertEqual(len(cdn), 2)
        self.assertIsNone(cdn[0]["range"])
        self.assertTrue(cdn[1]["range"] and cdn[1]["range"] != "bytes=0-", cdn[1])
        self.assertEqual(self.incomplete_files(GGUF_REPO), [])

    def test_partial_file_from_earlier_run_resumes(self):
        data = self.hub.repos[GGUF_REPO].revisions["main"][1]["tiny-Q8_0.gguf"]
        sha = hashlib.sha256(data).hexdigest()
        blobs = os.path.join(self.repo_dir(GGUF_REPO), "blobs")
        os.makedirs(blobs)
        with open(os.path.join(blobs, sha + ".incomplete"), "wb") as f:
            f.write(data[:100000])
        self.brisk("pull", GGUF_REPO + ":Q8_0")
        self.assertEqual([r["range"] for r in self.hub.requests("cdn")], ["bytes=100000-"])
        self.assert_cached(GGUF_REPO, "tiny-Q8_0.gguf")

    def test_corrupted_partial_is_rejected_and_downloaded_again(self):
        data = self.hub.repos[GGUF_REPO].revisions["main"][1]["tiny-Q8_0.gguf"]
        sha = hashlib.sha256(data).hexdigest()
        blobs = os.path.join(self.repo_dir(GGUF_REPO), "blobs")
        os.makedirs(blobs)
        with open(os.path.join(blobs, sha + ".incomplete"), "wb") as f:
            f.write(b"\0" * 100000)  # right length prefix, wrong bytes
        p = self.brisk("pull", GGUF_REPO + ":Q8_0")
        self.assertIn("discarding", p.stderr)
        self.assertEqual([r["range"] for r in self.hub.requests("cdn")], ["bytes=100000-", None])
        self.assert_cached(GGUF_REPO, "tiny-Q8_0.gguf")

    def test_corrupted_transfer_is_downloaded_again(self):
        self.hub.corrupt_once.add("tiny-Q4_K_M.gguf")
        p = self.brisk("pull", GGUF_REPO + ":Q4_K_M")
        self.assertIn("sha256", p.stderr)
        self.assertEqual(len(self.hub.requests("cdn")), 2)
        self.assert_cached(GGUF_REPO, "tiny-Q4_K_M.gguf")

    def test_always_corrupted_fails_without_a_complete_file(self):
        self.hub.corrupt_always.add("tiny-Q4_K_M.gguf")
        p = self.brisk("pull", GGUF_REPO + ":Q4_K_M", ok=False)
        self.assertIn("integrity check", p.stderr)
        self.assertIsNone(self.hf_lookup(GGUF_REPO, "main", "tiny-Q4_K_M.gguf"))
        blobs = os.listdir(os.path.join(self.repo_dir(GGUF_REPO), "blobs"))
        self.assertTrue(all(b.endswith(".incomplete") for b in blobs), blobs)

    def test_concurrent_pulls_end_with_one_copy(self):
        self.hub.slow["tiny-Q8_0.gguf"] = 0.01  # ~19 chunks: about 0.2 s per transfer
        e = dict(self.env)
        procs = [subprocess.Popen([BIN, "pull", GGUF_REPO + ":Q8_0"], env=e,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
        outs = [p.communicate(timeout=60) for p in procs]
        for p, (out, err) in zip(procs, outs):
            self.assertEqual(p.returncode, 0, err)
        self.assertEqual(outs[0][0], outs[1][0])
        self.assert_cached(GGUF_REPO, "tiny-Q8_0.gguf")
        self.assertEqual(len(self.hub.requests("cdn", "tiny-Q8_0.gguf")), 1)
        blobs = os.listdir(os.path.join(self.repo_dir(GGUF_REPO), "blobs"))
        self.assertEqual(len(blobs), 1, blobs)
        lock = os.path.join(self.cache, ".locks", "models--test-org--Tiny-GGUF")
        self.assertTrue(os.path.isdir(lock))
        # a whole safetensors repo (several files, fetched in parallel) from three processes
        for f in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
            self.hub.slow[f] = 0.02
        procs = [subprocess.Popen([BIN, "pull", ST_REPO], env=e, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(3)]
        outs = [p.communicate(timeout=60) for p in procs]
        for p, (out, err) in zip(procs, outs):
            self.assertEqual(p.returncode, 0, err)
        self.assertEqual(len({out for out, _ in outs}), 1)
        # each distinct content was sent exactly once (two files holding "{}" share one blob)
        files = self.hub.repos[ST_REPO].revisions["main"][1]
        sent = {}
        for f in self.snapshot_files(ST_REPO):
            self.assert_cached(ST_REPO, f)
            kind = "cdn" if f.endswith(".safetensors") else "resolve"
            sent[files[f]] = sent.get(files[f], 0) + len(self.hub.requests(kind, f))
        self.assertEqual(set(sent.values()), {1})
        self.assertEqual(self.incomplete_files(ST_REPO), [])

    # ---- errors ---------------------------------------------------------------------
    def test_gated(self):
        p = self.brisk("pull", GATED_REPO, ok=False)
        self.assertIn("is gated", p.stderr)
        self.assertIn("HF_TOKEN", p.stderr)
        p = self.brisk("pull", GATED_REPO, "--token", "wrong", ok=False)
        self.assertIn("no access", p.stderr)
        path = self.brisk("pull", GATED_REPO, env={"HF_TOKEN": "hf_test_token"}).stdout.strip()
        self.assertEqual(path, self.assert_cached(GATED_REPO, "gated-Q8_0.gguf"))
        with open(os.path.join(self.tmp, "hf", "token"), "w") as f:  # huggingface-cli login
            f.write("hf_test_token\n")
        self.brisk("pull", GATED_REPO)
        self.assertTrue(all(r["auth"] is None for r in self.hub.requests("cdn")))

    def test_repo_not_found(self):
        p = self.brisk("pull", "test-org/Missing", ok=False)
        self.assertIn("test-org/Missing not found", p.stderr)

    def test_no_such_quant_lists_available(self):
        p = self.brisk("pull", GGUF_REPO + ":Q2_K", ok=False)
        self.assertIn("no GGUF file of quant Q2_K", p.stderr)
        for q in ("Q4_K_M", "Q8_0", "F16"):
            self.assertIn(q, p.stderr)
        self.assertNotIn("mmproj", p.stderr)

    def test_bad_reference(self):
        p = self.brisk("pull", "not a ref", ok=False)
        self.assertIn("model reference", p.stderr)
        p = self.brisk("pull", "org/na..me", ok=False)
        self.assertIn("'..'", p.stderr)

    def test_network_unreachable(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()  # nothing listens there now: connection refused
        p = self.brisk("pull", GGUF_REPO, env={"HF_ENDPOINT": "http://127.0.0.1:%d" % port}, ok=False)
        self.assertIn("cannot reach the Hub", p.stderr)

    def test_disk_full(self):
        self.hub.claim_size["tiny-Q8_0.gguf"] = 1 << 60  # larger than any disk
        p = self.brisk("pull", GGUF_REPO + ":Q8_0", ok=False)
        self.assertIn("disk full", p.stderr)

    def test_disk_full_while_writing(self):
        # A 128 kB tmpfs as the cache (private mount namespace) and a server that announces no
        # sizes, so the free-space check cannot see it coming: the write itself fails.
        if shutil.which("unshare") is None:
            self.skipTest("unshare not available")
        mnt = os.path.join(self.tmp, "small")
        os.makedirs(mnt)
        probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=128k tmpfs " + mnt],
                               capture_output=True, timeout=30)
        if probe.returncode != 0:
            self.skipTest("cannot mount a tmpfs in a user namespace here")
        self.hub.hide_sizes = True
        e = dict(self.env, HF_HUB_CACHE=mnt)
        p = subprocess.run(["unshare", "-rm", "sh", "-c",
                            'mount -t tmpfs -o size=128k tmpfs "$0" && exec "$@"', mnt,
                            BIN, "pull", GGUF_REPO + ":Q8_0"],
                           env=e, capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("disk full while writing", p.stderr)
        self.assertIn("resumes", p.stderr)

    def test_offline(self):
        p = self.brisk("pull", GGUF_REPO + ":Q8_0", env={"HF_HUB_OFFLINE": "1"}, ok=False)
        self.assertIn("not in the cache", p.stderr)
        self.assertIn("HF_HUB_OFFLINE", p.stderr)
        path = self.brisk("pull", GGUF_REPO + ":Q8_0").stdout.strip()
        self.hub.stop()
        n = len(self.hub.log)
        for ref in (GGUF_REPO + ":Q8_0", GGUF_REPO):  # the default picks what is cached
            out = self.brisk("pull", ref, env={"HF_HUB_OFFLINE": "1"}).stdout.strip()
            self.assertEqual(out, path)
        self.assertEqual(self.brisk("pull", "--offline", GGUF_REPO + ":Q8_0").stdout.strip(), path)
        self.assertEqual(len(self.hub.log), n)
        p = self.brisk("pull", GGUF_REPO + ":Q4_K_M", env={"HF_HUB_OFFLINE": "1"}, ok=False)
        self.assertIn("no GGUF file of quant Q4_K_M", p.stderr)

    def test_generate_by_reference_offline(self):
        # A random-weight GGUF made by brisk itself, served as a repo, pulled, then used by
        # reference with the network off.
        model = os.path.join(self.tmp, "random.gguf")
        self.brisk("make-random-model", "--shape", "tiny", "--type", "q8_0", "--out", model)
        with open(model, "rb") as f:
            self.hub.add_repo("test-org/Random-GGUF", {"random-Q8_0.gguf": f.read()})
        path = self.brisk("pull", "test-org/Random-GGUF").stdout.strip()
        self.hub.stop()
        args = ["generate", "-m", "test-org/Random-GGUF:Q8_0", "--prompt-ids", "1,2,3", "-n", "3"]
        p = self.brisk(*args, env={"HF_HUB_OFFLINE": "1"}, ok=None)
        if p.returncode != 0 and "model path test-org/Random-GGUF:Q8_0 does not exist" in p.stderr:
            self.skipTest("brisk generate does not resolve Hub references yet (hub_resolve_model)")
        self.assertEqual(p.returncode, 0, p.stderr)
        direct = self.brisk("generate", "-m", path, "--prompt-ids", "1,2,3", "-n", "3")
        self.assertEqual(p.stdout, direct.stdout)

    # ---- list and rm ----------------------------------------------------------------
    def test_list_and_rm(self):
        self.assertIn("no models", self.brisk("list").stdout)
        self.brisk("pull", GGUF_REPO + ":Q8_0")
        self.brisk("pull", GGUF_REPO + ":Q4_K_M")
        self.brisk("pull", ST_REPO)
        models = {m["repo_id"]: m for m in json.loads(self.brisk("list", "--json").stdout)}
        self.assertEqual(sorted(models), [ST_REPO, GGUF_REPO])
        g = models[GGUF_REPO]
        self.assertEqual((g["format"], g["quants"], g["architecture"]), ("gguf", ["Q4_K_M", "Q8_0"], "llama"))
        files = self.hub.repos[GGUF_REPO].revisions["main"][1]
        self.assertEqual(g["size_bytes"], len(files["tiny-Q8_0.gguf"]) + len(files["tiny-Q4_K_M.gguf"]))
        self.assertGreater(g["last_used"], 0)
        self.assertEqual(g["revisions"], ["main"])
        s = models[ST_REPO]
        self.assertEqual((s["format"], s["architecture"]), ("safetensors", "qwen3"))
        table = self.brisk("list").stdout
        self.assertIn(GGUF_REPO, table)
        self.assertIn("Q4_K_M,Q8_0", table)

        self.brisk("rm", GGUF_REPO + ":q8_0")
        self.assertIsNone(self.hf_lookup(GGUF_REPO, "main", "tiny-Q8_0.gguf"))
        self.assert_cached(GGUF_REPO, "tiny-Q4_K_M.gguf")
        self.assertEqual(len(os.listdir(os.path.join(self.repo_dir(GGUF_REPO), "blobs"))), 1)
        models = {m["repo_id"]: m for m in json.loads(self.brisk("list", "--json").stdout)}
        self.assertEqual(models[GGUF_REPO]["quants"], ["Q4_K_M"])

        self.brisk("rm", ST_REPO)
        self.assertFalse(os.path.exists(self.repo_dir(ST_REPO)))
        p = self.brisk("rm", ST_REPO, ok=False)
        self.assertIn("not in the cache", p.stderr)
        p = self.brisk("rm", GGUF_REPO + ":Q2_K", ok=False)
        self.assertIn("nothing in the cache matches", p.stderr)
        models = [m["repo_id"] for m in json.loads(self.brisk("list", "--json").stdout)]
        self.assertEqual(models, [GGUF_REPO])

    def test_rm_of_the_only_revision_removes_the_repo(self):
        # Removing the one revision held (or its last file) leaves no empty row in `brisk list`.
        self.brisk("pull", GGUF_REPO + ":Q8_0")
        self.brisk("pull", ST_REPO)
        self.brisk("rm", GGUF_REPO + "@main")
        self.assertFalse(os.path.exists(self.repo_dir(GGUF_REPO)))
        self.brisk("rm", ST_REPO + "/config.json")
        self.assertTrue(os.path.exists(self.repo_dir(ST_REPO)))  # other files are left
        models = [m["repo_id"] for m in json.loads(self.brisk("list", "--json").stdout)]
        self.assertEqual(models, [ST_REPO])
        self.assertNotIn(GGUF_REPO, self.brisk("list").stdout)
        self.brisk("pull", GGUF_REPO + "/README.md")
        self.brisk("rm", "-m", GGUF_REPO + "/README.md")
        self.assertFalse(os.path.exists(self.repo_dir(GGUF_REPO)))


if __name__ == "__main__":
    if not BIN or not os.path.exists(BIN):
        print("BRISK_BIN not set or missing: skipping")
        sys.exit(77)
    unittest.main(verbosity=2)
