// The mixture-of-experts MLP block (Qwen3-MoE, Gemma 4): a router matmul, then the Backend's
// moe op (softmax, top-k, each token through its chosen experts' gated MLPs, weighted sum,
// optionally a per-expert scale of the weights). Expert weights come from GGUF's stacked 3-D
// tensors (blk.N.ffn_gate_exps.weight, ne {n_embd, n_ff_exp, n_expert}; or gate and up fused
// as blk.N.ffn_gate_up_exps.weight, ne {n_embd, 2 * n_ff_exp, n_expert}, gate rows first) or
// from per-expert tensors of a Hugging Face checkpoint (renamed blk.N.ffn_gate_exps.E.weight);
// all become one 2-D view per expert.
#pragma once
#include <vector>

#include "models/forward.h"
#include "models/weights.h"

namespace brisk {

struct MoeWeights {
  Weight router;             // [n_expert, n_embd]
  std::vector<Weight> gate;  // [n_expert] of [n_ff_exp, n_embd]
  std::vector<Weight> up;    // [n_expert] of [n_ff_exp, n_embd]
  std::vector<Weight> down;  // [n_expert] of [n_embd, n_ff_exp]
  const float* expert_scale = nullptr;  // [n_expert] blk.N.ffn_down_exps.scale, or nullptr
};

// Whether layer il has a router (an MoE MLP) in this checkpoint.
bool moe_layer_present(const WeightStore& ws, int il);
MoeWeights moe_weights_load(WeightStore& ws, const ModelConfig& cfg, int il);

struct MoeParams {
  const Mat* router_in = nullptr;  // [n_tok, n_embd] the router's input; nullptr: the MLP input
  float* out = nullptr;            // [n_tok, n_embd] result buffer (not the input); nullptr: arena.t
};
// t := moe(in). The router runs before the experts, so `out` may be the router's input. Returns
// t [n_tok, n_embd]; the router logits use arena.gate (at least n_expert wide).
Mat moe_mlp(const Forward& f, const Mat& in, const MoeWeights& w, int il, const MoeParams& p = {});

}  // namespace brisk
