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
