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

The hybrid variants (Qwen3.5 dense / MoE, Qwen3-Next: Gated DeltaNet linear attention mixed with
gated full attention) each cover a layout the shared wave-2 fixtures do not: another layer_types
order, three value heads per key head, head sizes that are not powers of two, a prompt longer than
one delta-rule chunk (64 tokens), the conditional-generation checkpoint form (text_config,
model.language_model.* names) with an MTP head (random mtp.* tensors that transformers ignores),
and a Qwen3-Next config given by full_attention_interval alone with a dense mlp_only layer.

Usage: python3 make_fixtures.py --out tests/fixtures/models [--only NAME ...]
(Gemma 4 variants: --only gemma4_window_kvshare gemma4_keqv_moe gemma4_ple_moe_wide)
Needs torch and transformers >= 5.17 for the hybrids and Gemma 4 (the H200 machine has both).
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

# Hybrid variants: name, architecture, overrides (see build_hybrid).
HYBRID_VARIANTS = [
    ("qwen3_5_grouped_heads", "qwen3_5", dict(
        seed=4242, layers=["linear_attention", "full_attention", "linear_attention", "linear_attention",
                           "full_attention"],
        heads=3, n_kv=1, head_dim=48, partial=0.5, theta=1000000.0, tie=True,
        lin_k=2, lin_v=6, lin_kd=24, lin_vd=20, conv=3, inter=96, prompt_len=90)),
    ("qwen3_5_moe_text_config_mtp", "qwen3_5_moe", dict(
        seed=4243, layers=["full_attention", "linear_attention", "linear_attention"],
        heads=2, n_kv=2, head_dim=40, partial=0.25, theta=10000000.0, tie=False,
        lin_k=1, lin_v=3, lin_kd=12, lin_vd=36, conv=4, inter=64,
        experts=5, top_k=2, moe_inter=20, shared=28, prompt_len=70, wrap_conditional=True, mtp=True)),
    ("qwen3_next_mlp_only", "qwen3_next", dict(
        seed=4244, layers=["linear_attention", "full_attention", "linear_attention", "full_attention"],
        heads=4, n_kv=2, head_dim=16, partial=0.25, theta=5000000.0, tie=False,
        lin_k=2, lin_v=4, lin_kd=16, lin_vd=8, conv=4, inter=48,
        experts=4, top_k=2, moe_inter=16, shared=24, norm_topk=False, mlp_only=[2], interval_only=2,
        prompt_len=40)),
]

HYBRID_CLASSES = {
    "qwen3_5": ("Qwen3_5TextConfig", "Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration", "qwen3_5"),
    "qwen3_5_moe": ("Qwen3_5MoeTextConfig", "Qwen3_5MoeForCausalLM", "Qwen3_5MoeForConditionalGeneration",
                    "qwen3_5_moe"),
    "qwen3_next": ("Qwen3NextConfig", "Qwen3NextForCausalLM", None, None),
}

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


def greedy_reference(model, ids):
    """Logits of every prompt position and N_GREEDY ids by plain argmax, each from a full forward
    over the prompt and the ids so far (no KV cache)."""
    with torch.no_grad():
        logits = model(ids).logits[0].float()
        seq = ids.clone()
        greedy = []
        for _ in range(N_GREEDY):
            nxt = int(model(seq).logits[0, -1].argmax())
            greedy.append(nxt)
            seq = torch.cat([seq, torch.tensor([[nxt]])], dim=1)
    return logits, greedy


def save_fixture(model, dst, fields, ids, logits, greedy):
    """save_pretrained into dst (without generation_config.json) and ref.json: provenance
    `fields` plus the references."""
    os.makedirs(dst, exist_ok=True)
    model.save_pretrained(dst, safe_serialization=True)
    for extra in ("generation_config.json",):
        p = os.path.join(dst, extra)
        if os.path.exists(p):
            os.remove(p)
    last = logits[-1]
    top2 = torch.topk(last, 2).values
    ref = dict(fields)
    ref.update({
        "generator": f"tools/make_fixtures/make_fixtures.py; transformers {transformers.__version__}, "
                     f"torch {torch.__version__}, float32, eager attention, CPU",
        "date": datetime.date.today().isoformat(),
        "tolerance_note": "float32 reference; compare last_logits by max abs diff (brisk: 1e-4)",
        "input_ids": ids[0].tolist(),
        "last_logits": last.tolist(),
        "argmax_per_position": logits.argmax(-1).tolist(),
        "top5_last": torch.topk(last, 5).indices.tolist(),
        "last_top2_margin": float(top2[0] - top2[1]),
        "greedy_continuation": greedy,
    })
    with open(os.path.join(dst, "ref.json"), "w") as f:
        json.dump(ref, f, indent=1)


