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
      .sanitize = &hybrid_sanitize,
      .build = [](const ModelConfig& cfg, WeightStore& ws) {
        return hybrid_decoder_build(cfg, ws, {.moe = true, .kv_tiled_gguf = false});
      },
      .convert = {.arch = "qwen3next", .tensors = &hybrid_convert_tensors, .keys = &hybrid_convert_keys},
  };
  return e;
}

}  // namespace brisk
