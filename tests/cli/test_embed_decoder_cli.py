#!/usr/bin/env python3
"""System test of decoder embedding models with `brisk embed`, against a reference written out here
in plain Python (no torch, no numpy): a tiny EmbeddingGemma folder made from scratch
(Gemma3TextModel with use_bidirectional_attention: a sliding layer of window 8, so 4 positions
either side, then a full layer; (1 + w) RMSNorms, q/k norms, embeddings scaled by sqrt(hidden), two
rope bases, GQA, GeGLU; sentence-transformers mean pooling, 2_Dense / 3_Dense, Normalize) run on
inputs of 3, 11 and 23 tokens at once: each vector within 1e-4 of the reference, every token's last
hidden state of the longest input too (a causal or wrongly windowed attention differs there), and
the same vectors from its GGUF conversion (`brisk quantize ... F32`, llama.cpp's gemma-embedding).
The transformers parity tests (tests/unit/test_embed_decoder.cpp) check the same models against
the reference implementation when tests/fixtures/models/embed_* are present. Exit 77 = skipped."""
import json
import math
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiny_hf import write_safetensors  # noqa: E402

BIN = os.environ.get("BRISK_BIN", "")
if not BIN or not os.path.exists(BIN):
    print("skip: BRISK_BIN not set"); sys.exit(77)

VOCAB, D, FF, LAYERS, HEADS, KV_HEADS, HD = 64, 16, 32, 2, 2, 1, 8
WINDOW, EPS, THETA_FULL, THETA_SWA, QPAS = 8, 1e-6, 1000000.0, 10000.0, 8.0
LAYER_TYPES = ["sliding_attention", "full_attention"]
DENSE = [(D, 2 * D), (2 * D, D)]

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


rnd = random.Random(4606)


def mat(rows, cols, s=0.3):
    return [[rnd.gauss(0.0, s) for _ in range(cols)] for _ in range(rows)]


def vec(n, s=0.2):
    return [rnd.gauss(0.0, s) for _ in range(n)]


W = {"embed_tokens.weight": mat(VOCAB, D, 0.5), "norm.weight": vec(D)}
for i in range(LAYERS):
    p = f"layers.{i}."
    W[p + "self_attn.q_proj.weight"] = mat(HEADS * HD, D)
    W[p + "self_attn.k_proj.weight"] = mat(KV_HEADS * HD, D)
    W[p + "self_attn.v_proj.weight"] = mat(KV_HEADS * HD, D)
    W[p + "self_attn.o_proj.weight"] = mat(D, HEADS * HD)
    W[p + "self_attn.q_norm.weight"] = vec(HD)
    W[p + "self_attn.k_norm.weight"] = vec(HD)
    W[p + "mlp.gate_proj.weight"] = mat(FF, D)
    W[p + "mlp.up_proj.weight"] = mat(FF, D)
    W[p + "mlp.down_proj.weight"] = mat(D, FF)
    for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"):
        W[p + n + ".weight"] = vec(D)
DENSE_W = [mat(o, i, 0.3) for i, o in DENSE]


def flat(t):
    return [x for row in t for x in row] if t and isinstance(t[0], list) else list(t)


def shape(t):
    return (len(t), len(t[0])) if isinstance(t[0], list) else (len(t),)