def build(name, arch, o, out_dir):
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    cfg = make_config(arch, o)
    _, model_cls = CONFIG_CLASSES[arch]
    model = getattr(transformers, model_cls)(cfg).to(torch.float32).eval()
    randomize(model, gen)
    n = o.get("prompt_len", 24)
    ids = torch.randint(3, VOCAB, (1, n), generator=gen)
    logits, greedy = greedy_reference(model, ids)
    save_fixture(model, os.path.join(out_dir, name),
                 {"name": name, "arch": arch, "seed": SEED, "covers": {k: v for k, v in o.items() if k != "prompt_len"}},
                 ids, logits, greedy)
    print(f"{name}: {sum(p.numel() for p in model.parameters())} params, prompt {n}, greedy {greedy[:8]}...")


# Gemma 4 (text): other seeds and shapes than the shared wave-2 fixtures. Each covers a window
# smaller than its 40-token prompt; between them: KV sharing of both layer kinds (several shared
# layers), per-layer embeddings, double-wide MLPs, K = V full layers with their own KV heads, an
# MoE block, another proportional-rope fraction, an untied LM head. transformers writes these
# configs in its per_layer_config form.
GEMMA4_VARIANTS = [
    ("gemma4_window_kvshare", dict(
        seed=1301, layers=["sliding_attention", "sliding_attention", "full_attention"] * 2, window=8,
        n_kv=2, head_dim=16, global_head_dim=32, kv_shared=3, ple=8, double_wide=True, tie=True)),
    ("gemma4_keqv_moe", dict(
        seed=1302, layers=["sliding_attention", "full_attention"] * 2, window=16, n_kv=4, head_dim=16,
        global_head_dim=32, k_eq_v=True, global_kv=1, experts=(4, 2, 32), full_rotary=0.5,
        swa_theta=50000.0, tie=False)),
    ("gemma4_ple_moe_wide", dict(
        seed=1303, layers=["sliding_attention", "sliding_attention", "full_attention"] * 2, window=12, n_kv=2,
        head_dim=16, global_head_dim=64, k_eq_v=True, global_kv=2, kv_shared=2, ple=16, double_wide=True,
        experts=(6, 3, 24), tie=True)),
]


def gemma4_config(o):
    kw = dict(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=96, num_hidden_layers=len(o["layers"]),
        num_attention_heads=HEADS, num_key_value_heads=o["n_kv"], head_dim=o["head_dim"],
        global_head_dim=o["global_head_dim"], num_global_key_value_heads=o.get("global_kv"),
        attention_k_eq_v=o.get("k_eq_v", False), layer_types=o["layers"], sliding_window=o["window"],
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": o.get("swa_theta", 10000.0)},
            "full_attention": {"rope_type": "proportional", "rope_theta": 1000000.0,
                               "partial_rotary_factor": o.get("full_rotary", 0.25)},
        },
        final_logit_softcapping=30.0, hidden_size_per_layer_input=o.get("ple", 0), vocab_size_per_layer_input=VOCAB,
        num_kv_shared_layers=o.get("kv_shared", 0), use_double_wide_mlp=o.get("double_wide", False),
        enable_moe_block="experts" in o, max_position_embeddings=4096, rms_norm_eps=1e-6,
        tie_word_embeddings=o["tie"], bos_token_id=None, eos_token_id=None, pad_token_id=0,
        hidden_activation="gelu_pytorch_tanh",
    )
    if "experts" in o:
        kw["num_experts"], kw["top_k_experts"], kw["moe_intermediate_size"] = o["experts"]
    cfg = transformers.Gemma4TextConfig(**kw)
    cfg._attn_implementation = "eager"
    return cfg


