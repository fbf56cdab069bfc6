"""A tiny Hugging Face Llama checkpoint written from scratch (no shared data, no numpy), for the
CLI tests: config.json, a byte-level BPE tokenizer.json (256 byte tokens, a few merges and two
special tokens, <|im_start|> and <|im_end|>), tokenizer_config.json, a ChatML chat_template.jinja
and float32 random weights in model.safetensors.

The embedding and output have `n_vocab` rows (default 384) for the tokenizer's 264 tokens, as real
Qwen checkpoints pad 151,665 tokens to 151,936 rows. With `padding_wins` the output rows past the
tokenizer are 20 times larger than the others, so that a sampler that does not mask them picks
one at nearly every step.

    python3 tiny_hf.py OUT_DIR     writes the folder (for trying it by hand)
"""
import json
import os
import random
import struct
import sys

MERGES = [("Ġ", "t"), ("h", "e"), ("i", "n"), ("e", "r"), ("a", "n"), ("o", "n")]
N_TOKENS = 256 + len(MERGES) + 2  # bytes, merges, <|im_start|>, <|im_end|>
IM_START, IM_END = N_TOKENS - 2, N_TOKENS - 1

CHATML = ("{%- for message in messages %}"
          "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
          "{%- endfor %}"
          "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")


def byte_symbols():
    """GPT-2's byte -> printable character map (the ByteLevel pre-tokenizer's alphabet)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars = keep[:]
    n = 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(keep, chars)}


def tokenizer_json():
    sym = byte_symbols()
    vocab = {sym[b]: b for b in range(256)}
    for i, (a, b) in enumerate(MERGES):
        vocab[a + b] = 256 + i
    special = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [dict(id=IM_START, content="<|im_start|>", **special),
                         dict(id=IM_END, content="<|im_end|>", **special)],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": vocab, "merges": [a + " " + b for a, b in MERGES]},
    }


def write_safetensors(path, tensors):
    """tensors: list of (name, shape, list of floats)."""
    header, blobs, offset = {}, [], 0
    for name, shape, values in tensors:
        blob = struct.pack("<%df" % len(values), *values)
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for b in blobs:
            f.write(b)


def write(out_dir, n_vocab=384, padding_wins=True, seed=7, max_positions=512, chat_template=True):
    os.makedirs(out_dir, exist_ok=True)
    n_embd, n_ff, n_layer, n_head, n_head_kv = 32, 64, 2, 4, 2
    head_dim = n_embd // n_head
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": n_embd,
        "intermediate_size": n_ff, "num_hidden_layers": n_layer, "num_attention_heads": n_head,
        "num_key_value_heads": n_head_kv, "head_dim": head_dim, "max_position_embeddings": max_positions,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "vocab_size": n_vocab, "tie_word_embeddings": False,
        "hidden_act": "silu", "bos_token_id": None, "eos_token_id": IM_END, "torch_dtype": "float32",
    }
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    with open(os.path.join(out_dir, "tokenizer.json"), "w") as f:
        json.dump(tokenizer_json(), f, ensure_ascii=False)
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"eos_token": "<|im_end|>", "bos_token": None, "add_bos_token": False,
                   "model_max_length": max_positions}, f)
    if chat_template:
        with open(os.path.join(out_dir, "chat_template.jinja"), "w") as f:
            f.write(CHATML)

    rnd = random.Random(seed)

    def mat(rows, cols, scale=0.3):
        return [rnd.uniform(-scale, scale) for _ in range(rows * cols)]

    tensors = [("model.embed_tokens.weight", (n_vocab, n_embd), mat(n_vocab, n_embd))]
    for i in range(n_layer):
        p = "model.layers.%d." % i
        tensors += [
            (p + "input_layernorm.weight", (n_embd,), [1.0] * n_embd),
            (p + "self_attn.q_proj.weight", (n_head * head_dim, n_embd), mat(n_head * head_dim, n_embd)),
            (p + "self_attn.k_proj.weight", (n_head_kv * head_dim, n_embd), mat(n_head_kv * head_dim, n_embd)),
            (p + "self_attn.v_proj.weight", (n_head_kv * head_dim, n_embd), mat(n_head_kv * head_dim, n_embd)),
            (p + "self_attn.o_proj.weight", (n_embd, n_head * head_dim), mat(n_embd, n_head * head_dim)),
            (p + "post_attention_layernorm.weight", (n_embd,), [1.0] * n_embd),
            (p + "mlp.gate_proj.weight", (n_ff, n_embd), mat(n_ff, n_embd)),
            (p + "mlp.up_proj.weight", (n_ff, n_embd), mat(n_ff, n_embd)),
            (p + "mlp.down_proj.weight", (n_embd, n_ff), mat(n_embd, n_ff)),
        ]
    head = mat(N_TOKENS, n_embd, 0.05) + mat(n_vocab - N_TOKENS, n_embd, 1.0 if padding_wins else 0.05)
    tensors += [("model.norm.weight", (n_embd,), [1.0] * n_embd), ("lm_head.weight", (n_vocab, n_embd), head)]
    write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors)
    return out_dir


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: tiny_hf.py OUT_DIR")
    print(write(sys.argv[1]))
