// The mixture-of-experts MLP block (Qwen3-MoE, Gemma 4, the Qwen3.5 / Qwen3-Next hybrids): a
// router matmul, then the Backend's moe op (softmax, top-k, each token through its chosen
// experts' gated MLPs, weighted sum, optionally a per-expert scale of the weights). Expert
// weights come from GGUF's stacked 3-D tensors (blk.N.ffn_gate_exps.weight, ne {n_embd,
// n_ff_exp, n_expert}; or gate and up fused as blk.N.ffn_gate_up_exps.weight, ne {n_embd,
// 2 * n_ff_exp, n_expert}, per expert its gate rows then its up rows) or from per-expert tensors
// of a Hugging Face checkpoint (renamed blk.N.ffn_gate_exps.E.weight); all become one 2-D view
// per expert.
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
  const float* expert_scale = nullptr;  // [n_expert] blk.N.ffn_down_exps.scale, or nullptr
  MlpWeights shared = {};    // [n_ff_shexp, n_embd] gate / up, [n_embd, n_ff_shexp] down; empty: none
  Weight shared_gate = {};   // [1, n_embd]; empty: the shared expert is not gated
};

// Whether layer il has a router (an MoE MLP) in this checkpoint.
bool moe_layer_present(const WeightStore& ws, int il);
MoeWeights moe_weights_load(WeightStore& ws, const ModelConfig& cfg, int il);

struct MoeParams {
  const Mat* router_in = nullptr;  // [n_tok, n_embd] the router's input; nullptr: the MLP input
  float* out = nullptr;            // [n_tok, n_embd] result buffer (not the input); nullptr: arena.t
                                   // (a layer with a shared expert takes none)
};
// t := moe(in). The router runs before the experts, so `out` may be the router's input. Returns
// t [n_tok, n_embd]; the router logits use arena.gate (at least n_expert wide); with a shared
// expert the routed sum goes to arena.t2 and the shared MLP's gate logit to arena.up.
Mat moe_mlp(const Forward& f, const Mat& in, const MoeWeights& w, int il, const MoeParams& p = {});

}  // namespace brisk
