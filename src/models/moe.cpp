#include "models/moe.h"

#include "core/checked_math.h"
#include "core/error.h"

namespace brisk {

namespace {

std::string moe_blk(int il, const std::string& suffix) { return "blk." + std::to_string(il) + "." + suffix; }

// Views of rows [row0, row0 + n_out) of each expert's slice [n_rows, n_in] of a stacked 3-D
// tensor ne {n_in, n_rows, n_expert}.
std::vector<Weight> stacked_views(const StoredTensor& t, const ModelConfig& cfg, int64_t n_in, int64_t n_rows,
                                  int64_t row0, int64_t n_out) {
  BRISK_CHECK(t.ne.size() == 3 && t.ne[0] == n_in && t.ne[1] == n_rows && t.ne[2] == cfg.n_expert, "tensor ",
              t.name, ": expected shape {", n_in, ", ", n_rows, ", ", cfg.n_expert, "}");
  const auto rb = quant_row_bytes(t.type, uint64_t(n_in));
  BRISK_CHECK(rb.has_value(), "tensor ", t.name, ": rows of ", n_in, " elements are not whole blocks");
  const auto per = checked_mul<uint64_t>(*rb, uint64_t(n_rows));
  const auto total = per ? checked_mul<uint64_t>(*per, uint64_t(cfg.n_expert)) : std::nullopt;
  BRISK_CHECK(total && *total <= t.n_bytes, "tensor ", t.name, ": data is shorter than its shape");
  std::vector<Weight> out;
  for (int32_t e = 0; e < cfg.n_expert; ++e)
    out.push_back(Weight{.type = t.type, .n_in = n_in, .n_out = n_out, .row_bytes = size_t(*rb),
                         .data = static_cast<const uint8_t*>(t.data) + size_t(*per) * size_t(e) +
                                 size_t(*rb) * size_t(row0)});
  return out;
}

// Expert views of `kind` ("gate", "up", "down"), each [n_out, n_in].
std::vector<Weight> expert_views(const WeightStore& ws, const ModelConfig& cfg, int il, const std::string& kind,
                                 int64_t n_in, int64_t n_out) {
  std::vector<Weight> out;
  if (kind != "down") {  // gate and up fused in one stack: gate rows first
    if (const StoredTensor* t = ws.find(moe_blk(il, "ffn_gate_up_exps.weight")))
      return stacked_views(*t, cfg, n_in, 2 * n_out, kind == "gate" ? 0 : n_out, n_out);
  }
  if (const StoredTensor* t = ws.find(moe_blk(il, "ffn_" + kind + "_exps.weight")))
    return stacked_views(*t, cfg, n_in, n_out, 0, n_out);
  for (int32_t e = 0; e < cfg.n_expert; ++e)
    out.push_back(ws.matrix(moe_blk(il, "ffn_" + kind + "_exps." + std::to_string(e) + ".weight"), n_in, n_out));
  return out;
}

}  // namespace

bool moe_layer_present(const WeightStore& ws, int il) { return ws.has(moe_blk(il, "ffn_gate_inp.weight")); }

MoeWeights moe_weights_load(WeightStore& ws, const ModelConfig& cfg, int il) {
  BRISK_CHECK(cfg.n_expert > 0, "layer ", il, " has an MoE router but the config names no experts");
  MoeWeights w{
      .router = ws.matrix(moe_blk(il, "ffn_gate_inp.weight"), cfg.n_embd, cfg.n_expert),
      .gate = expert_views(ws, cfg, il, "gate", cfg.n_embd, cfg.n_ff_exp),
      .up = expert_views(ws, cfg, il, "up", cfg.n_embd, cfg.n_ff_exp),
      .down = expert_views(ws, cfg, il, "down", cfg.n_ff_exp, cfg.n_embd),
      .expert_scale = ws.vector_opt(moe_blk(il, "ffn_down_exps.scale"), cfg.n_expert),
      .shared = {},
      .shared_gate = {},
  };
  if (ws.has(moe_blk(il, "ffn_gate_shexp.weight")) || cfg.n_ff_shexp > 0) {
    BRISK_CHECK(cfg.n_ff_shexp > 0, "layer ", il, " has a shared expert but the config gives no positive ",
                "shared_expert_intermediate_size");
    BRISK_CHECK(cfg.max_n_ff() >= cfg.n_ff_shexp, "model config: MLP size ", cfg.max_n_ff(), " below the shared expert size ",
                cfg.n_ff_shexp, " (the shared expert uses the MLP buffers)");
    w.shared = MlpWeights{
        .gate = ws.matrix(moe_blk(il, "ffn_gate_shexp.weight"), cfg.n_embd, cfg.n_ff_shexp),
        .up = ws.matrix(moe_blk(il, "ffn_up_shexp.weight"), cfg.n_embd, cfg.n_ff_shexp),
        .down = ws.matrix(moe_blk(il, "ffn_down_shexp.weight"), cfg.n_ff_shexp, cfg.n_embd),
    };
    w.shared_gate = ws.matrix_opt(moe_blk(il, "ffn_gate_inp_shexp.weight"), cfg.n_embd, 1);
  }
  return w;
}

Mat moe_mlp(const Forward& f, const Mat& in, const MoeWeights& w, int il, const MoeParams& p) {
  const ModelConfig& c = f.cfg;
  Backend& be = f.backend;
  const Mat logits = f.mat(f.arena.gate, c.n_expert);  // [n_tok, n_expert]
  be.matmul({.out = logits, .x = p.router_in ? *p.router_in : in, .w = w.router});
  f.tap_tensor("ffn_moe_logits", il, logits);
  BRISK_CHECK(!w.expert_scale || be.moe_expert_scale_supported(), "op moe with per-expert scales is not supported on the ",
              be.name(), " backend");
  const bool shared = !w.shared.gate.empty();
  // Tensor parallelism splits every expert's rows (models/tp_shard.h): each rank's output is a
  // partial sum, added over the ranks below; a shared expert is not split.
  const bool tp = f.tp && f.tp->world > 1;
  BRISK_CHECK(!(tp && shared), "moe: layer ", il, " has a shared expert, which tensor parallelism does not split");
  BRISK_CHECK(!shared || (f.arena.t2 && !p.out), "moe: layer ", il,
              " has a shared expert but the arena no second output, or the caller gave an output buffer");
  MoeArgs a{.out = {}, .x = in, .logits = logits, .gate = w.gate.data(), .up = w.up.data(), .down = w.down.data(),
            .n_expert = c.n_expert, .n_used = c.n_expert_used, .norm_topk = c.norm_topk_prob, .act = c.act,
            .expert_scale = w.expert_scale};
  const bool gated = shared && !w.shared_gate.empty();
  const Mat s = f.mat(f.arena.up, 1);  // [n_tok, 1] the shared expert's gate logit
  if (shared && !(f.tap && *f.tap)) {
    // The shared expert as one more expert of the routed launches, where the backend can.
    MoeArgs folded = a;
    folded.shared_gate = &w.shared.gate;
    folded.shared_up = &w.shared.up;
    folded.shared_down = &w.shared.down;
    folded.shared_logit = gated ? s : Mat{};
    if (be.moe_shared_supported(folded)) {
      if (gated) be.matmul({.out = s, .x = in, .w = w.shared_gate});
      folded.out = f.mat(f.arena.t, c.n_embd);
      be.moe(folded);
      return folded.out;
    }
  }
  const Mat routed = f.mat(shared ? f.arena.t2 : p.out ? p.out : f.arena.t, c.n_embd);
  a.out = routed;
  be.moe(a);
  tp_sum_partials(f, routed);
  f.tap_tensor("ffn_moe_out", il, routed);
  if (!shared) return routed;
  const Mat t = gated_mlp(f, in, w.shared, il);  // arena.t
  if (gated) {
    be.matmul({.out = s, .x = in, .w = w.shared_gate});  // arena.up is free again after the shared MLP
    be.sigmoid_mul({.out = t, .x = t, .gate = s});
  }
  f.tap_tensor("ffn_shexp", il, t);
  be.add({.out = t, .a = t, .b = routed});
  f.tap_tensor("ffn_moe_shexp_out", il, t);
  return t;
}

}  // namespace brisk
