// Rotary embedding frequencies with the scaling variants of Hugging Face `rope_type`
// (default, linear, llama3, yarn, proportional), partial rotary (n_rot < head_dim), and GGUF
// per-pair frequency factors (llama.cpp writes llama3 scaling and Gemma 4's proportional rope
// as a `rope_freqs.weight` tensor).
#pragma once
#include <string>
#include <vector>

#include "backend/backend.h"

namespace brisk {

struct RopeScaling {
  std::string type = "default";      // default | linear | llama3 | yarn | proportional
  float factor = 1.0f;
  int32_t original_ctx = 0;           // original_max_position_embeddings (0: n_ctx_train)
  float low_freq_factor = 1.0f;       // llama3
  float high_freq_factor = 4.0f;      // llama3
  float beta_fast = 32.0f;            // yarn
  float beta_slow = 1.0f;             // yarn
  float attention_factor = 0.0f;      // yarn; 0: derived from factor (and mscale)
  float mscale = 0.0f;                // yarn (DeepSeek style); 0: unset
  float mscale_all_dim = 0.0f;
};

struct RopeBuildParams {
  int32_t n_rot = 0;                  // rotated dims per head (even)
  float theta = 10000.0f;             // base
  int32_t n_ctx_train = 0;
  RopeScaling scaling{};
  std::vector<float> freq_factors{};  // [n_rot/2] divisors of inv_freq (GGUF rope_freqs) or empty
  bool neox = false;
  float proportion = 1.0f;            // "proportional": fraction of the pairs that rotate
};

// Throws brisk::Error for an unknown scaling type or inconsistent sizes.
RopeTable rope_table_build(const RopeBuildParams& p);

}  // namespace brisk
