// Qwen3.5 / Qwen3.6 dense: the hybrid decoder (three Gated DeltaNet layers to one gated
// full-attention layer in the published models, as layer_types says) with a dense SwiGLU MLP.
// The conditional-generation checkpoints' language model loads the same way (text_config, the
// model.language_model.* tensors); the vision tower is not loaded. llama.cpp's GGUF (qwen35)
// stores the value heads tiled over the key heads.
#include "models/hybrid_decoder.h"

namespace brisk {

const ArchEntry& arch_qwen35() {
  static const ArchEntry e{
      .name = "qwen35",
      .hf_architectures = {"Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration"},
      .hf_model_types = {"qwen3_5_text", "qwen3_5"},
      .gguf_names = {"qwen35"},
      .gguf_rope_neox = true,
      .hf_name_map = &hybrid_hf_to_gguf,
      .sanitize = &hybrid_sanitize,
      .build = [](const ModelConfig& cfg, WeightStore& ws) {
        return hybrid_decoder_build(cfg, ws, {.moe = false, .kv_tiled_gguf = true});
      },
      .convert = {.arch = "qwen35", .tensors = &hybrid_convert_tensors, .keys = &hybrid_convert_keys},
  };
  return e;
}

}  // namespace brisk
