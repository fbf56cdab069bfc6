#include "models/encoder_blocks.h"

#include <cmath>

#include "core/error.h"

namespace brisk {

NormWeights layer_norm_load(WeightStore& ws, const std::string& prefix, int64_t n) {
  return NormWeights{.weight = ws.vector(prefix + "weight", n), .bias = ws.vector(prefix + "bias", n)};
}

FfnWeights ffn_load(WeightStore& ws, const std::string& prefix, int64_t n_embd, int64_t n_ff) {
  return FfnWeights{.up = ws.matrix(prefix + "up.weight", n_embd, n_ff),
                    .up_bias = ws.vector(prefix + "up.bias", n_ff),
                    .down = ws.matrix(prefix + "down.weight", n_ff, n_embd),
                    .down_bias = ws.vector(prefix + "down.bias", n_embd)};
}

namespace {
const float* bias_load(WeightStore& ws, const std::string& name, int64_t n, Need need) {
  if (need == Need::none) return nullptr;
  return need == Need::required ? ws.vector(name, n) : ws.vector_opt(name, n);
}
}  // namespace

AttentionWeights attention_load(WeightStore& ws, const std::string& prefix, const AttentionShape& s,
                                const AttentionLoadSpec& spec) {
  AttentionWeights w;
  w.wq = ws.matrix(prefix + "q.weight", s.n_embd, s.q_width());
  w.wk = ws.matrix(prefix + "k.weight", s.n_embd, s.kv_width());
  w.wv = ws.matrix(prefix + "v.weight", s.n_embd, s.kv_width());
  w.wo = ws.matrix(prefix + "output.weight", s.q_width(), s.n_embd);
  w.bq = bias_load(ws, prefix + "q.bias", s.q_width(), spec.qkv_bias);
  w.bk = bias_load(ws, prefix + "k.bias", s.kv_width(), spec.qkv_bias);
  w.bv = bias_load(ws, prefix + "v.bias", s.kv_width(), spec.qkv_bias);
  w.bo = bias_load(ws, prefix + "output.bias", s.n_embd, spec.out_bias);
  return w;
}

AttentionWeights encoder_attention_load(WeightStore& ws, const std::string& prefix, const AttentionShape& s, Need bias) {
  const std::string qkv = prefix + "attn_qkv.";
  const int64_t nq = s.q_width(), nkv = s.kv_width();
  const bool fused = ws.has(qkv + "weight");
  if (fused) {
    const StoredTensor* t = ws.find(qkv + "weight");
    BRISK_CHECK(t->ne.size() == 2 && t->ne[1] == nq + 2 * nkv, "tensor ", qkv, "weight must be [", nq + 2 * nkv, ", ",
                s.n_embd, "] (q, k, v rows)");
    const std::pair<const char*, int64_t> parts[] = {{"attn_q.weight", 0}, {"attn_k.weight", nq}, {"attn_v.weight", nq + nkv}};
    for (const auto& [name, first] : parts) {
      std::vector<int64_t> rows(size_t(name[5] == 'q' ? nq : nkv));
      for (size_t i = 0; i < rows.size(); ++i) rows[i] = first + int64_t(i);
      if (!ws.has(prefix + name)) ws.gather_rows(prefix + name, qkv + "weight", rows);
    }
  }
  AttentionWeights w = attention_load(ws, prefix + "attn_", s,
                                      {.qkv_bias = fused ? Need::none : bias, .out_bias = bias});
  if (fused && bias != Need::none && (bias == Need::required || ws.has(qkv + "bias"))) {
    const float* b = ws.vector(qkv + "bias", nq + 2 * nkv);
    w.bq = b, w.bk = b + nq, w.bv = b + nq + nkv;
  }
  return w;
}

void layer_norm(const BlockContext& c, const Mat& out, const Mat& x, const NormWeights& w, float eps,
                const char* name, int il) {
  c.backend.layer_norm({.out = out, .x = x, .weight = w.weight, .bias = w.bias, .eps = eps});
  c.tap_tensor(name, il, out);
}

void ffn(const BlockContext& c, const FfnArgs& a, int il) {
  Backend& be = c.backend;
  be.matmul({.out = a.hidden, .x = a.x, .w = a.w->up, .bias = a.w->up_bias});
  // The activation is read only by the down matmul (and the tap, which reads it first).
  be.unary({.out = a.hidden, .x = a.hidden, .op = a.act, .out_for_matmul = !(c.tap && *c.tap)});
  c.tap_tensor("ffn_act", il, a.hidden);
  be.matmul({.out = a.out, .x = a.hidden, .w = a.w->down, .bias = a.w->down_bias});
  c.tap_tensor("ffn_out", il, a.out);
}

void gated_ffn(const BlockContext& c, const GatedFfnArgs& a, int il) {
  Backend& be = c.backend;
  const GatedFfnWeights& w = *a.w;
  const int64_t n_ff = w.down.n_in, n = a.x.rows;
  // gate in columns [0, n_ff) of hidden, up in [n_ff, 2 n_ff): one matmul when fused.
  const Mat gate{.data = a.hidden.data, .rows = n, .cols = n_ff, .stride = 2 * n_ff};
  const Mat up{.data = a.hidden.data + n_ff, .rows = n, .cols = n_ff, .stride = 2 * n_ff};
  if (w.gate.empty()) {
    be.matmul({.out = Mat{.data = a.hidden.data, .rows = n, .cols = 2 * n_ff}, .x = a.x, .w = w.up});
  } else {
    const MatmulArgs gu[] = {{.out = gate, .x = a.x, .w = w.gate}, {.out = up, .x = a.x, .w = w.up}};
    be.matmuls(gu, 2);
  }
  be.gated_act({.out = gate, .gate = gate, .up = up, .act = a.act});
  c.tap_tensor("ffn_act", il, gate);
  be.matmul({.out = a.out, .x = gate, .w = w.down});
  c.tap_tensor("ffn_out", il, a.out);
}

void conv1d(const BlockContext& c, const Conv1dArgs& a, const char* name) {
  Backend& be = c.backend;
  be.im2col({.out = a.cols, .x = a.x, .frames_in = a.frames_in, .kernel = a.kernel, .stride = a.stride, .pad = a.pad});
  be.matmul({.out = a.out, .x = a.cols, .w = a.w, .bias = a.bias});
  if (a.gelu) be.unary({.out = a.out, .x = a.out, .op = UnaryOp::gelu_erf});
  c.tap_tensor(name, -1, a.out);
}

void full_attention(const BlockContext& c, const FullAttentionArgs& a, int il) {
  Backend& be = c.backend;
  const AttentionWeights& w = *a.w;
  const float scale = float(1.0 / std::sqrt(double(a.shape.head_dim)));
  AttentionDenseArgs dense{.out = a.attn, .q = a.q, .k = a.k, .v = a.v, .n_seq = a.n_seq, .seq_start = a.seq_start,
                           .n_head = a.shape.n_head, .n_head_kv = a.shape.n_head_kv, .head_dim = a.shape.head_dim,
                           .scale = scale, .window = a.window};
  // The biases go into the attention's reads where the backend takes them there (not before
  // rotary positions, and not where the q / k / v rows are reported with them).
  const bool bias_in_attention = w.bq && w.bk && w.bv && !a.rope && !(c.tap && *c.tap) && be.attention_dense_bias(dense);
  if (bias_in_attention) dense.q_bias = w.bq, dense.k_bias = w.bk, dense.v_bias = w.bv;
  dense.out_for_matmul = !(c.tap && *c.tap);  // read by the o matmul alone
  const MatmulArgs qkv[] = {{.out = a.q, .x = a.x, .w = w.wq, .bias = bias_in_attention ? nullptr : w.bq},
                            {.out = a.k, .x = a.x, .w = w.wk, .bias = bias_in_attention ? nullptr : w.bk},
                            {.out = a.v, .x = a.x, .w = w.wv, .bias = bias_in_attention ? nullptr : w.bv}};
  be.matmuls(qkv, 3);
  if (a.rope) {
    be.rope({.x = a.q, .pos = a.rope_pos, .n_head = a.shape.n_head, .head_dim = a.shape.head_dim, .table = a.rope});
    be.rope({.x = a.k, .pos = a.rope_pos, .n_head = a.shape.n_head_kv, .head_dim = a.shape.head_dim, .table = a.rope});
  }
  c.tap_tensor("Qcur", il, a.q);
  c.tap_tensor("Kcur", il, a.k);
  c.tap_tensor("Vcur", il, a.v);
  // Dense attention over k / v where the backend has it; else through the scratch KV view, every
  // query at the window's last position.
  if (!be.attention_dense(dense)) {
    BRISK_CHECK(!bias_in_attention, "attention_dense: the ", be.name(), " backend took the q / k / v biases, then not the op");
    BRISK_CHECK(!a.seq_start && a.window == 0 && a.k_cache.width > 0, "op attention_dense is not supported on the ",
                be.name(), " backend");
    be.kv_store({.k = a.k, .v = a.v, .k_cache = a.k_cache, .v_cache = a.v_cache, .seq = a.seq, .pos = a.pos});
    be.attention({.out = a.attn, .q = a.q, .k_cache = a.k_cache, .v_cache = a.v_cache, .seq = a.seq, .pos = a.last_pos,
                  .n_head = a.shape.n_head, .n_head_kv = a.shape.n_head_kv, .head_dim = a.shape.head_dim, .scale = scale});
  }
  c.tap_tensor("kqv_out", il, a.attn);
  be.matmul({.out = a.out, .x = a.attn, .w = w.wo, .bias = w.bo});
  c.tap_tensor("attn_out", il, a.out);
}

void cross_kv_store(const BlockContext& c, const CrossKvStoreArgs& a, int il) {
  Backend& be = c.backend;
  const AttentionWeights& w = *a.w;
  const MatmulArgs kv[] = {{.out = a.k, .x = a.enc, .w = w.wk, .bias = w.bk}, {.out = a.v, .x = a.enc, .w = w.wv, .bias = w.bv}};
  be.matmuls(kv, 2);
  c.tap_tensor("cross_Kcur", il, a.k);
  c.tap_tensor("cross_Vcur", il, a.v);
  be.kv_store({.k = a.k, .v = a.v, .k_cache = a.k_cache, .v_cache = a.v_cache, .seq = a.seq, .pos = a.pos});
}

void cross_attention(const BlockContext& c, const CrossAttentionArgs& a, int il) {
  Backend& be = c.backend;
  const AttentionWeights& w = *a.w;
  const float scale = float(1.0 / std::sqrt(double(a.shape.head_dim)));
  be.matmul({.out = a.q, .x = a.x, .w = w.wq, .bias = w.bq});
  c.tap_tensor("cross_Qcur", il, a.q);
  be.attention({.out = a.attn, .q = a.q, .k_cache = a.k_cache, .v_cache = a.v_cache, .seq = a.seq, .pos = a.last_pos,
                .n_head = a.shape.n_head, .n_head_kv = a.shape.n_head_kv, .head_dim = a.shape.head_dim, .scale = scale});
  c.tap_tensor("cross_kqv_out", il, a.attn);
  if (a.probe) {
    for (size_t i = 0; i < a.probe->heads.size(); ++i) {
      if (a.probe->heads[i].first != il) continue;
      const Mat probs{.data = a.probe->device_scratch, .rows = a.q.rows, .cols = a.probe->n_pos};
      be.attention_weights({.out = probs, .q = a.q, .k_cache = a.k_cache, .seq = a.seq, .pos = a.last_pos,
                            .head = a.probe->heads[i].second, .n_head = a.shape.n_head,
                            .n_head_kv = a.shape.n_head_kv, .head_dim = a.shape.head_dim, .scale = scale});
      be.copy(a.probe->out + i * size_t(a.q.rows) * size_t(a.probe->n_pos), probs.data,
              sizeof(float) * size_t(a.q.rows) * size_t(a.probe->n_pos));
    }
  }
  be.matmul({.out = a.out, .x = a.attn, .w = w.wo, .bias = w.bo});
  c.tap_tensor("cross_attn_out", il, a.out);
}

}  // namespace brisk
