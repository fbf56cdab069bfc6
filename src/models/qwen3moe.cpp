// Qwen3-MoE: the Qwen3 decoder (per-head q/k RMS norm, no biases) whose MLPs are mixtures of
// experts: router softmax, top-k experts (renormalized when norm_topk_prob), SwiGLU experts.
// Layers without a router in the checkpoint (mlp_only_layers) keep the dense MLP.
#include <algorithm>

#include "models/dense_decoder.h"

namespace brisk {

const ArchEntry& arch_qwen3moe() {
  static const ArchEntry e{
      .name = "qwen3moe",
      .hf_architectures = {"Qwen3MoeForCausalLM"},
      .hf_model_types = {"qwen3_moe"},
      .gguf_names = {"qwen3moe"},
      .gguf_rope_neox = true,
      .sanitize = [](ModelConfig& cfg) {
        if (!cfg.use_sliding_window) cfg.sliding_window = 0;
        // The router logits [n_tok, n_expert] share the MLP activation buffer.
        cfg.n_ff = std::max(cfg.n_ff, cfg.n_expert);
      },
      .build = [](const ModelConfig& cfg, WeightStore& ws) {
        return dense_decoder_build(cfg, ws, {.attention = {.qk_norm = Need::required}, .moe = true});
      },
      .convert = {.arch = "qwen3moe"},
  };
  return e;
}

}  // namespace brisk
