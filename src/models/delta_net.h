// The Gated DeltaNet block (linear attention of Qwen3.5 / Qwen3-Next hybrids):
//   mixed = in W_qkv                       q | k | v rows, [n_tok, 2 * key_dim + value_dim]
//   z = in W_z, beta = in W_beta, alpha = in W_alpha
//   c = silu(causal_conv1d(mixed))         depthwise, `kernel` taps, rolling per-sequence window
//   q, k = l2_norm(c_q), l2_norm(c_k) per key head;  v = c_v
//   o = gated_delta_rule(q, k, v, alpha, beta)        per-sequence state [n_v_head, k_dim, v_dim]
//   t = (rms_norm(o) * w_norm * silu(z)) W_out       norm per value head
// Value heads are grouped over key heads: value head h reads key head h / (n_v_head / n_k_head)
// in the Hugging Face layout; llama.cpp's converter stores Qwen3.5 value heads tiled instead
// (h reads key head h % n_k_head), which the shape's kv_tiled says.
//
// Checkpoint forms (GGUF names, the HF ones renamed by the arch's name map):
//   split  attn_qkv [conv_dim, n_embd], attn_gate (z), ssm_beta + ssm_alpha (Qwen3.5) or
//          ssm_ba (Qwen3-Next: per key head its beta rows then its alpha rows)
//   fused  ssm_in (Qwen3-Next HF in_proj_qkvz): per key head q, k, its value heads' v, then z
// The fused rows are regrouped into the split layout once at load.
// ssm_a is -exp(A_log) in GGUF (HF stores A_log), ssm_dt.bias the decay's dt bias, ssm_conv1d
// [conv_dim, kernel], ssm_norm [v_dim], ssm_out [n_embd, value_dim].
#pragma once
#include <vector>

#include "models/forward.h"
#include "models/weights.h"

namespace brisk {

struct DeltaNetShape {
  int32_t n_k_head = 0;
  int32_t n_v_head = 0;   // a multiple of n_k_head
  int32_t k_dim = 0;
  int32_t v_dim = 0;
  int32_t kernel = 0;     // conv taps
  bool kv_tiled = false;  // value head h reads key head h % n_k_head
  int64_t key_dim() const { return int64_t(n_k_head) * k_dim; }
  int64_t value_dim() const { return int64_t(n_v_head) * v_dim; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
  // From the config's linear_* fields (checked by the arch's sanitize).
  static DeltaNetShape of(const ModelConfig& cfg, bool kv_tiled);
};

struct DeltaNetWeights {
  Weight qkv;                        // [conv_dim, n_embd]: q rows, k rows, v rows
  Weight z;                          // [value_dim, n_embd]
  Weight beta;                       // [n_v_head, n_embd]
  Weight alpha;                      // [n_v_head, n_embd]
  const float* conv = nullptr;       // [conv_dim, kernel]
  std::vector<float> decay_rate;     // [n_v_head] -exp(A_log)
  const float* dt_bias = nullptr;    // [n_v_head]
  const float* norm = nullptr;       // [v_dim]
  Weight out;                        // [n_embd, value_dim]
};

// Activation buffers of the block, [n_tok, width] each, in the order of delta_net_buffer_widths.
struct DeltaNetBuffers {
  float* mixed = nullptr;  // [n, conv_dim] projection before the conv
  float* conv = nullptr;   // [n, conv_dim] after the conv: q | k | v
  float* z = nullptr;      // [n, value_dim]
  float* alpha = nullptr;  // [n, n_v_head]
  float* beta = nullptr;   // [n, n_v_head]
  float* core = nullptr;   // [n, value_dim] delta rule output, then gated norm
};
std::vector<int64_t> delta_net_buffer_widths(const DeltaNetShape& s);
// The buffers from the first six of `extra` (ForwardArena::extra from those widths).
DeltaNetBuffers delta_net_buffers(const std::vector<float*>& extra);

// Per-sequence state of one layer (LayerState::recurrent): the conv window [kernel - 1,
// conv_dim] and the delta state [n_v_head, k_dim, v_dim], in floats.
std::vector<int64_t> delta_net_state_floats(const DeltaNetShape& s);

// from_gguf: ssm_a holds -exp(A_log) already (else A_log, converted here).
DeltaNetWeights delta_net_weights_load(WeightStore& ws, const DeltaNetShape& s, int64_t n_embd, bool from_gguf,
                                       int il);
// t := delta_net(in) using state (*f.state)[il]. Returns t [n_tok, n_embd] (arena.t).
Mat gated_delta_net(const Forward& f, const Mat& in, const DeltaNetWeights& w, const DeltaNetShape& s,
                    const DeltaNetBuffers& b, int il);

}  // namespace brisk
