// Qwen3: dense decoder with per-head RMS norm on q and k (before rope), an explicit head_dim
// (q width may differ from hidden size) and no biases.
#include "models/dense_decoder.h"

namespace brisk {

const ArchEntry& arch_qwen3() {
  static const ArchEntry e{
      .name = "qwen3",
      .hf_architectures = {"Qwen3ForCausalLM", "Qwen3Model"},
      .hf_model_types = {"qwen3"},
      .gguf_names = {"qwen3"},
      .gguf_rope_neox = true,
      .sanitize = [](ModelConfig& cfg) {
        if (!cfg.use_sliding_window) cfg.sliding_window = 0;
      },
      .build = [](const ModelConfig& cfg, WeightStore& ws) {
        return dense_decoder_build(cfg, ws, {.attention = {.qk_norm = Need::required}});
      },
      .convert = {.arch = "qwen3"},
  };
  return e;
}

}  // namespace brisk
