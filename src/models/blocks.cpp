#include "models/blocks.h"

#include "core/error.h"

namespace brisk {

namespace {

std::string blk(int il, const char* suffix) { return "blk." + std::to_string(il) + "." + suffix; }

const float* load_vec(WeightStore& ws, const std::string& name, int64_t n, Need need) {
  if (need == Need::none) return nullptr;
  return need == Need::required ? ws.vector(name, n) : ws.vector_opt(name, n);
}

Weight load_matrix(const WeightStore& ws, const std::string& name, int64_t n_in, int64_t n_out, Need need) {
  if (need == Need::none) return {};
  return need == Need::required ? ws.matrix(name, n_in, n_out) : ws.matrix_opt(name, n_in, n_out);
}

}  // namespace

AttentionWeights attention_weights_load(WeightStore& ws, const ModelConfig& cfg, int il,
                                        const AttentionLoadSpec& spec) {
  const int64_t hd = cfg.head_dim_of(il), q_width = cfg.q_width_of(il), kv_width = cfg.kv_width_of(il);
  AttentionWeights w;
  if (spec.q_gate) {
    // Per head: head_dim query rows, then head_dim gate rows. Regrouped once at load into all
    // query rows, then all gate rows, so that each is one matmul.
    const std::string name = blk(il, "attn_q.weight");
    ws.matrix(name, cfg.n_embd, 2 * q_width);  // checks the shape, names it when wrong
    std::vector<int64_t> q_rows, gate_rows;
    for (int64_t h = 0; h < cfg.n_head; ++h)
      for (int64_t i = 0; i < hd; ++i) {
        q_rows.push_back(h * 2 * hd + i);
        gate_rows.push_back(h * 2 * hd + hd + i);
      }
    ws.gather_rows(blk(il, "attn_q.query_rows"), name, q_rows);
    ws.gather_rows(blk(il, "attn_q.gate_rows"), name, gate_rows);
    w.wq = ws.matrix(blk(il, "attn_q.query_rows"), cfg.n_embd, q_width);
    w.wq_gate = ws.matrix(blk(il, "attn_q.gate_rows"), cfg.n_embd, q_width);
  } else {
    w.wq = ws.matrix(blk(il, "attn_q.weight"), cfg.n_embd, q_width);
  }
  w.wk = load_matrix(ws, blk(il, "attn_k.weight"), cfg.n_embd, kv_width, spec.k);
  if (!w.wk.empty()) w.wv = load_matrix(ws, blk(il, "attn_v.weight"), cfg.n_embd, kv_width, spec.v);
  w.wo = ws.matrix(blk(il, "attn_output.weight"), q_width, cfg.n_embd);
  w.bq = load_vec(ws, blk(il, "attn_q.bias"), q_width, spec.qkv_bias);
  if (!w.wk.empty()) w.bk = load_vec(ws, blk(il, "attn_k.bias"), kv_width, spec.qkv_bias);
  if (!w.wv.empty()) w.bv = load_vec(ws, blk(il, "attn_v.bias"), kv_width, spec.qkv_bias);
  w.bo = load_vec(ws, blk(il, "attn_output.bias"), cfg.n_embd, spec.out_bias);
  w.q_norm = load_vec(ws, blk(il, "attn_q_norm.weight"), hd, spec.qk_norm);
  if (!w.wk.empty()) w.k_norm = load_vec(ws, blk(il, "attn_k_norm.weight"), hd, spec.qk_norm);
  return w;
}

MlpWeights mlp_weights_load(const WeightStore& ws, const ModelConfig& cfg, int il) {
  const int64_t n_ff = cfg.n_ff_of(il);
  return MlpWeights{
      .gate = ws.matrix(blk(il, "ffn_gate.weight"), cfg.n_embd, n_ff),
      .up = ws.matrix(blk(il, "ffn_up.weight"), cfg.n_embd, n_ff),
      .down = ws.matrix(blk(il, "ffn_down.weight"), n_ff, cfg.n_embd),
  };
}

void tp_sum_partials(const Forward& f, const Mat& t) {
  if (f.tp && f.tp->world > 1) f.backend.all_reduce({.x = t, .tp = f.tp});
}

Mat embed_tokens(const Forward& f, const Weight& table, float scale) {
  const Mat x = f.mat(f.arena.x, f.cfg.n_embd);
  f.backend.embedding({.out = x, .table = table, .ids = f.batch.ids, .scale = scale});
  f.tap_tensor("inp_embd", -1, x);
  return x;
}

Mat norm(const Forward& f, const Mat& in, const float* w, const char* name, int il) {
  return norm_into(f, f.mat(f.arena.h, in.cols), in, w, name, il);
}

Mat norm_into(const Forward& f, const Mat& out, const Mat& in, const float* w, const char* name, int il) {
  f.backend.rms_norm({.out = out, .x = in, .weight = w, .eps = f.cfg.rms_eps});
  f.tap_tensor(name, il, out);
  return out;
}

Mat self_attention(const Forward& f, const Mat& in, const AttentionWeights& w,
                   const AttentionParams& p, int il) {
  const ModelConfig& c = f.cfg;
  Backend& be = f.backend;
  const int32_t hd = p.head_dim > 0 ? p.head_dim : c.head_dim;
  const int32_t n_head_kv = p.n_head_kv > 0 ? p.n_head_kv : c.n_head_kv;
  const Mat q = f.mat(f.arena.q, int64_t(c.n_head) * hd);    // [n_tok, n_head * head_dim]
  const Mat k = f.mat(f.arena.k, int64_t(n_head_kv) * hd);   // [n_tok, n_head_kv * head_dim]
  const Mat v = f.mat(f.arena.v, int64_t(n_head_kv) * hd);   // [n_tok, n_head_kv * head_dim]
  const bool own_kv = !w.wk.empty();
  const bool gated = !w.wq_gate.empty();
  BRISK_CHECK(!gated || p.gate, "self_attention: layer ", il, " has an output gate but no buffer for it");
  BRISK_CHECK(!gated || (own_kv && !w.wv.empty()), "self_attention: layer ", il,
              " has an output gate and no K / V projections of its own");
  const Mat gate = gated ? f.mat(p.gate, int64_t(c.n_head) * hd) : Mat{};  // [n_tok, n_head * head_dim]
  const MatmulArgs qkv[] = {{.out = q, .x = in, .w = w.wq, .bias = w.bq},
                            {.out = k, .x = in, .w = w.wk, .bias = w.bk},
                            {.out = v, .x = in, .w = w.wv, .bias = w.bv},
                            {.out = gate, .x = in, .w = w.wq_gate}};
  be.matmuls(qkv, gated ? 4 : !own_kv ? 1 : w.wv.empty() ? 2 : 3);
  // The norms first, then the ropes of q and k and the store back to back (a backend may run
  // those in one launch).
  if (w.q_norm) be.rms_norm({.out = q, .x = q, .weight = w.q_norm, .group = hd, .eps = c.rms_eps});
  if (own_kv) {
    // Values from the keys' projection take it before the key norm and rope.
    if (w.wv.empty() && p.v_norm) be.rms_norm({.out = v, .x = k, .group = hd, .eps = c.rms_eps});
    else if (w.wv.empty()) be.scale({.out = v, .x = k, .scale = 1.0f});
    else if (p.v_norm) be.rms_norm({.out = v, .x = v, .group = hd, .eps = c.rms_eps});
    if (w.k_norm) be.rms_norm({.out = k, .x = k, .weight = w.k_norm, .group = hd, .eps = c.rms_eps});
  }
  // Models with learned absolute positions have no rotary embedding.
  if (p.rope) be.rope({.x = q, .pos = f.batch.pos, .n_head = c.n_head, .head_dim = hd, .table = p.rope});
  f.tap_tensor("Qcur", il, q);
  const KvView& kc = f.k_cache[size_t(il)];
  const KvView& vc = f.v_cache[size_t(il)];
  if (own_kv) {
    if (p.rope) be.rope({.x = k, .pos = f.batch.pos, .n_head = n_head_kv, .head_dim = hd, .table = p.rope});
    f.tap_tensor("Kcur", il, k);
    f.tap_tensor("Vcur", il, v);
    be.kv_store({.k = k, .v = v, .k_cache = kc, .v_cache = vc, .seq = f.batch.seq, .pos = f.batch.pos});
  }
  const Mat a = f.mat(f.arena.attn, int64_t(c.n_head) * hd);
  // Bidirectional forwards: the keys after each token too (its whole sequence or window).
  const bool both_ways = f.batch.seq_last != nullptr;
  BRISK_CHECK(!both_ways || p.window == 0 || p.window == f.batch.bidir_window, "self_attention: layer ", il,
              " has window ", p.window, ", the bidirectional forward planned ", f.batch.bidir_window);
  const int32_t* last = !both_ways ? f.batch.pos : p.window > 0 ? f.batch.window_last : f.batch.seq_last;
  const int32_t* first = both_ways && p.window > 0 ? f.batch.window_first : nullptr;
  be.attention({.out = a, .q = q, .k_cache = kc, .v_cache = vc, .seq = f.batch.seq, .pos = last, .first = first,
                .n_head = c.n_head, .n_head_kv = n_head_kv, .head_dim = hd,
                .scale = c.attn_scale, .window = both_ways ? 0 : p.window, .softcap = p.softcap});
  f.tap_tensor("kqv_out", il, a);
  if (gated) {
    be.sigmoid_mul({.out = a, .x = a, .gate = gate});
    f.tap_tensor("attn_gated", il, a);
  }
  const Mat t = f.mat(f.arena.t, c.n_embd);
  be.matmul({.out = t, .x = a, .w = w.wo, .bias = w.bo});
  tp_sum_partials(f, t);
  f.tap_tensor("attn_out", il, t);
  return t;
}

Mat gated_mlp(const Forward& f, const Mat& in, const MlpWeights& w, int il) {
  Backend& be = f.backend;
  const int64_t n_ff = w.gate.n_out;
  BRISK_CHECK(n_ff <= f.cfg.max_n_ff(), "gated_mlp: layer ", il, " MLP width ", n_ff, " exceeds the planned ",
              f.cfg.max_n_ff());
  const Mat g = f.mat(f.arena.gate, n_ff);  // [n_tok, n_ff]
  const Mat u = f.mat(f.arena.up, n_ff);    // [n_tok, n_ff]
  const MatmulArgs gate_up[] = {{.out = g, .x = in, .w = w.gate}, {.out = u, .x = in, .w = w.up}};
  be.matmuls(gate_up, 2);
  be.gated_act({.out = g, .gate = g, .up = u, .act = f.cfg.act});
  f.tap_tensor("ffn_act", il, g);
  const Mat t = f.mat(f.arena.t, f.cfg.n_embd);
  be.matmul({.out = t, .x = g, .w = w.down});
  tp_sum_partials(f, t);
  f.tap_tensor("ffn_out", il, t);
  return t;
}

void residual_add(const Forward& f, const Mat& x, const Mat& t, const char* name, int il) {
  f.backend.add({.out = x, .a = x, .b = t});
  f.tap_tensor(name, il, x);
}

void lm_head(const Forward& f, const Mat& x, const float* norm_w, const Weight& output) {
  if (f.batch.want_hidden) {
    BRISK_CHECK(f.arena.hidden != nullptr, "lm_head: hidden rows asked for without a buffer");
    f.backend.rms_norm({.out = f.mat(f.arena.hidden, f.cfg.n_embd), .x = x, .weight = norm_w, .eps = f.cfg.rms_eps});
  }
  const int32_t n_out = f.batch.n_out;
  if (n_out == 0) return;
  BRISK_CHECK(n_out <= f.arena.n_logits_max, "lm_head: ", n_out, " logit rows exceed the planned ",
              f.arena.n_logits_max);
  const Mat o{.data = f.arena.out, .rows = n_out, .cols = f.cfg.n_embd};
  f.backend.get_rows({.out = o, .x = x, .rows = f.batch.out_rows});
  f.backend.rms_norm({.out = o, .x = o, .weight = norm_w, .eps = f.cfg.rms_eps});
  f.tap_tensor("result_norm", -1, o);
  const Mat logits{.data = f.arena.logits, .rows = n_out, .cols = f.cfg.n_vocab};
  f.backend.matmul({.out = logits, .x = o, .w = output});
  f.tap_tensor("result_output", -1, logits);
}

}  // namespace brisk
