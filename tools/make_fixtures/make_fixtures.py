#!/usr/bin/env python3
"""Tiny random-weight checkpoints with float32 transformers references, for brisk's model tests.

Each variant covers one thing the shared fixtures do not: tied vs untied embeddings, GQA vs
MHA, each rope scaling type (linear, llama3, yarn) and a prompt longer than a sliding window.
For every variant it writes OUT/NAME/ with:
  config.json, model.safetensors      (save_pretrained, float32)
  ref.json                            provenance + input_ids, last_logits, argmax_per_position,
                                      top5_last, greedy_continuation (32 ids, full-sequence
                                      forward per step, no KV cache)
Weights are re-drawn from N(0, 0.1) (norm weights 1 + N(0, 0.1)) with a fixed seed so that the
logits are spread out and greedy choices are not near ties. Runs on the CPU in float32 with
eager attention (no TF32), so the numbers are reproducible on any machine.

Usage: python3 make_fixtures.py --out tests/fixtures/models [--only NAME ...]
Needs torch and transformers (the H200 machine has both).
"""
import argparse
import datetime
import json
import os

import torch
import transformers

HIDDEN = 64
INTER = 128
LAYERS = 2
HEADS = 4
VOCAB = 512
SEED = 1234
N_GREEDY = 32

# name, architecture, overrides. "rope" is the rope_parameters dict of transformers 5 (turned
# into rope_theta/rope_scaling for older versions).
VARIANTS = [
    ("llama_tied_gqa", "llama", dict(tie=True, n_kv=1, head_dim=16, rope={"rope_type": "default", "rope_theta": 10000.0})),
    ("llama_linear", "llama", dict(rope={"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0})),
    ("llama_llama3", "llama", dict(rope={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                         "high_freq_factor": 4.0, "original_max_position_embeddings": 32,
                                         "rope_theta": 500000.0})),
    ("llama_yarn", "llama", dict(rope={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32,
                                       "rope_theta": 10000.0})),
    ("mistral_window", "mistral", dict(sliding_window=8, prompt_len=40)),
    ("qwen2_untied", "qwen2", dict(tie=False)),
    ("qwen3_mha_tied", "qwen3", dict(tie=True, n_kv=4, head_dim=32)),
]

CONFIG_CLASSES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM"),
    "mistral": ("MistralConfig", "MistralForCausalLM"),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM"),
}


def transformers_major():
    return int(transformers.__version__.split(".")[0])


def make_config(arch, o):
    cfg_name, _ = CONFIG_CLASSES[arch]
    rope = dict(o.get("rope", {"rope_type": "default", "rope_theta": 1000000.0}))
    kw = dict(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=o.get("n_kv", 2), head_dim=o.get("head_dim", 16),
        max_position_embeddings=4096, rms_norm_eps=1e-6, tie_word_embeddings=o.get("tie", False),
        bos_token_id=None, eos_token_id=None, pad_token_id=0, attention_dropout=0.0,
    )
    if arch == "mistral":
        kw["sliding_window"] = o.get("sliding_window")
    if arch in ("qwen2", "qwen3"):
        kw["use_sliding_window"] = False
    if arch == "qwen2":
        kw.pop("head_dim")  # Qwen2 derives it from hidden_size / heads
    if transformers_major() >= 5:
        kw["rope_parameters"] = rope
    else:
        kw["rope_theta"] = rope.pop("rope_theta")
        if rope.get("rope_type", "default") != "default":
            kw["rope_scaling"] = rope
    cfg = getattr(transformers, cfg_name)(**kw)
    cfg._attn_implementation = "eager"
    return cfg


def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
    if model.config.tie_word_embeddings:
        model.tie_weights()


def build(name, arch, o, out_dir):
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    cfg = make_config(arch, o)
    _, model_cls = CONFIG_CLASSES[arch]
    model = getattr(transformers, model_cls)(cfg).to(torch.float32).eval()
    randomize(model, gen)
    n = o.get("prompt_len", 24)
    ids = torch.randint(3, VOCAB, (1, n), generator=gen)
    with torch.no_grad():
        logits = model(ids).logits[0].float()
        seq = ids.clone()
        greedy = []
        for _ in range(N_GREEDY):
            nxt = int(model(seq).logits[0, -1].argmax())
            greedy.append(nxt)
            seq = torch.cat([seq, torch.tensor([[nxt]])], dim=1)
    last = logits[-1]
    dst = os.path.join(out_dir, name)
    os.makedirs(dst, exist_ok=True)
    model.save_pretrained(dst, safe_serialization=True)
    for extra in ("generation_config.json",):
        p = os.path.join(dst, extra)
        if os.path.exists(p):
            os.remove(p)
    top2 = torch.topk(last, 2).values
    ref = {
        "name": name,
        "arch": arch,
        "generator": f"tools/make_fixtures/make_fixtures.py; transformers {transformers.__version__}, "
                     f"torch {torch.__version__}, float32, eager attention, CPU",
        "date": datetime.date.today().isoformat(),
        "seed": SEED,
        "tolerance_note": "float32 reference; compare last_logits by max abs diff (brisk: 1e-4)",
        "covers": {k: v for k, v in o.items() if k != "prompt_len"},
        "input_ids": ids[0].tolist(),
        "last_logits": last.tolist(),
        "argmax_per_position": logits.argmax(-1).tolist(),
        "top5_last": torch.topk(last, 5).indices.tolist(),
        "last_top2_margin": float(top2[0] - top2[1]),
        "greedy_continuation": greedy,
    }
    with open(os.path.join(dst, "ref.json"), "w") as f:
        json.dump(ref, f, indent=1)
    print(f"{name}: {sum(p.numel() for p in model.parameters())} params, prompt {n}, greedy {greedy[:8]}...")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    for name, arch, o in VARIANTS:
        if args.only and name not in args.only:
            continue
        build(name, arch, o, args.out)


if __name__ == "__main__":
    main()