def write_folder(d):
    config = {"architectures": ["Gemma3TextModel"], "model_type": "gemma3_text", "vocab_size": VOCAB,
              "hidden_size": D, "intermediate_size": FF, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
              "num_key_value_heads": KV_HEADS, "head_dim": HD, "query_pre_attn_scalar": QPAS,
              "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 128, "rms_norm_eps": EPS,
              "sliding_window": WINDOW, "layer_types": LAYER_TYPES, "use_bidirectional_attention": True,
              "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": THETA_SWA},
                                  "full_attention": {"rope_type": "default", "rope_theta": THETA_FULL}},
              "pad_token_id": 0, "eos_token_id": 1, "bos_token_id": 2, "tie_word_embeddings": True,
              "final_logit_softcapping": None, "attn_logit_softcapping": None}
    json.dump(config, open(os.path.join(d, "config.json"), "w"))
    write_safetensors(os.path.join(d, "model.safetensors"), [(k, shape(v), flat(v)) for k, v in sorted(W.items())])
    mods = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
            {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"},
            {"idx": 4, "name": "4", "path": "4_Normalize", "type": "sentence_transformers.models.Normalize"}]
    json.dump(mods, open(os.path.join(d, "modules.json"), "w"))
    os.makedirs(os.path.join(d, "1_Pooling"))
    json.dump({"word_embedding_dimension": D, "pooling_mode_mean_tokens": True},
              open(os.path.join(d, "1_Pooling", "config.json"), "w"))
    for k, ((i, o), w) in enumerate(zip(DENSE, DENSE_W)):
        sub = os.path.join(d, f"{k + 2}_Dense")
        os.makedirs(sub)
        json.dump({"in_features": i, "out_features": o, "bias": False,
                   "activation_function": "torch.nn.modules.linear.Identity"}, open(os.path.join(sub, "config.json"), "w"))
        write_safetensors(os.path.join(sub, "model.safetensors"), [("linear.weight", (o, i), flat(w))])
    os.makedirs(os.path.join(d, "4_Normalize"))
    json.dump({"prompts": {"query": "task: search result | query: ", "document": "title: none | text: "},
               "default_prompt_name": None, "similarity_fn_name": "cosine"},
              open(os.path.join(d, "config_sentence_transformers.json"), "w"))
    json.dump({"max_seq_length": 64, "do_lower_case": False}, open(os.path.join(d, "sentence_bert_config.json"), "w"))


# ---- the reference (transformers' Gemma3TextModel with bidirectional attention, written out)

def matvec(m, x):
    return [sum(a * b for a, b in zip(row, x)) for row in m]


def rms(x, w):
    s = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + EPS)
    return [v * s * (1.0 + g) for v, g in zip(x, w)]


def rope(x, pos, theta):
    half = len(x) // 2
    out = list(x)
    for i in range(half):
        a = pos / theta ** (2.0 * i / len(x))
        c, s = math.cos(a), math.sin(a)
        out[i] = x[i] * c - x[i + half] * s
        out[i + half] = x[i + half] * c + x[i] * s
    return out


def gelu_tanh(x):
    return 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def reference_hidden(ids):
    n = len(ids)
    x = [[v * math.sqrt(D) for v in W["embed_tokens.weight"][t]] for t in ids]
    for il in range(LAYERS):
        p = f"layers.{il}."
        sliding = LAYER_TYPES[il] == "sliding_attention"
        theta = THETA_SWA if sliding else THETA_FULL
        reach = WINDOW // 2 if sliding else n  # |q - k| < W // 2 + 1
        h = [rms(r, W[p + "input_layernorm.weight"]) for r in x]
        q = [matvec(W[p + "self_attn.q_proj.weight"], r) for r in h]
        k = [matvec(W[p + "self_attn.k_proj.weight"], r) for r in h]
        v = [matvec(W[p + "self_attn.v_proj.weight"], r) for r in h]
        qh = [[rope(rms(q[t][j * HD:(j + 1) * HD], W[p + "self_attn.q_norm.weight"]), t, theta) for j in range(HEADS)]
              for t in range(n)]
        kh = [[rope(rms(k[t][j * HD:(j + 1) * HD], W[p + "self_attn.k_norm.weight"]), t, theta)
               for j in range(KV_HEADS)] for t in range(n)]
        attn = []
        for t in range(n):
            row = []
            for j in range(HEADS):
                g = j // (HEADS // KV_HEADS)
                keys = [s for s in range(n) if abs(s - t) <= reach]
                sc = [sum(a * b for a, b in zip(qh[t][j], kh[s][g])) / math.sqrt(QPAS) for s in keys]
                m = max(sc)
                e = [math.exp(z - m) for z in sc]
                tot = sum(e)
                row += [sum(e[i] / tot * v[s][g * HD + c] for i, s in enumerate(keys)) for c in range(HD)]
            attn.append(row)
        o = [rms(matvec(W[p + "self_attn.o_proj.weight"], r), W[p + "post_attention_layernorm.weight"]) for r in attn]
        x = [[a + b for a, b in zip(r, s)] for r, s in zip(x, o)]
        h = [rms(r, W[p + "pre_feedforward_layernorm.weight"]) for r in x]
        f = []
        for r in h:
            act = [gelu_tanh(a) * b for a, b in zip(matvec(W[p + "mlp.gate_proj.weight"], r), matvec(W[p + "mlp.up_proj.weight"], r))]
            f.append(rms(matvec(W[p + "mlp.down_proj.weight"], act), W[p + "post_feedforward_layernorm.weight"]))
        x = [[a + b for a, b in zip(r, s)] for r, s in zip(x, f)]
    return [rms(r, W["norm.weight"]) for r in x]


