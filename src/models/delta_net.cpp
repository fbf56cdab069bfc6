#include "models/delta_net.h"

#include <cmath>

#include "core/error.h"

namespace brisk {

namespace {

std::string delta_blk(int il, const char* suffix) { return "blk." + std::to_string(il) + "." + suffix; }

// Regroups the fused Qwen3-Next projections into the split layout (rows only: any format).
void regroup_fused(WeightStore& ws, const DeltaNetShape& s, int64_t n_embd, int il) {
  const int64_t r = s.n_v_head / s.n_k_head, dk = s.k_dim, dv = s.v_dim;
  const std::string in = delta_blk(il, "ssm_in.weight");
  if (!ws.has(delta_blk(il, "attn_qkv.weight")) && ws.has(in)) {
    ws.matrix(in, n_embd, s.conv_dim() + s.value_dim());  // shape check naming the tensor
    const int64_t per = 2 * dk + 2 * r * dv;              // rows of one key head's group
    std::vector<int64_t> qkv, z;
    for (int64_t part = 0; part < 3; ++part)              // all q rows, all k rows, all v rows
      for (int64_t g = 0; g < s.n_k_head; ++g) {
        const int64_t start = g * per + (part == 0 ? 0 : part == 1 ? dk : 2 * dk);
        for (int64_t i = 0; i < (part == 2 ? r * dv : dk); ++i) qkv.push_back(start + i);
      }
    for (int64_t g = 0; g < s.n_k_head; ++g)
      for (int64_t i = 0; i < r * dv; ++i) z.push_back(g * per + 2 * dk + r * dv + i);
    ws.gather_rows(delta_blk(il, "attn_qkv.weight"), in, qkv);
    ws.gather_rows(delta_blk(il, "attn_gate.weight"), in, z);
  }
  const std::string ba = delta_blk(il, "ssm_ba.weight");
  if (!ws.has(delta_blk(il, "ssm_beta.weight")) && ws.has(ba)) {
    ws.matrix(ba, n_embd, 2 * int64_t(s.n_v_head));
    std::vector<int64_t> beta, alpha;
    for (int64_t g = 0; g < s.n_k_head; ++g)
      for (int64_t i = 0; i < r; ++i) {
        beta.push_back(g * 2 * r + i);
        alpha.push_back(g * 2 * r + r + i);
      }
    ws.gather_rows(delta_blk(il, "ssm_beta.weight"), ba, beta);
    ws.gather_rows(delta_blk(il, "ssm_alpha.weight"), ba, alpha);
  }
}

}  // namespace

DeltaNetShape DeltaNetShape::of(const ModelConfig& cfg, bool kv_tiled) {
  return DeltaNetShape{.n_k_head = cfg.linear_n_k_head, .n_v_head = cfg.linear_n_v_head, .k_dim = cfg.linear_k_head_dim,
                       .v_dim = cfg.linear_v_head_dim, .kernel = cfg.linear_conv_kernel, .kv_tiled = kv_tiled};
}

std::vector<int64_t> delta_net_buffer_widths(const DeltaNetShape& s) {
  return {s.conv_dim(), s.conv_dim(), s.value_dim(), s.n_v_head, s.n_v_head, s.value_dim()};
}

DeltaNetBuffers delta_net_buffers(const std::vector<float*>& extra) {
  BRISK_CHECK(extra.size() >= 6, "delta_net: the arena has ", extra.size(), " extra buffers, the block needs 6");
  return DeltaNetBuffers{.mixed = extra[0], .conv = extra[1], .z = extra[2], .alpha = extra[3], .beta = extra[4],
                         .core = extra[5]};
}

std::vector<int64_t> delta_net_state_floats(const DeltaNetShape& s) {
  return {int64_t(s.kernel - 1) * s.conv_dim(), int64_t(s.n_v_head) * s.k_dim * s.v_dim};
}

DeltaNetWeights delta_net_weights_load(WeightStore& ws, const DeltaNetShape& s, int64_t n_embd, bool from_gguf,
                                       int il) {
  regroup_fused(ws, s, n_embd, il);
  DeltaNetWeights w;
  w.qkv = ws.matrix(delta_blk(il, "attn_qkv.weight"), n_embd, s.conv_dim());
  w.z = ws.matrix(delta_blk(il, "attn_gate.weight"), n_embd, s.value_dim());
  w.beta = ws.matrix(delta_blk(il, "ssm_beta.weight"), n_embd, s.n_v_head);
  w.alpha = ws.matrix(delta_blk(il, "ssm_alpha.weight"), n_embd, s.n_v_head);
  w.conv = ws.vector(delta_blk(il, "ssm_conv1d.weight"), s.conv_dim() * s.kernel);
  const float* a = ws.vector(delta_blk(il, "ssm_a"), s.n_v_head);
  w.decay_rate.assign(a, a + s.n_v_head);
  if (!from_gguf)
    for (float& v : w.decay_rate) v = -std::exp(v);
  for (float v : w.decay_rate)
    BRISK_CHECK(v <= 0.0f && std::isfinite(v), "tensor ", delta_blk(il, "ssm_a"), ": decay rate ", v,
                " is not a finite value <= 0 (-exp(A_log))");
  w.dt_bias = ws.vector(delta_blk(il, "ssm_dt.bias"), s.n_v_head);
  w.norm = ws.vector(delta_blk(il, "ssm_norm.weight"), s.v_dim);
  w.out = ws.matrix(delta_blk(il, "ssm_out.weight"), s.value_dim(), n_embd);
  return w;
}

Mat gated_delta_net(const Forward& f, const Mat& in, const DeltaNetWeights& w, const DeltaNetShape& s,
                    const DeltaNetBuffers& b, int il) {
  Backend& be = f.backend;
  BRISK_CHECK(f.state && size_t(il) < f.state->size() && (*f.state)[size_t(il)].size() == 2,
              "delta_net: layer ", il, " has no recurrent state");
  const StateView& conv_state = (*f.state)[size_t(il)][0];
  const StateView& delta_state = (*f.state)[size_t(il)][1];
  const Mat mixed = f.mat(b.mixed, s.conv_dim());  // [n_tok, conv_dim]
  const Mat z = f.mat(b.z, s.value_dim());          // [n_tok, value_dim]
  const Mat alpha = f.mat(b.alpha, s.n_v_head);     // [n_tok, n_v_head]
  const Mat beta = f.mat(b.beta, s.n_v_head);       // [n_tok, n_v_head]
  const MatmulArgs proj[] = {{.out = mixed, .x = in, .w = w.qkv},
                             {.out = z, .x = in, .w = w.z},
                             {.out = beta, .x = in, .w = w.beta},
                             {.out = alpha, .x = in, .w = w.alpha}};
  be.matmuls(proj, 4);
  f.tap_tensor("linear_attn_qkv_mixed", il, mixed);
  f.tap_tensor("z", il, z);
  const Mat conv = f.mat(b.conv, s.conv_dim());
  be.conv_state({.out = conv, .x = mixed, .weight = w.conv, .kernel = s.kernel, .state = conv_state,
                 .seq = f.batch.seq, .pos = f.batch.pos, .silu = true});
  f.tap_tensor("conv_output_silu", il, conv);
  // Views of the conv output: q, k and v columns of each row.
  const Mat q{.data = conv.data, .rows = conv.rows, .cols = s.key_dim(), .stride = s.conv_dim()};
  const Mat k{.data = conv.data + s.key_dim(), .rows = conv.rows, .cols = s.key_dim(), .stride = s.conv_dim()};
  const Mat v{.data = conv.data + 2 * s.key_dim(), .rows = conv.rows, .cols = s.value_dim(), .stride = s.conv_dim()};
  be.l2_norm({.out = q, .x = q, .group = s.k_dim, .eps = 1e-6f});
  be.l2_norm({.out = k, .x = k, .group = s.k_dim, .eps = 1e-6f});
  const Mat core = f.mat(b.core, s.value_dim());
  be.delta_rule({.out = core, .q = q, .k = k, .v = v, .alpha = alpha, .beta = beta, .decay_rate = w.decay_rate.data(),
                 .dt_bias = w.dt_bias, .state = delta_state, .seq = f.batch.seq, .pos = f.batch.pos,
                 .n_k_head = s.n_k_head, .n_v_head = s.n_v_head, .k_dim = s.k_dim, .v_dim = s.v_dim,
                 .kv_tiled = s.kv_tiled, .scale = float(1.0 / std::sqrt(double(s.k_dim)))});
  f.tap_tensor("delta_out", il, core);
  be.gated_rms_norm({.out = core, .x = core, .z = z, .weight = w.norm, .group = s.v_dim, .eps = f.cfg.rms_eps});
  f.tap_tensor("final_output", il, core);
  const Mat t = f.mat(f.arena.t, f.cfg.n_embd);
  be.matmul({.out = t, .x = core, .w = w.out});
  f.tap_tensor("linear_attn_out", il, t);
  return t;
}

}  // namespace brisk
