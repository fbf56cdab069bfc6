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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_util import skip_missing  # noqa: E402

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


def top5(ref_json):
    import json
    return list(json.load(open(ref_json))["top5_last"])[:5]


def prompt_ids(model_dir):
    import json
    return ",".join(str(i) for i in json.load(open(os.path.join(model_dir, "ref.json")))["input_ids"])


def logits_top5(model, tmp):
    """Top-5 token ids of the last prompt position (the qwen3 fixture prompt)."""
    ids = prompt_ids(os.path.join(DATA, "models", "qwen3"))
    path = os.path.join(tmp, "logits.f32")
    run("generate", "--model", model, "--prompt-ids", ids, "-n", "1", "--temp", "0", "--dump-logits", path)
    raw = open(path, "rb").read()
    v = struct.unpack("<%df" % (len(raw) // 4), raw)
    return sorted(range(len(v)), key=lambda i: -v[i])[:5]


def main():
    if not BIN:
        print("skip: BRISK_BIN not set")
        return 77
    if not DATA or not os.path.isdir(os.path.join(DATA, "models")):
        return skip_missing("BRISK_SHARED_DATA with models/ (shared data)")
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
            ref = top5(os.path.join(DATA, "models", "qwen3", "ref.json"))
            theirs = os.path.join(DATA, "models", "qwen3", "model-q8_0.gguf")
            mine = logits_top5(out, tmp)
            # Q8_0 rounding may swap near-tied logits of this tiny random model: the f32 run
            # must give the reference exactly, ours the same set, and exactly llama.cpp's Q8_0.
            if logits_top5(src, tmp) != ref or set(mine) != set(ref) or mine != logits_top5(theirs, tmp):
                failures.append("qwen3 Q8_0 top-5 %r vs f32 %r, ref %r" % (mine, logits_top5(src, tmp), ref))

        # Hugging Face folders: F32 conversion equals llama.cpp's converter tensor by tensor
        # (Gemma's norms shifted by 1, Qwen3-MoE's experts stacked into 3-D tensors), and the
        # quantized conversion gives the same top-5 as the folder itself.
        for arch in ["llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "gemma3"]:
            hf = os.path.join(DATA, "models", arch, "hf")
            ref_gguf = os.path.join(DATA, "models", arch, "model-f32.gguf")
            if not os.path.isdir(hf) or not os.path.exists(ref_gguf):
                continue
            out = os.path.join(tmp, arch + "-hf-f32.gguf")
            run("quantize", hf, out, "F32")
            meta, mine = read_gguf(out)
            ref_meta, theirs = read_gguf(ref_gguf)
            if meta.get("general.architecture") != ref_meta.get("general.architecture"):
                failures.append("%s: architecture %r" % (arch, meta.get("general.architecture")))
            if set(mine) != set(theirs):
                failures.append("%s: HF tensor names differ: %r" % (arch, sorted(set(mine) ^ set(theirs))))
                continue
            for name, (typ, ne, data) in theirs.items():
                m = mine[name]
                if m[0] != typ or m[1] != ne:
                    failures.append("%s: HF %s type/shape %d %s vs %d %s" % (arch, name, m[0], m[1], typ, ne))
                    continue
                a = struct.unpack("<%df" % (len(data) // 4), data[:len(data) // 4 * 4])
                b = struct.unpack("<%df" % (len(m[2]) // 4), m[2][:len(data) // 4 * 4])
                if max(abs(x - y) for x, y in zip(a, b)) > 1e-6:
                    failures.append("%s: HF %s values differ from llama.cpp's conversion" % (arch, name))
            if logits_top5(out, tmp) != logits_top5(hf, tmp):
                failures.append("%s: F32 GGUF from the HF folder: top-5 %r vs folder %r"
                                % (arch, logits_top5(out, tmp), logits_top5(hf, tmp)))
            q8 = os.path.join(tmp, arch + "-hf-q8_0.gguf")
            run("quantize", hf, q8, "Q8_0")
            a, b = logits_top5(q8, tmp), logits_top5(hf, tmp)
            if a[0] not in b[:2] or len(set(a) & set(b)) < 4:  # near-ties may swap
                failures.append("%s: Q8_0 from the HF folder: top-5 %r vs folder %r" % (arch, a, b))

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
