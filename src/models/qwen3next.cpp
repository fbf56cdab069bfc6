// Qwen3-Next: the hybrid decoder with MoE MLPs (a shared expert beside the routed ones; layers
// in mlp_only_layers have no router and keep a dense MLP). Its checkpoints fuse the delta net's
// projections per key head (in_proj_qkvz, in_proj_ba); models/delta_net.cpp regroups them.
#include "models/hybrid_decoder.h"

namespace brisk {

const ArchEntry& arch_qwen3next() {
  static const ArchEntry e{
      .name = "qwen3next",
      .hf_architectures = {"Qwen3NextForCausalLM"},
      .hf_model_types = {"qwen3_next"},
      .gguf_names = {"qwen3next"},
      .gguf_rope_neox = true,
      .hf_name_map = &hybrid_hf_to_gguf,
      // transformers' Qwen3NextConfig
      .hf_config_defaults = R"({"vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5632,
          "num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 2, "hidden_act": "silu",
          "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "head_dim": 256, "linear_conv_kernel_dim": 4,
          "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_num_key_heads": 16,
          "linear_num_value_heads": 32, "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
          "num_experts_per_tok": 10, "num_experts": 512, "norm_topk_prob": true, "partial_rotary_factor": 0.25})",
      .sanitize = &hybrid_sanitize,
      .build = [](const ModelConfig& cfg, WeightStore& ws) {
        return hybrid_decoder_build(cfg, ws, {.moe = true, .kv_tiled_gguf = false});
      },
      .convert = {.arch = "qwen3next", .tensors = &hybrid_convert_tensors, .keys = &hybrid_convert_keys},
  };
  return e;
}

}  // namespace brisk
