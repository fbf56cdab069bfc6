#!/usr/bin/env python3
"""Whisper fixtures for brisk's speech decoding, made with transformers (run on the GPU machine,
where torch and transformers are installed; everything runs on the CPU in float32).

Writes tests/fixtures/models/<name>/ for two random-weight checkpoints, small enough to commit
(about 0.6 MB each):
  whisper_80bin       the 80-mel-bin layout (tiny .. medium, distil): 2 encoder and 2 decoder
                      layers, d_model 24, 3 heads, 1500 encoder positions, 64 decoder positions
  whisper_timestamps  the 128-bin layout (large-v3): 2 + 1 layers, d_model 24, 2 heads of 12
Each holds hf/ (save_pretrained: config.json, generation_config.json with language, task,
timestamp and suppress tokens and alignment heads, model.safetensors in float32,
preprocessor_config.json), input.wav (a seeded synthetic 2 s signal, 16 kHz 16-bit mono: the
samples the features were computed from, as int16 / 32768), features.f32 and ref.json:
  features.f32    the first n_head_frames log-mel frames of WhisperFeatureExtractor's 30 s window,
                  time-major ([n_head_frames][n_mels], brisk's layout), little-endian float32;
                  every later frame of the window equals features_tail (the padding's frame,
                  checked here), so the test rebuilds the [3000][n_mels] input exactly
  ref.json        n_mels, n_head_frames, features_tail [n_mels], and cases: per setting
                  decoder_prompt (the init tokens transformers used), generated (the ids
                  generate() appended after them, padding removed), timestamps, num_beams,
                  max_new_tokens. generate() runs its sequential windows over the 3000 frames
                  even here: after a window whose last segment is unfinished it decodes again
                  from the last timestamp pair. With timestamps, generated is every window's
                  segments' tokens; without, return_dict_in_generate gives the last window's
                  output (timestamp ids emitted after <|notimestamps|> also seek).
The vocabulary has no tokenizer: text ids 0..99, <|endoftext|> 100, <|startoftranscript|> 101,
<|en|> 102, <|de|> 103, <|translate|> 104, <|transcribe|> 105, <|startoflm|> 106,
<|startofprev|> 107, <|nospeech|> 108, <|notimestamps|> 109, timestamps 110 .. 1610 (0.00 .. 30.00).

  python3 tools/make_fixtures/make_whisper_fixtures.py [--out tests/fixtures/models]

Check the result with build/release/tests/brisk_tests --gtest_filter='Fixtures/WhisperOwnFixture*'.
"""
import argparse
import json
import math
import os
import wave

import numpy as np
import torch
import transformers
from transformers import GenerationConfig, WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration

N_TEXT = 100
EOT, SOT, EN, DE, TRANSLATE, TRANSCRIBE, SOLM, PREV, NOSPEECH, NOTS = range(N_TEXT, N_TEXT + 10)
TS0 = N_TEXT + 10
N_VOCAB = TS0 + 1501

SPECS = {
    "whisper_80bin": dict(seed=410, d_model=24, encoder_layers=2, decoder_layers=2, heads=3, ffn=48, mels=80, n_text_ctx=64),
    "whisper_timestamps": dict(seed=411, d_model=24, encoder_layers=2, decoder_layers=1, heads=2, ffn=48, mels=128, n_text_ctx=64),
}


def randomize(model, seed):
    """As the shared wave2 fixtures: matrices N(0, 0.08^2); norms 1 + N(0, 0.2^2); other vectors N(0, 0.1^2)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=g) * 0.08)
            elif "norm" in name:
                p.copy_(torch.ones(p.shape) * (1.0 if name.endswith("weight") else 0.0) + torch.randn(p.shape, generator=g) * 0.2)
            else:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)


def signal(seed):
    """2 s of a gliding tone with noise, rounded to 16-bit samples (what input.wav holds)."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(2.0 * 16000)) / 16000.0
    x = 0.3 * np.sin(2 * np.pi * (200 + 60 * np.sin(3 * t)) * t) + 0.05 * rng.standard_normal(t.shape)
    return np.clip(np.round(x * 32768.0), -32768, 32767).astype(np.int16)


def write_wav(path, pcm):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(pcm.astype("<i2").tobytes())


