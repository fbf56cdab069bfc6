// Llama 2 / Llama 3 (rope scaling: linear, llama3, yarn via config): the plain dense decoder,
// no biases. llama.cpp's converter permutes q/k rows, so GGUF files use adjacent-pair rope.
#include "models/dense_decoder.h"

namespace brisk {

const ArchEntry& arch_llama() {
  static const ArchEntry e{
      .name = "llama",
      .hf_architectures = {"LlamaForCausalLM"},
      .hf_model_types = {"llama"},
      .gguf_names = {"llama"},
      .gguf_rope_neox = false,
      .sanitize = nullptr,
      .build = [](const ModelConfig& cfg, WeightStore& ws) {
        return dense_decoder_build(cfg, ws, {.attention = {.qkv_bias = Need::optional, .out_bias = Need::optional}});
      },
      .convert = {.arch = "llama"},
  };
  return e;
}

}  // namespace brisk
