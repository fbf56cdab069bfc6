// The mixture-of-experts MLP block (Qwen3-MoE): a router matmul, then the Backend's moe op
// (softmax, top-k, each token through its chosen experts' gated MLPs, weighted sum).
// Expert weights come from GGUF's stacked 3-D tensors (blk.N.ffn_gate_exps.weight,
// ne {n_embd, n_ff_exp, n_expert}) or from per-expert tensors of a Hugging Face checkpoint
// (renamed blk.N.ffn_gate_exps.E.weight); both become one 2-D view per expert.
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
};

// Whether layer il has a router (an MoE MLP) in this checkpoint.
bool moe_layer_present(const WeightStore& ws, int il);
MoeWeights moe_weights_load(const WeightStore& ws, const ModelConfig& cfg, int il);
// t := moe(in). Returns t [n_tok, n_embd]; the router logits use arena.gate (n_ff >= n_expert).
Mat moe_mlp(const Forward& f, const Mat& in, const MoeWeights& w, int il);

}  // namespace brisk
