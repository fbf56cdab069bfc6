// Mistral: the Llama layout with sliding-window attention when config.sliding_window is set
// (every layer). GGUF q/k rows are permuted by the converter like Llama's.
#include "models/dense_decoder.h"

namespace brisk {

const ArchEntry& arch_mistral() {
  static const ArchEntry e{
      .name = "mistral",
      .hf_architectures = {"MistralForCausalLM"},
      .hf_model_types = {"mistral"},
      .gguf_names = {},  // llama.cpp writes Mistral GGUFs as "llama"
      .gguf_rope_neox = false,
      .sanitize = nullptr,
      .build = [](const ModelConfig& cfg, WeightStore& ws) {
        return dense_decoder_build(cfg, ws, {.attention = {}});
      },
      .convert = {.arch = "llama"},
  };
  return e;
}

}  // namespace brisk
