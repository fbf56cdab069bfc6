// The mixture-of-experts MLP block (Qwen3-MoE): a router matmul, then the Backend's moe op
// (softmax, top-k, each token through its chosen experts' gated MLPs, weighted sum).
// Expert weights come from GGUF's stacked 3-D tensors (blk.N.ffn_gate_exps.weight,
// ne {n_embd, n_ff_exp, n_expert}) or from per-expert tensors of a Hugging Face checkpoint
// (renamed blk.N.ffn_gate_exps.E.weight), or gate and up fused in one stacked tensor
// (blk.N.ffn_gate_up_exps.weight, ne {n_embd, 2 * n_ff_exp, n_expert}: per expert its gate rows
// then its up rows); all become one 2-D view per expert.
// A layer may also have a shared expert (Qwen2-MoE, Qwen3-Next, Qwen3.5-MoE: blk.N.ffn_*_shexp)
// that every token goes through, scaled by sigmoid(x . ffn_gate_inp_shexp), added to the routed
// experts' sum.
#pragma once
#include <vector>

#include "models/blocks.h"
#include "models/forward.h"
#include "models/weights.h"

namespace brisk {

struct MoeWeights {
  Weight router;             // [n_expert, n_embd]
  std::vector<Weight> gate;  // [n_expert] of [n_ff_exp, n_embd]
  std::vector<Weight> up;    // [n_expert] of [n_ff_exp, n_embd]
  std::vector<Weight> down;  // [n_expert] of [n_embd, n_ff_exp]
  MlpWeights shared = {};    // [n_ff_shexp, n_embd] gate / up, [n_embd, n_ff_shexp] down; empty: none
  Weight shared_gate = {};   // [1, n_embd]; empty: the shared expert is not gated
};

// Whether layer il has a router (an MoE MLP) in this checkpoint.
bool moe_layer_present(const WeightStore& ws, int il);
MoeWeights moe_weights_load(const WeightStore& ws, const ModelConfig& cfg, int il);
// t := moe(in). Returns t [n_tok, n_embd]; the router logits use arena.gate (n_ff >= n_expert);
// with a shared expert the routed sum goes to arena.t2 and the shared MLP's gate logit to
// arena.up (n_ff >= n_ff_shexp).
Mat moe_mlp(const Forward& f, const Mat& in, const MoeWeights& w, int il);

}  // namespace brisk
