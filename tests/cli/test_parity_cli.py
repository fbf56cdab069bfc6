#!/usr/bin/env python3
"""Parity through the CLI, as a user runs it: for every architecture's tiny checkpoint,
`brisk generate MODEL --prompt-ids ... --show-ids --dump-logits F` reproduces the transformers
reference (ref.json) from the Hugging Face folder, from llama.cpp's F32 GGUF where the shared
data has one, and from the F32 GGUF that `brisk quantize` writes: the last prompt position's
logits within 1e-4 (max abs; float32 reference) and the 32 greedy ids equal, with an F32
KV cache (the default F16 cache rounds K and V: about 1e-3 off on these models).

Greedy ids are compared up to the first id of the reference that has no token (the fixtures
pad 1,000 tokens to 1,024 embedding rows): brisk never samples a padding id, by design, where
transformers does; the logits still cover every row.

Table-driven: a new architecture's fixture is one row of ROWS."""
import json
import os
import re
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_util import BIN, brisk, main, skip_missing  # noqa: E402

DATA = os.environ.get("BRISK_SHARED_DATA", "")
SOURCE = os.environ.get("BRISK_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OWN = os.path.join(SOURCE, "tests", "fixtures", "models")
TOL = 1e-4

# (label, Hugging Face folder, ref.json, llama.cpp F32 GGUF or None, why `brisk quantize`
# refuses it or None). A row whose conversion is expected to fail checks the error text, so
# the row must change when the converter learns the architecture.
def S(arch, convert_fails=None):
    d = os.path.join(DATA, "models", arch)
    return ("shared/" + arch, os.path.join(d, "hf"), os.path.join(d, "ref.json"),
            os.path.join(d, "model-f32.gguf"), convert_fails)


def W(name):
    d = os.path.join(DATA, "models", "wave2", name)
    return ("shared/wave2/" + name, os.path.join(d, "hf"), os.path.join(d, "ref.json"), None, None)


def O(name):
    d = os.path.join(OWN, name)
    return ("own/" + name, d, os.path.join(d, "ref.json"), None, None)


ROWS = [
    S("llama"), S("mistral"), S("qwen2"), S("qwen3"), S("qwen3_moe"), S("gemma3"),
    O("llama_tied_gqa"), O("llama_linear"), O("llama_llama3"), O("llama_yarn"),
    O("mistral_window"), O("qwen2_untied"), O("qwen3_mha_tied"),
    W("gemma4_text_ple_kvshare"), W("gemma4_text_keqv"), W("gemma4_text_moe"),
    O("gemma4_window_kvshare"), O("gemma4_keqv_moe"), O("gemma4_ple_moe_wide"),
]


def n_tokens(hf):
    """Ids with a token in the folder's tokenizer.json; None without one (own fixtures)."""
    path = os.path.join(hf, "tokenizer.json")
    if not os.path.exists(path):
        return None
    t = json.load(open(path, encoding="utf-8"))
    ids = list(t["model"]["vocab"].values()) + [a["id"] for a in t.get("added_tokens", [])]
    return max(ids) + 1


def generate(check, label, model, ref, tokens, tmp):
    dump = os.path.join(tmp, "logits.bin")
    if os.path.exists(dump):
        os.remove(dump)
    ids = ",".join(map(str, ref["input_ids"]))
    want = ref["greedy_continuation"]
    r = brisk("generate", model, "--prompt-ids", ids, "-n", str(len(want)), "--show-ids",
              "--dump-logits", dump, "-t", "2", "--device", "cpu", "--kv-type", "f32")
    if not check(label + ": exit", r.returncode == 0, "exit %d: %s" % (r.returncode, r.stderr.strip()[-400:])):
        return
    raw = open(dump, "rb").read() if os.path.exists(dump) else b""
    got = struct.unpack("<%df" % (len(raw) // 4), raw)
    exp = ref["last_logits"]
    if check(label + ": logits size", len(got) == len(exp), "%d values, reference %d" % (len(got), len(exp))):
        diff = max(abs(a - b) for a, b in zip(got, exp))
        check(label + ": logits", diff <= TOL, "max abs diff %.3g > %g" % (diff, TOL))
    m = re.search(r"^ids:((?: \d+)*)$", r.stdout, re.M)
    out = [int(x) for x in m.group(1).split()] if m else []
    n = len(want)
    if tokens is not None:
        n = next((i for i, t in enumerate(want) if t >= tokens), n)
    check(label + ": greedy ids", out[:n] == want[:n] and len(out) >= n,
          "got %s, reference %s (first %d compared)" % (out, want, n))


def run_checks(check, tmp):
    rows = 0
    for label, hf, ref_path, gguf, convert_fails in ROWS:
        if not os.path.exists(ref_path):
            continue
        rows += 1
        ref = json.load(open(ref_path, encoding="utf-8"))
        tokens = n_tokens(hf)
        generate(check, label + " hf", hf, ref, tokens, tmp)
        if gguf and os.path.exists(gguf):
            generate(check, label + " llama.cpp f32 gguf", gguf, ref, tokens, tmp)
        out = os.path.join(tmp, label.replace("/", "_") + "-f32.gguf")
        r = brisk("quantize", hf, out, "F32")
        if convert_fails:
            check(label + ": quantize fails as expected", r.returncode != 0 and convert_fails in r.stderr,
                  "expected the error '%s'; exit %d, stderr: %s (if the converter now writes this "
                  "architecture, drop convert_fails from its row)" % (convert_fails, r.returncode, r.stderr.strip()))
            continue
        if check(label + ": quantize F32", r.returncode == 0 and os.path.exists(out),
                 "exit %d: %s" % (r.returncode, r.stderr.strip())):
            generate(check, label + " brisk f32 gguf", out, ref, tokens, tmp)
            os.remove(out)
    check("fixtures found", rows == len(ROWS), "%d of %d rows have their fixture" % (rows, len(ROWS)))
    print("test_parity_cli: %d rows" % rows)


if __name__ == "__main__":
    if BIN and not os.path.isdir(os.path.join(DATA, "models")):
        sys.exit(skip_missing("BRISK_SHARED_DATA/models missing (shared data)"))
    sys.exit(main("test_parity_cli", run_checks))
