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
      // transformers' Qwen3_5TextConfig
      .hf_config_defaults = R"({"vocab_size": 248320, "hidden_size": 4096, "intermediate_size": 12288,
          "num_hidden_layers": 32, "num_attention_heads": 16, "num_key_value_heads": 4, "hidden_act": "silu",
          "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "head_dim": 256, "linear_conv_kernel_dim": 4,
          "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_num_key_heads": 16,
          "linear_num_value_heads": 32, "partial_rotary_factor": 0.25})",
      .sanitize = &hybrid_sanitize,
      .build = [](const ModelConfig& cfg, WeightStore& ws) {
        return hybrid_decoder_build(cfg, ws, {.moe = false, .kv_tiled_gguf = true});
      },
      .convert = {.arch = "qwen35", .tensors = &hybrid_convert_tensors, .keys = &hybrid_convert_keys},
  };
  return e;
}

}  // namespace brisk
