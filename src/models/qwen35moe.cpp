// Qwen3.5 / Qwen3.6 MoE (35B-A3B and larger): the Qwen3.5 hybrid decoder whose MLPs are
// mixtures of experts with a sigmoid-gated shared expert. Its router always renormalizes the
// chosen experts' probabilities (transformers ignores norm_topk_prob here).
#include "models/hybrid_decoder.h"

namespace brisk {

const ArchEntry& arch_qwen35moe() {
  static const ArchEntry e{
      .name = "qwen35moe",
      .hf_architectures = {"Qwen3_5MoeForCausalLM", "Qwen3_5MoeForConditionalGeneration"},
      .hf_model_types = {"qwen3_5_moe_text", "qwen3_5_moe"},
      .gguf_names = {"qwen35moe"},
      .gguf_rope_neox = true,
      .hf_name_map = &hybrid_hf_to_gguf,
      // transformers' Qwen3_5MoeTextConfig
      .hf_config_defaults = R"({"vocab_size": 248320, "hidden_size": 2048, "num_hidden_layers": 40,
          "num_attention_heads": 16, "num_key_value_heads": 2, "hidden_act": "silu",
          "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "head_dim": 256, "linear_conv_kernel_dim": 4,
          "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_num_key_heads": 16,
          "linear_num_value_heads": 32, "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
          "num_experts_per_tok": 8, "num_experts": 256, "partial_rotary_factor": 0.25})",
      .sanitize = [](ModelConfig& cfg) {
        hybrid_sanitize(cfg);
        cfg.norm_topk_prob = true;
      },
      .build = [](const ModelConfig& cfg, WeightStore& ws) {
        return hybrid_decoder_build(cfg, ws, {.moe = true, .kv_tiled_gguf = true});
      },
      .convert = {.arch = "qwen35moe", .tensors = &hybrid_convert_tensors, .keys = &hybrid_convert_keys},
  };
  return e;
}

}  // namespace brisk
