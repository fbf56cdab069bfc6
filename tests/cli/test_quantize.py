#!/usr/bin/env python3
"""System test of `brisk quantize`: Q8_0 of the fixture models must have the same tensor
types and the same tensor bytes as llama.cpp's model-q8_0.gguf; the metadata of the input is
kept with general.file_type set; the quantized qwen3 model gives the f32 model's top-5; unknown
recipes and bad input fail with a message."""
import os
import struct
import subprocess
import sys
import tempfile

BIN = os.environ.get("BRISK_BIN", "")
DATA = os.environ.get("BRISK_SHARED_DATA", "")


def read_gguf(path):
    """Returns (metadata dict, {name: (type, ne, bytes)}) of a GGUF v3 file."""
    b = open(path, "rb").read()
    assert b[:4] == b"GGUF", path
    pos = 8
    n_t, n_kv = struct.unpack_from("<QQ", b, pos)
    pos += 16

    def string():
        nonlocal pos
        (n,) = struct.unpack_from("<Q", b, pos)
        s = b[pos + 8:pos + 8 + n].decode("utf-8", "replace")
        pos += 8 + n
        return s

    scalar = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}

    def value(t):
        nonlocal pos
        if t == 8:
            return string()
        if t == 9:
            (et,) = struct.unpack_from("<I", b, pos)
            (n,) = struct.unpack_from("<Q", b, pos + 4)
            pos += 12
            return [value(et) for _ in range(n)]
        (v,) = struct.unpack_from(scalar[t], b, pos)
        pos += struct.calcsize(scalar[t])
        return v

    meta = {}
    for _ in range(n_kv):
        k = string()
        (t,) = struct.unpack_from("<I", b, pos)
        pos += 4
        meta[k] = value(t)
    infos = []
    for _ in range(n_t):
        name = string()
        (nd,) = struct.unpack_from("<I", b, pos)
        ne = struct.unpack_from("<%dQ" % nd, b, pos + 4)
        typ, off = struct.unpack_from("<IQ", b, pos + 4 + 8 * nd)
        pos += 4 + 8 * nd + 12
        infos.append((name, typ, ne, off))
    align = meta.get("general.alignment", 32)
    data = (pos + align - 1) // align * align
    offs = sorted(o for _, _, _, o in infos) + [len(b) - data]
    tensors = {}
    for name, typ, ne, off in infos:
        nxt = min(o for o in offs if o > off) if any(o > off for o in offs) else len(b) - data
        tensors[name] = (typ, tuple(ne), b[data + off:data + nxt])
    return meta, tensors


def run(*args, check=True):
    p = subprocess.run([BIN, *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        sys.exit("brisk %s failed: %s" % (" ".join(args), p.stderr))
    return p


def main():
    if not BIN or not DATA or not os.path.isdir(os.path.join(DATA, "models")):
        print("skip: needs BRISK_BIN and BRISK_SHARED_DATA with models/")
        return 77
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for arch in ["llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "gemma3"]:
            src = os.path.join(DATA, "models", arch, "model-f32.gguf")
            ref = os.path.join(DATA, "models", arch, "model-q8_0.gguf")
            if not os.path.exists(src) or not os.path.exists(ref):
                continue
            out = os.path.join(tmp, arch + "-q8_0.gguf")
            run("quantize", src, out, "Q8_0", "-t", "2")
            meta_in, _ = read_gguf(src)
            meta, mine = read_gguf(out)
            _, theirs = read_gguf(ref)
            if meta.get("general.file_type") != 7:
                failures.append("%s: general.file_type %r" % (arch, meta.get("general.file_type")))
            for k, v in meta_in.items():
                if k != "general.file_type" and meta.get(k) != v:
                    failures.append("%s: metadata %s changed" % (arch, k))
            if set(mine) != set(theirs):
                failures.append("%s: tensor names differ" % arch)
                continue
            for name, (typ, ne, data) in theirs.items():
                m = mine[name]
                if m[0] != typ or m[1] != ne:
                    failures.append("%s: %s is type %d %s, llama.cpp %d %s" % (arch, name, m[0], m[1], typ, ne))
                elif m[2].rstrip(b"\0") != data.rstrip(b"\0"):
                    failures.append("%s: %s bytes differ" % (arch, name))

        # The quantized model runs and agrees with the f32 model on the top-5 of the prompt.
        src = os.path.join(DATA, "models", "qwen3", "model-f32.gguf")
        if os.path.exists(src):
            out = os.path.join(tmp, "qwen3-q8_0.gguf")
            ids = "1,2,3,4,5,6,7,8,9,10"
            a = run("generate", "--model", src, "--prompt-ids", ids, "-n", "8", "--temp", "0", "--show-ids")
            b = run("generate", "--model", out, "--prompt-ids", ids, "-n", "8", "--temp", "0", "--show-ids")
            if a.stdout.split()[:4] != b.stdout.split()[:4]:
                failures.append("qwen3 Q8_0 greedy ids %r differ from f32 %r" % (b.stdout[:80], a.stdout[:80]))

        bad = run("quantize", src, os.path.join(tmp, "x.gguf"), "Q3_Z", check=False)
        if bad.returncode == 0 or "unknown TYPE" not in bad.stderr:
            failures.append("unknown recipe not rejected: %r" % bad.stderr)
        junk = os.path.join(tmp, "junk.gguf")
        open(junk, "wb").write(b"GGUF\x03\0\0\0" + b"\xff" * 40)
        bad = run("quantize", junk, os.path.join(tmp, "y.gguf"), "Q8_0", check=False)
        if bad.returncode == 0 or not bad.stderr.strip():
            failures.append("truncated GGUF not rejected")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