def gemma4_randomize(model, gen):
    """Matrices N(0, 0.1); norm gains, router scales and per-expert scales 1 + N(0, 0.1) (so that
    routing is not a near tie); each layer's output scale U[0.5, 1.5]."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
        for name, b in model.named_buffers():
            if name.endswith("layer_scalar"):
                b.copy_(0.5 + torch.rand(b.shape, generator=gen))
    if model.config.tie_word_embeddings:
        model.tie_weights()


def build_gemma4(name, o, out_dir):
    seed = o["seed"]
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = transformers.Gemma4ForCausalLM(gemma4_config(o)).to(torch.float32).eval()
    gemma4_randomize(model, gen)
    n = 40
    ids = torch.randint(3, VOCAB, (1, n), generator=gen)
    logits, greedy = greedy_reference(model, ids)
    with torch.no_grad():
        cached = model.generate(ids, max_new_tokens=N_GREEDY, do_sample=False)[0, n:].tolist()
    dst = os.path.join(out_dir, name)
    fields = {"name": name, "arch": "gemma4_text", "seed": seed, "covers": {k: v for k, v in o.items() if k != "seed"},
              "generate_agrees": cached == greedy}
    save_fixture(model, dst, fields, ids, logits, greedy)
    reloaded = transformers.Gemma4ForCausalLM.from_pretrained(dst, attn_implementation="eager").eval()
    with torch.no_grad():
        reload_diff = float((reloaded(ids).logits[0, -1] - logits[-1]).abs().max())
    with open(os.path.join(dst, "ref.json")) as f:
        ref = json.load(f)
    ref["reload_max_abs_diff"] = reload_diff
    with open(os.path.join(dst, "ref.json"), "w") as f:
        json.dump(ref, f, indent=1)
    print(f"{name}: {sum(p.numel() for p in model.parameters())} params, prompt {n}, greedy {greedy[:8]}..., "
          f"generate agrees {cached == greedy}, reload diff {reload_diff}")


def hybrid_config(arch, o):
    cfg_name = HYBRID_CLASSES[arch][0]
    kw = dict(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=o["inter"], num_hidden_layers=len(o["layers"]),
        num_attention_heads=o["heads"], num_key_value_heads=o["n_kv"], head_dim=o["head_dim"],
        max_position_embeddings=4096, rms_norm_eps=1e-6, tie_word_embeddings=o["tie"],
        bos_token_id=None, eos_token_id=2, pad_token_id=0, attention_dropout=0.0, hidden_act="silu",
        layer_types=list(o["layers"]), linear_conv_kernel_dim=o["conv"], linear_key_head_dim=o["lin_kd"],
        linear_value_head_dim=o["lin_vd"], linear_num_key_heads=o["lin_k"], linear_num_value_heads=o["lin_v"],
        rope_parameters={"rope_type": "default", "rope_theta": o["theta"], "partial_rotary_factor": o["partial"]},
    )
    if "experts" in o:
        kw.update(num_experts=o["experts"], num_experts_per_tok=o["top_k"], moe_intermediate_size=o["moe_inter"],
                  shared_expert_intermediate_size=o["shared"])
    if arch == "qwen3_next":
        kw.update(norm_topk_prob=o.get("norm_topk", True), mlp_only_layers=o.get("mlp_only", []),
                  decoder_sparse_step=1, full_attention_interval=o.get("interval_only", 4))
    cfg = getattr(transformers, cfg_name)(**kw)
    cfg._attn_implementation = "eager"
    return cfg


def randomize_hybrid(model, gen):
    """The shared wave-2 scheme: matrices N(0, 0.08^2), norm weights their initial value (0 for the
    (1 + w) RMSNorms, 1 for the gated norm) plus N(0, 0.2^2), other vectors (A_log, dt_bias) N(0, 0.1^2)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.copy_(0.08 * torch.randn(p.shape, generator=gen))
            elif "norm" in name:
                p.add_(0.2 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
    if model.config.tie_word_embeddings:
        model.tie_weights()


def add_mtp(dst, cfg, gen, prefix):
    """Random mtp.* tensors (one block shaped like a full-attention layer of this model, fc and its
    norms): the layout of published checkpoints; transformers does not load them."""
    from safetensors.torch import load_file, save_file
    path = os.path.join(dst, "model.safetensors")
    tensors = load_file(path)
    h, hd = cfg.hidden_size, cfg.head_dim
    shapes = {
        "mtp.fc.weight": (h, 2 * h), "mtp.pre_fc_norm_embedding.weight": (h,), "mtp.pre_fc_norm_hidden.weight": (h,),
        "mtp.norm.weight": (h,), "mtp.layers.0.input_layernorm.weight": (h,),
        "mtp.layers.0.post_attention_layernorm.weight": (h,),
        "mtp.layers.0.self_attn.q_proj.weight": (2 * cfg.num_attention_heads * hd, h),
        "mtp.layers.0.self_attn.k_proj.weight": (cfg.num_key_value_heads * hd, h),
        "mtp.layers.0.self_attn.v_proj.weight": (cfg.num_key_value_heads * hd, h),
        "mtp.layers.0.self_attn.o_proj.weight": (h, cfg.num_attention_heads * hd),
        "mtp.layers.0.self_attn.q_norm.weight": (hd,), "mtp.layers.0.self_attn.k_norm.weight": (hd,),
    }
    if getattr(cfg, "num_experts", 0):
        ff, sh = cfg.moe_intermediate_size, cfg.shared_expert_intermediate_size
        shapes["mtp.layers.0.mlp.gate.weight"] = (cfg.num_experts, h)
        for e in range(cfg.num_experts):
            for k, shape in (("gate_proj", (ff, h)), ("up_proj", (ff, h)), ("down_proj", (h, ff))):
                shapes[f"mtp.layers.0.mlp.experts.{e}.{k}.weight"] = shape
        for k, shape in (("gate_proj", (sh, h)), ("up_proj", (sh, h)), ("down_proj", (h, sh))):
            shapes[f"mtp.layers.0.mlp.shared_expert.{k}.weight"] = shape
        shapes["mtp.layers.0.mlp.shared_expert_gate.weight"] = (1, h)
    else:
        for k, shape in (("gate_proj", (cfg.intermediate_size, h)), ("up_proj", (cfg.intermediate_size, h)),
                         ("down_proj", (h, cfg.intermediate_size))):
            shapes[f"mtp.layers.0.mlp.{k}.weight"] = shape
    for name, shape in shapes.items():
        tensors[name] = 0.08 * torch.randn(shape, generator=gen)
    if prefix:
        tensors = {(prefix + k[len("model."):] if k.startswith("model.") else k): v for k, v in tensors.items()}
    save_file({k: v.contiguous() for k, v in tensors.items()}, path, metadata={"format": "pt"})


def build_hybrid(name, arch, o, out_dir):
    seed = o["seed"]
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    cfg = hybrid_config(arch, o)
    model = getattr(transformers, HYBRID_CLASSES[arch][1])(cfg).to(torch.float32).eval()
    randomize_hybrid(model, gen)
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
        cached = model.generate(ids, max_new_tokens=N_GREEDY, do_sample=False, eos_token_id=None,
                                pad_token_id=0)[0, n:].tolist()
    dst = os.path.join(out_dir, name)
    os.makedirs(dst, exist_ok=True)
    model.save_pretrained(dst, safe_serialization=True)
    for extra in ("generation_config.json",):
        p = os.path.join(dst, extra)
        if os.path.exists(p):
            os.remove(p)
    cfg_path = os.path.join(dst, "config.json")
    with open(cfg_path) as f:
        saved = json.load(f)
    if o.get("interval_only"):
        saved.pop("layer_types", None)  # the pattern from full_attention_interval alone
    if o.get("mtp"):
        saved["mtp_num_hidden_layers"] = 1
        add_mtp(dst, cfg, gen, "model.language_model." if o.get("wrap_conditional") else "")
    if o.get("wrap_conditional"):
        _, _, cond_cls, cond_type = HYBRID_CLASSES[arch]
        saved = {"architectures": [cond_cls], "model_type": cond_type, "tie_word_embeddings": saved["tie_word_embeddings"],
                 "text_config": saved}
        if not o.get("mtp"):
            from safetensors.torch import load_file, save_file
            path = os.path.join(dst, "model.safetensors")
            t = load_file(path)
            save_file({("model.language_model." + k[len("model."):] if k.startswith("model.") else k): v
                       for k, v in t.items()}, path, metadata={"format": "pt"})
    with open(cfg_path, "w") as f:
        json.dump(saved, f, indent=2)
    top2 = torch.topk(logits[-1], 2).values
    ref = {
        "name": name,
        "arch": arch,
        "generator": f"tools/make_fixtures/make_fixtures.py; transformers {transformers.__version__}, "
                     f"torch {torch.__version__}, float32, eager attention, CPU",
        "date": datetime.date.today().isoformat(),
        "seed": seed,
        "tolerance_note": "float32 reference; compare last_logits by max abs diff (brisk: 1e-4)",
        "covers": {k: v for k, v in o.items() if k not in ("prompt_len", "seed")},
        "input_ids": ids[0].tolist(),
        "last_logits": logits[-1].tolist(),
        "argmax_per_position": logits.argmax(-1).tolist(),
        "top5_last": torch.topk(logits[-1], 5).indices.tolist(),
        "last_top2_margin": float(top2[0] - top2[1]),
        "greedy_continuation": greedy,
        "generate_agrees": cached == greedy,
    }
    with open(os.path.join(dst, "ref.json"), "w") as f:
        json.dump(ref, f, indent=1)
    print(f"{name}: {sum(p.numel() for p in model.parameters())} params, prompt {n}, greedy {greedy[:8]}..., "
          f"generate agrees: {cached == greedy}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--hybrid", action="store_true", help="only the hybrid (Gated DeltaNet) variants")
    args = ap.parse_args()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    for name, arch, o in [] if args.hybrid else VARIANTS:
        if args.only and name not in args.only:
            continue
        build(name, arch, o, args.out)
    for name, o in [] if args.hybrid else GEMMA4_VARIANTS:
        if args.only and name not in args.only:
            continue
        build_gemma4(name, o, args.out)
    for name, arch, o in HYBRID_VARIANTS:
        if args.only and name not in args.only:
            continue
        build_hybrid(name, arch, o, args.out)


if __name__ == "__main__":
    main()
