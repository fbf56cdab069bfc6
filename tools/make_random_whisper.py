#!/usr/bin/env python3
"""Writes a random-weight Whisper checkpoint in the Hugging Face layout, with a small byte-level
BPE tokenizer whose special tokens follow Whisper's order (<|endoftext|>, <|startoftranscript|>,
language tokens, <|translate|>, <|transcribe|>, <|startoflm|>, <|startofprev|>, <|nospeech|>,
<|notimestamps|>, then the 1501 timestamps <|0.00|> .. <|30.00|>), generation_config.json (language
and task tokens, alignment heads, suppress lists, max_initial_timestamp_index) and
preprocessor_config.json. Plain Python (no numpy, no transformers): weights are float16 with random
signs, mantissas and exponents in a band set per tensor (magnitudes within a factor of 16 of the
tensor's scale), drawn in bulk from one seeded generator.

Used by the system tests (a tiny model that exercises timestamps, languages, words and every
output format) and by the benchmarks (sizes of a published checkpoint, e.g. --shape base: the
real-time factor at a fixed number of decoded tokens per window).

  tools/make_random_whisper.py OUT_DIR [--shape tiny-test|tiny|base|small|medium|large-v3|large-v3-turbo]
                               [--seed N] [--languages en,de,fr]
"""
import argparse
import json
import os
import struct

import math
import random

SHAPES = {
    # d_model, encoder layers, decoder layers, heads, mel bins, text tokens (merges beyond the bytes)
    "tiny-test": (64, 2, 2, 4, 80, 64),
    "tiny": (384, 4, 4, 6, 80, 50001),
    "base": (512, 6, 6, 8, 80, 50001),
    "small": (768, 12, 12, 12, 80, 50001),
    "medium": (1024, 24, 24, 16, 80, 50001),
    "large-v3": (1280, 32, 32, 20, 128, 50001),
    "large-v3-turbo": (1280, 32, 4, 20, 128, 50001),
}


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def tokenizer_json(n_merges, specials, timestamps):
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    merges = []
    # Common English pieces first, then arbitrary pairs of existing tokens.
    words = ["Ġt", "he", "Ġthe", "Ġa", "in", "er", "on", "Ġs", "Ġw", "re", "at", "en", "Ġo", "Ġb", "it", "nd",
             "Ġc", "Ġthe", "is", "Ġf", "or", "es", "Ġm", "Ġp", "ing", "an", "ou", "ed", "Ġin", "Ġto", "Ġand", "Ġof"]
    rng = random.Random(7)
    pieces = list(vocab.keys())
    while len(merges) < n_merges:
        if words:
            w = words.pop(0)
            if w in vocab:
                continue
            # split w into two known pieces
            for k in range(len(w) - 1, 0, -1):
                if w[:k] in vocab and w[k:] in vocab:
                    merges.append(w[:k] + " " + w[k:])
                    vocab[w] = len(vocab)
                    pieces.append(w)
                    break
            continue
        a, b = pieces[rng.randrange(len(pieces))], pieces[rng.randrange(len(pieces))]
        if a + b in vocab or len(a + b) > 8:
            continue
        merges.append(a + " " + b)
        vocab[a + b] = len(vocab)
        pieces.append(a + b)
    added = []
    nid = len(vocab)
    for s in specials + timestamps:
        added.append({"id": nid, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": s in specials})
        nid += 1
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "vocab": vocab, "merges": merges},
    }, len(vocab), nid


