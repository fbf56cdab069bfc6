// Shared building blocks of decoder models, written once against the Backend ops: token
// embedding, self-attention (projections, optional q/k/v bias, optional per-head q/k norm,
// rope, KV store, causal/sliding attention, output projection), gated MLP (SwiGLU / GeGLU),
// norms and the LM head. Architecture files compose these; detail lives here.
#pragma once
#include "models/forward.h"
#include "models/weights.h"

namespace brisk {

struct AttentionWeights {
  Weight wq;                       // [n_head * head_dim, n_embd]
  Weight wq_gate;                  // [n_head * head_dim, n_embd] sigmoid output gate (Qwen3.5), or empty
  Weight wk;                       // [n_head_kv * head_dim, n_embd]; empty: the layer reads
                                   // another layer's cache (KV sharing) and stores nothing
  Weight wv;                       // [n_head_kv * head_dim, n_embd]; empty (with wk): values are
                                   // the keys before their norm and rope (Gemma 4 K = V layers)
  Weight wo;                       // [n_embd, n_head * head_dim]
  const float* bq = nullptr;       // [n_head * head_dim] (Qwen2)
  const float* bk = nullptr;       // [n_head_kv * head_dim]
  const float* bv = nullptr;       // [n_head_kv * head_dim]
  const float* bo = nullptr;       // [n_embd]
  const float* q_norm = nullptr;   // [head_dim] (Qwen3)
  const float* k_norm = nullptr;   // [head_dim]
};

struct MlpWeights {
  Weight gate;                     // [n_ff, n_embd]
  Weight up;                       // [n_ff, n_embd]
  Weight down;                     // [n_embd, n_ff]
};

enum class Need { none, optional, required };

struct AttentionLoadSpec {
  Need qkv_bias = Need::none;
  Need out_bias = Need::none;
  Need qk_norm = Need::none;
  Need k = Need::required;         // none: a KV-shared layer (no K / V projections)
  Need v = Need::required;         // optional: absent means values are the keys
  // attn_q.weight holds 2 * n_head * head_dim rows, per head its query rows then the rows of a
  // sigmoid gate on the attention output (Qwen3.5 / Qwen3-Next); loaded as wq and wq_gate.
  bool q_gate = false;
};

// Loads blk.<il>.attn_* for layer il's shapes (cfg.head_dim_of, n_head_kv_of); tensors outside
// the spec are not read.
AttentionWeights attention_weights_load(WeightStore& ws, const ModelConfig& cfg, int il,
                                        const AttentionLoadSpec& spec);
// Loads blk.<il>.ffn_{gate,up,down} of layer il's MLP size (cfg.n_ff_of).
MlpWeights mlp_weights_load(const WeightStore& ws, const ModelConfig& cfg, int il);

struct AttentionParams {
  const RopeTable* rope = nullptr; // nullptr: no rotary embedding
  int32_t window = 0;              // sliding window of this layer; 0: full
  float softcap = 0.0f;
  int32_t head_dim = 0;            // this layer's head size; 0: cfg.head_dim
  int32_t n_head_kv = 0;           // this layer's KV heads; 0: cfg.n_head_kv
  bool v_norm = false;             // RMS-normalize each V head (no weight) before the store
  float* gate = nullptr;           // [n_tok, n_head * head_dim] buffer for w.wq_gate's output
};

// x := embedding(ids) * scale. Returns the residual stream [n_tok, n_embd].
Mat embed_tokens(const Forward& f, const Weight& table, float scale = 1.0f);
// h := rms_norm(in) * w. Returns h [n_tok, n_embd].
Mat norm(const Forward& f, const Mat& in, const float* w, const char* name, int il);
// out := rms_norm(in) * w (out may be in). Returns out.
Mat norm_into(const Forward& f, const Mat& out, const Mat& in, const float* w, const char* name, int il);
// t := self_attention(in): q/k/v projections (k and v skipped for a layer that reads another's
// cache, v taken from k when the layer has no wv), per-head norms, rope, KV store, attention
// over this layer's cache views, times sigmoid(in wq_gate) when the weights have the gate, output
// projection. Returns t [n_tok, n_embd].
Mat self_attention(const Forward& f, const Mat& in, const AttentionWeights& w,
                   const AttentionParams& p, int il);
// t := down(act(gate(in)) * up(in)), any MLP width (w.gate.n_out <= the arena's n_ff).
// Returns t [n_tok, n_embd].
Mat gated_mlp(const Forward& f, const Mat& in, const MlpWeights& w, int il);
// Tensor parallelism (models/tp_shard.h): t := the sum of the ranks' partial outputs t of a
// row-parallel matmul (attention output, MLP down projection), before the residual add. Nothing
// without a group of more than one rank (f.tp).
void tp_sum_partials(const Forward& f, const Mat& t);
// x := x + t (tapped as `name`).
void residual_add(const Forward& f, const Mat& x, const Mat& t, const char* name, int il);
// logits[i] := output(rms_norm(x[out_rows[i]]) * norm_w) for the rows that want logits; with
// batch.want_hidden also arena.hidden := rms_norm(x) * norm_w for every row.
void lm_head(const Forward& f, const Mat& x, const float* norm_w, const Weight& output);

}  // namespace brisk