def reference_vector(ids):
    hid = reference_hidden(ids)
    y = [sum(r[c] for r in hid) / len(hid) for c in range(D)]
    for w in DENSE_W:
        y = matvec(w, y)
    norm = math.sqrt(sum(a * a for a in y))
    return [a / norm for a in y]


def run(args):
    return subprocess.run([BIN] + args, capture_output=True, text=True, timeout=300)


def max_diff(a, b):
    return max(abs(x - y) for x, y in zip(a, b)) if len(a) == len(b) else float("inf")


inputs = [[2] + [rnd.randrange(4, VOCAB) for _ in range(n - 2)] + [1] for n in (3, 11, 23)]
with tempfile.TemporaryDirectory() as tmp:
    folder = os.path.join(tmp, "tiny-embeddinggemma")
    os.makedirs(folder)
    write_folder(folder)
    id_args = [",".join(map(str, s)) for s in inputs]
    want = [reference_vector(s) for s in inputs]
    p = run(["embed", "-m", folder, "--ids", "-t", "2"] + id_args)
    check(p.returncode == 0, f"embed: {p.stderr}")
    got = [json.loads(line)["embedding"] for line in p.stdout.splitlines()] if p.returncode == 0 else []
    check(len(got) == 3, f"three vectors: {p.stdout[:200]}")
    for i, (g, w) in enumerate(zip(got, want)):
        check(max_diff(g, w) < 1e-4, f"input {i} ({len(inputs[i])} tokens): max diff {max_diff(g, w)}")
    p = run(["embed", "-m", folder, "--ids", "--hidden", "-t", "2", id_args[2]])
    check(p.returncode == 0, f"--hidden: {p.stderr}")
    if p.returncode == 0:
        rows = json.loads(p.stdout)["embedding"]
        ref_rows = reference_hidden(inputs[2])
        worst = max(max_diff(a, b) for a, b in zip(rows, ref_rows)) if len(rows) == len(ref_rows) else float("inf")
        check(worst < 1e-4, f"hidden states of the 23-token input: max diff {worst}")
    gguf = os.path.join(tmp, "tiny.gguf")
    p = run(["quantize", folder, gguf, "F32", "-t", "2"])
    check(p.returncode == 0, f"quantize: {p.stderr}")
    if p.returncode == 0:
        p = run(["embed", "-m", gguf, "--ids", "-t", "2"] + id_args)
        check(p.returncode == 0, f"embed GGUF: {p.stderr}")
        got = [json.loads(line)["embedding"] for line in p.stdout.splitlines()] if p.returncode == 0 else []
        check(len(got) == 3 and all(max_diff(g, w) < 1e-4 for g, w in zip(got, want)), "GGUF vectors")

if failures:
    print(f"{len(failures)} failures"); sys.exit(1)
print("decoder embedding cli system test: ok")
