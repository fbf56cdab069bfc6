// Writes a GGUF of a Llama-family architecture with random weights: for speed measurements at
// real sizes (e.g. the Qwen2.5-0.5B shape) and for tests that need a model without shared
// fixtures. Weights are uniform with std 1/sqrt(n_in), norms are 1, biases small; matrices
// are stored in `type` (quantized with the reference quantizer), vectors in F32.
#pragma once
#include <cstdint>
#include <string>

#include "quant/types.h"

namespace brisk {

struct RandomModelParams {
  std::string arch = "qwen2";     // llama | qwen2 | qwen3
  int32_t n_vocab = 1024;
  int32_t n_embd = 64;
  int32_t n_layer = 2;
  int32_t n_head = 4;
  int32_t n_head_kv = 2;
  int32_t head_dim = 16;
  int32_t n_ff = 128;
  int32_t n_ctx_train = 4096;
  float rope_theta = 1000000.0f;
  bool tie_embeddings = true;
  QuantType type = QuantType::F32;
  uint64_t seed = 1;
};

// Known shapes by name: "tiny", "qwen2.5-0.5b". Throws for an unknown name.
RandomModelParams random_model_preset(const std::string& name);
void random_model_write(const RandomModelParams& p, const std::string& path);

}  // namespace brisk