def make(name, spec, out_root):
    torch.manual_seed(spec["seed"])
    cfg = WhisperConfig(
        vocab_size=N_VOCAB, num_mel_bins=spec["mels"], d_model=spec["d_model"], encoder_layers=spec["encoder_layers"],
        decoder_layers=spec["decoder_layers"], encoder_attention_heads=spec["heads"],
        decoder_attention_heads=spec["heads"], encoder_ffn_dim=spec["ffn"], decoder_ffn_dim=spec["ffn"],
        max_source_positions=1500, max_target_positions=spec["n_text_ctx"], decoder_start_token_id=SOT,
        bos_token_id=EOT, eos_token_id=EOT, pad_token_id=EOT, begin_suppress_tokens=None, suppress_tokens=None,
        attn_implementation="eager")
    model = WhisperForConditionalGeneration(cfg).eval()
    randomize(model, spec["seed"])
    gen = GenerationConfig(
        decoder_start_token_id=SOT, eos_token_id=EOT, pad_token_id=EOT, bos_token_id=EOT,
        no_timestamps_token_id=NOTS, prev_sot_token_id=PREV, is_multilingual=True,
        lang_to_id={"<|en|>": EN, "<|de|>": DE}, task_to_id={"translate": TRANSLATE, "transcribe": TRANSCRIBE},
        max_initial_timestamp_index=50, alignment_heads=[[spec["decoder_layers"] - 1, h] for h in range(2)],
        suppress_tokens=[1, 2, 3, SOLM, PREV, NOSPEECH], begin_suppress_tokens=[20, EOT],
        max_length=spec["n_text_ctx"])
    model.generation_config = gen
    hf = os.path.join(out_root, name, "hf")
    os.makedirs(hf, exist_ok=True)
    model.save_pretrained(hf, safe_serialization=True)
    fe = WhisperFeatureExtractor(feature_size=spec["mels"])
    fe.save_pretrained(hf)
    pcm = signal(spec["seed"])
    write_wav(os.path.join(out_root, name, "input.wav"), pcm)
    samples = pcm.astype(np.float32) / 32768.0
    feats = fe(samples, sampling_rate=16000, return_tensors="pt").input_features  # [1, mels, 3000]
    frames = feats[0].T.contiguous()  # [3000, mels]
    # The frames past the signal (and its window's reach) are the padding's, all equal: keep the
    # head, store the tail frame once, and check that this rebuilds the window exactly.
    tail = frames[-1]
    n_head = frames.shape[0]
    while n_head > 0 and torch.equal(frames[n_head - 1], tail):
        n_head -= 1
    assert torch.equal(frames[n_head:], tail.expand(frames.shape[0] - n_head, -1))
    frames[:n_head].numpy().astype("<f4").tofile(os.path.join(out_root, name, "features.f32"))
    cases = []
    for case in [
        dict(name="greedy_timestamps", timestamps=True, num_beams=1, max_new_tokens=24),
        dict(name="greedy_no_timestamps", timestamps=False, num_beams=1, max_new_tokens=24),
        dict(name="beam5_timestamps", timestamps=True, num_beams=5, max_new_tokens=24),
        dict(name="beam5_no_timestamps", timestamps=False, num_beams=5, max_new_tokens=16),
    ]:
        with torch.no_grad():
            out = model.generate(feats, language="en", task="transcribe", return_timestamps=case["timestamps"],
                                 num_beams=case["num_beams"], max_new_tokens=case["max_new_tokens"], temperature=0.0,
                                 do_sample=False, return_dict_in_generate=True)
        if isinstance(out, dict):  # return_timestamps makes generate() return a plain dict
            seq = out["sequences"][0].tolist()
        else:
            seq = out.sequences[0].tolist() if hasattr(out, "sequences") else out[0].tolist()
        prompt = [SOT, EN, TRANSCRIBE] + ([] if case["timestamps"] else [NOTS])
        # Short-form outputs start with the init tokens (older versions) or not (newer): drop them when there.
        if seq[: len(prompt)] == prompt:
            seq = seq[len(prompt):]
        while len(seq) > 1 and seq[-1] == EOT and seq[-2] == EOT:
            seq.pop()  # padding after the end-of-text
        case = dict(case, decoder_prompt=prompt, generated=seq)
        cases.append(case)
        print(name, case["name"], seq)
    ref = {
        "generator": f"transformers {transformers.__version__}, torch {torch.__version__}, float32, eager attention, CPU",
        "seed": spec["seed"],
        "n_mels": spec["mels"],
        "n_head_frames": int(n_head),
        "features_tail": tail.tolist(),
        "cases": cases,
    }
    with open(os.path.join(out_root, name, "ref.json"), "w") as f:
        json.dump(ref, f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures", "models"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    for name, spec in SPECS.items():
        make(name, spec, os.path.abspath(args.out))


if __name__ == "__main__":
    main()