class Weights:
    """float16 tensors from one seeded generator, stored as safetensors."""

    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.tensors = {}

    def random(self, name, shape, scale):
        n = math.prod(shape)
        # High byte: sign, a 5-bit exponent in [e0 - 3, e0] (|value| in [scale / 16, scale)), 2 mantissa bits.
        e0 = max(4, min(29, 15 + int(math.floor(math.log2(scale))) - 1))
        table = bytes((b & 0x80) | ((e0 - ((b >> 2) & 3)) << 2) | (b & 3) for b in range(256))
        out = bytearray(2 * n)
        out[0::2] = self.rng.randbytes(n)
        out[1::2] = self.rng.randbytes(n).translate(table)
        self.tensors[name] = (list(shape), bytes(out))

    def values(self, name, values):
        self.tensors[name] = ([len(values)], struct.pack(f"<{len(values)}e", *values))

    def near_one(self, name, n):
        self.values(name, [1.0 + self.rng.gauss(0.0, 0.1) for _ in range(n)])

    def save(self, path):
        header, offset = {}, 0
        for name, (shape, blob) in self.tensors.items():
            header[name] = {"dtype": "F16", "shape": shape, "data_offsets": [offset, offset + len(blob)]}
            offset += len(blob)
        h = json.dumps(header).encode()
        h += b" " * ((8 - len(h) % 8) % 8)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(h)))
            f.write(h)
            for _, blob in self.tensors.values():
                f.write(blob)
        return sum(math.prod(shape) for shape, _ in self.tensors.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--shape", default="tiny-test", choices=sorted(SHAPES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--languages", default="en,de,fr,es")
    args = ap.parse_args()
    d, n_enc, n_dec, heads, n_mels, n_text = SHAPES[args.shape]
    langs = [l for l in args.languages.split(",") if l]
    specials = ["<|endoftext|>", "<|startoftranscript|>"] + [f"<|{l}|>" for l in langs] + [
        "<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>"]
    timestamps = [f"<|{i * 0.02:.2f}|>" for i in range(1501)]
    tok, n_bpe, n_vocab = tokenizer_json(max(0, n_text - 256), specials, timestamps)
    ids = {s: n_bpe + i for i, s in enumerate(specials)}
    eot, sot = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    no_ts = ids["<|notimestamps|>"]
    space = tok["model"]["vocab"]["Ġ"]
    os.makedirs(args.out, exist_ok=True)
    ffn = 4 * d
    config = {
        "architectures": ["WhisperForConditionalGeneration"], "model_type": "whisper", "activation_function": "gelu",
        "d_model": d, "encoder_layers": n_enc, "decoder_layers": n_dec, "encoder_attention_heads": heads,
        "decoder_attention_heads": heads, "encoder_ffn_dim": ffn, "decoder_ffn_dim": ffn, "num_hidden_layers": n_enc,
        "max_source_positions": 1500, "max_target_positions": 448, "num_mel_bins": n_mels, "vocab_size": n_vocab,
        "scale_embedding": False, "tie_word_embeddings": True, "bos_token_id": eot, "eos_token_id": eot,
        "pad_token_id": eot, "decoder_start_token_id": sot, "median_filter_width": 7, "torch_dtype": "float16",
    }
    gen = {
        "decoder_start_token_id": sot, "eos_token_id": eot, "pad_token_id": eot, "bos_token_id": eot,
        "no_timestamps_token_id": no_ts, "prev_sot_token_id": ids["<|startofprev|>"],
        "lang_to_id": {f"<|{l}|>": ids[f"<|{l}|>"] for l in langs},
        "task_to_id": {"translate": ids["<|translate|>"], "transcribe": ids["<|transcribe|>"]},
        "is_multilingual": len(langs) > 1, "max_initial_timestamp_index": 50, "max_length": 448,
        "alignment_heads": [[n_dec - 1, h] for h in range(min(2, heads))],
        "begin_suppress_tokens": [space, eot],
        "suppress_tokens": [1, 2, 7, 8, 9, ids["<|startoflm|>"], ids["<|startofprev|>"], ids["<|nospeech|>"]],
    }
    pre = {"chunk_length": 30, "feature_extractor_type": "WhisperFeatureExtractor", "feature_size": n_mels,
           "hop_length": 160, "n_fft": 400, "n_samples": 480000, "nb_max_frames": 3000, "padding_side": "right",
           "padding_value": 0.0, "processor_class": "WhisperProcessor", "return_attention_mask": False,
           "sampling_rate": 16000}
    for name, obj in [("config.json", config), ("generation_config.json", gen), ("preprocessor_config.json", pre),
                      ("tokenizer.json", tok)]:
        with open(os.path.join(args.out, name), "w") as f:
            json.dump(obj, f, ensure_ascii=False, indent=1)
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "WhisperTokenizer", "eos_token": "<|endoftext|>", "bos_token": "<|endoftext|>",
                   "unk_token": "<|endoftext|>", "model_max_length": 1024}, f)

    wt = Weights(args.seed)
    wt.random("model.encoder.conv1.weight", (d, n_mels, 3), 0.1)
    wt.random("model.encoder.conv1.bias", (d,), 0.1)
    wt.random("model.encoder.conv2.weight", (d, d, 3), 1.0 / math.sqrt(3 * d))
    wt.random("model.encoder.conv2.bias", (d,), 0.1)
    wt.random("model.encoder.embed_positions.weight", (1500, d), 0.1)
    for side, n_layers in [("encoder", n_enc), ("decoder", n_dec)]:
        for i in range(n_layers):
            p = f"model.{side}.layers.{i}."
            for a in ["self_attn"] + (["encoder_attn"] if side == "decoder" else []):
                for proj in ["q_proj", "k_proj", "v_proj", "out_proj"]:
                    wt.random(p + f"{a}.{proj}.weight", (d, d), 1.0 / math.sqrt(d))
                    if proj != "k_proj":
                        wt.random(p + f"{a}.{proj}.bias", (d,), 0.02)
                wt.near_one(p + f"{a}_layer_norm.weight", d)
                wt.random(p + f"{a}_layer_norm.bias", (d,), 0.02)
            wt.random(p + "fc1.weight", (ffn, d), 1.0 / math.sqrt(d))
            wt.random(p + "fc1.bias", (ffn,), 0.02)
            wt.random(p + "fc2.weight", (d, ffn), 1.0 / math.sqrt(ffn))
            wt.random(p + "fc2.bias", (d,), 0.02)
            wt.near_one(p + "final_layer_norm.weight", d)
            wt.random(p + "final_layer_norm.bias", (d,), 0.02)
        wt.near_one(f"model.{side}.layer_norm.weight", d)
        wt.random(f"model.{side}.layer_norm.bias", (d,), 0.02)
    wt.random("model.decoder.embed_tokens.weight", (n_vocab, d), 0.5)
    wt.random("model.decoder.embed_positions.weight", (448, d), 0.1)
    n_params = wt.save(os.path.join(args.out, "model.safetensors"))
    print(f"{args.out}: whisper {args.shape}, {n_params / 1e6:.1f} M parameters, vocabulary {n_vocab}, float16")


if __name__ == "__main__":
    main()
