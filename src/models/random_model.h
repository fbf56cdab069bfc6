// GGUF models of a Llama-family architecture (or Gemma 4) with random weights, written to a
// file or built in memory: for speed measurements at real sizes (`brisk make-random-model`,
// `brisk bench`, `brisk cuda-bench`) and for tests that need a model without shared fixtures.
// Weights are uniform with std 1/sqrt(n_in), norms are 1, biases small; matrices are stored in
// `type` (quantized with the reference quantizer), or with the per-tensor types of a llama.cpp
// recipe (`recipe`, e.g. "Q4_K_M"), vectors and MoE routers in F32. A real tokenizer can be
// embedded from a tokenizer.json folder. Rows are generated in parallel; each row's values
// depend only on the seed, the tensor and the row, so files are reproducible. The shapes of
// real models are one table (random_model_preset), the one place a new family's benchmark
// shape goes.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "quant/types.h"

namespace brisk {

class MappedFile;

struct RandomModelParams {
  std::string arch = "qwen2";     // llama | qwen2 | qwen3 | qwen3moe | qwen35 | qwen35moe | gemma4 | whisper | bert |
                                  // nomic-bert | modern-bert
  int32_t n_vocab = 1024;
  int32_t n_embd = 64;
  int32_t n_layer = 2;
  int32_t n_head = 4;
  int32_t n_head_kv = 2;
  int32_t head_dim = 16;
  int32_t n_ff = 128;
  int32_t n_expert = 0;           // qwen3moe, qwen35moe, gemma4: experts per layer, chosen per token, their MLP size
  int32_t n_expert_used = 0;
  int32_t n_ff_exp = 0;
  int32_t n_ctx_train = 4096;
  float rope_theta = 1000000.0f;
  bool tie_embeddings = true;
  QuantType type = QuantType::F32;
  uint64_t seed = 1;
  int32_t n_ff_shexp = 0;        // qwen35moe: the shared expert's MLP size
  // Hybrid linear attention (qwen35, qwen35moe): every full_attention_interval-th layer is full
  // (gated) attention, the others Gated DeltaNet layers of these sizes.
  int32_t full_attention_interval = 4;
  int32_t linear_n_k_head = 0;
  int32_t linear_n_v_head = 0;
  int32_t linear_k_head_dim = 0;
  int32_t linear_v_head_dim = 0;
  int32_t linear_conv_kernel = 4;
  float partial_rotary = 1.0f;   // rotated fraction of head_dim
  std::string recipe{};          // "": every matrix in `type`; else a recipe name ("Q4_K_M")
  std::string tokenizer_dir{};   // "": no tokenizer; else a folder with tokenizer.json
  std::string tokenizer_pre{};   // tokenizer.ggml.pre ("" picks by arch: qwen2 / llama-bpe)
  int32_t n_threads = 0;         // 0: all cores
  // 0: every row of a matrix drawn; N > 0: each matrix repeats its first N rows (benchmark
  // models at real sizes in seconds: the values do not matter there, the bytes do).
  int32_t distinct_rows = 0;
  // Gemma 4 (arch "gemma4"; n_expert above: an MoE block beside every MLP); llama.cpp's gemma4
  // names and keys.
  int32_t sliding_window = 0;    // window of the sliding layers (modern-bert: local_attention, +-half)
  int32_t full_every = 0;        // every full_every-th layer attends to all positions (0: every layer;
                                 // modern-bert: layers 0, full_every, ...)
  int32_t head_dim_full = 0;     // head size of the full layers (0: head_dim)
  int32_t n_head_kv_full = 0;    // > 0: the full layers' KV heads; their values are their keys (no attn_v)
  int32_t n_kv_shared_layers = 0;  // the last layers read an earlier layer's cache
  int32_t n_embd_per_layer = 0;  // per-layer embeddings (0: none)
  bool double_wide_mlp = false;  // KV-shared layers' MLPs are 2 * n_ff
  float final_softcap = 0.0f;
  int32_t n_cls_out = 0;         // bert: a classification head of this many outputs (cross-encoders)
  int32_t pooling_type = -1;     // decoders: {arch}.pooling_type (llama.cpp's: 1 mean, 3 last; -1 none)
  // Whisper (arch "whisper", the names and keys of brisk quantize's Whisper GGUF): n_layer,
  // n_head, n_ff and n_ctx_train are the decoder's (head_dim = n_embd / n_head), these the
  // encoder's; every linear layer has its biases (k_proj excepted), LayerNorms have both.
  int32_t n_enc_layer = 0;
  int32_t n_enc_head = 0;
  int32_t n_enc_ff = 0;
  int32_t n_enc_ctx = 1500;      // encoder positions per window (2 x as many mel frames)
  int32_t n_mels = 80;
};

// Known shapes by name: "tiny", "bert-tiny", "bert-tiny-rerank", "bge-small", "bge-m3" (encoders,
// arch "bert"),
// "qwen2.5-0.5b", "qwen3-0.6b", "qwen3-1.7b", "qwen3-8b",
// "llama-3.2-1b", "llama-3.1-8b", "qwen3-30b-a3b", "tiny-hybrid", "qwen3.5-0.8b",
// "qwen3.5-2b", "qwen3.5-27b", "qwen3.6-35b-a3b", "gemma4-e2b", "gemma4-e4b", "gemma4-31b",
// "gemma4-26b-a4b" (the published configs), "gemma4-tiny" (every Gemma 4 feature at toy size),
// "whisper-tiny", "whisper-base", "whisper-small", "whisper-large-v3", "whisper-large-v3-turbo"
// (the published configs), "whisper-toy" (two layers of 64 at the real window).
// Throws for an unknown name, listing the known ones.
RandomModelParams random_model_preset(const std::string& name);
std::vector<std::string> random_model_shapes();
void random_model_write(const RandomModelParams& p, const std::string& path);
// The same GGUF bytes in memory (gguf::File::parse reads them; runtime/engine_parts.h loads
// them as a Model).
std::shared_ptr<const MappedFile> random_model_gguf(const RandomModelParams& p);

}  // namespace brisk
