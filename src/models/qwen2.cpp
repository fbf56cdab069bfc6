// Qwen2 / Qwen2.5: dense decoder with q/k/v projection biases, usually tied embeddings.
// HF's sliding_window applies only when use_sliding_window is true.
#include "models/dense_decoder.h"

namespace brisk {

const ArchEntry& arch_qwen2() {
  static const ArchEntry e{
      .name = "qwen2",
      .hf_architectures = {"Qwen2ForCausalLM"},
      .hf_model_types = {"qwen2"},
      .gguf_names = {"qwen2"},
      .gguf_rope_neox = true,
      .sanitize = [](ModelConfig& cfg) {
        // transformers' Qwen2 default is use_sliding_window = false.
        if (!cfg.use_sliding_window) cfg.sliding_window = 0;
      },
      .build = [](const ModelConfig& cfg, WeightStore& ws) {
        return dense_decoder_build(cfg, ws, {.attention = {.qkv_bias = Need::required}});
      },
      .convert = {.arch = "qwen2"},
  };
  return e;
}

}  // namespace brisk
