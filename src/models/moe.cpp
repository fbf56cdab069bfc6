#include "models/moe.h"

#include "core/checked_math.h"
#include "core/error.h"

namespace brisk {

namespace {

std::string blk(int il, const std::string& suffix) { return "blk." + std::to_string(il) + "." + suffix; }

// Expert views of `kind` ("gate", "up", "down"), each [n_out, n_in].
std::vector<Weight> expert_views(const WeightStore& ws, const ModelConfig& cfg, int il, const std::string& kind,
                                 int64_t n_in, int64_t n_out) {
  std::vector<Weight> out;
  const std::string fused = blk(il, "ffn_gate_up_exps.weight");
  if (const StoredTensor* t = kind != "down" ? ws.find(fused) : nullptr) {
    BRISK_CHECK(t->ne.size() == 3 && t->ne[0] == n_in && t->ne[1] == 2 * n_out && t->ne[2] == cfg.n_expert, "tensor ",
                fused, ": expected shape {", n_in, ", ", 2 * n_out, ", ", cfg.n_expert, "}");
    const auto rb = quant_row_bytes(t->type, uint64_t(n_in));
    BRISK_CHECK(rb.has_value(), "tensor ", fused, ": rows of ", n_in, " elements are not whole blocks");
    const auto per = checked_mul<uint64_t>(*rb, uint64_t(2 * n_out));
    const auto total = per ? checked_mul<uint64_t>(*per, uint64_t(cfg.n_expert)) : std::nullopt;
    BRISK_CHECK(total && *total <= t->n_bytes, "tensor ", fused, ": data is shorter than its shape");
    const size_t skip = kind == "up" ? size_t(*rb) * size_t(n_out) : 0;  // up rows follow the gate rows
    for (int32_t e = 0; e < cfg.n_expert; ++e)
      out.push_back(Weight{.type = t->type, .n_in = n_in, .n_out = n_out, .row_bytes = size_t(*rb),
                           .data = static_cast<const uint8_t*>(t->data) + size_t(*per) * size_t(e) + skip});
    return out;
  }
  const std::string stacked = blk(il, "ffn_" + kind + "_exps.weight");
  if (const StoredTensor* t = ws.find(stacked)) {
    BRISK_CHECK(t->ne.size() == 3 && t->ne[0] == n_in && t->ne[1] == n_out && t->ne[2] == cfg.n_expert, "tensor ",
                stacked, ": expected shape {", n_in, ", ", n_out, ", ", cfg.n_expert, "}");
    const auto rb = quant_row_bytes(t->type, uint64_t(n_in));
    BRISK_CHECK(rb.has_value(), "tensor ", stacked, ": rows of ", n_in, " elements are not whole blocks");
    const auto per = checked_mul<uint64_t>(*rb, uint64_t(n_out));
    const auto total = per ? checked_mul<uint64_t>(*per, uint64_t(cfg.n_expert)) : std::nullopt;
    BRISK_CHECK(total && *total <= t->n_bytes, "tensor ", stacked, ": data is shorter than its shape");
    for (int32_t e = 0; e < cfg.n_expert; ++e)
      out.push_back(Weight{.type = t->type, .n_in = n_in, .n_out = n_out, .row_bytes = size_t(*rb),
                           .data = static_cast<const uint8_t*>(t->data) + size_t(*per) * size_t(e)});
    return out;
  }
  for (int32_t e = 0; e < cfg.n_expert; ++e)
    out.push_back(ws.matrix(blk(il, "ffn_" + kind + "_exps." + std::to_string(e) + ".weight"), n_in, n_out));
  return out;
}

}  // namespace

bool moe_layer_present(const WeightStore& ws, int il) { return ws.has(blk(il, "ffn_gate_inp.weight")); }

MoeWeights moe_weights_load(const WeightStore& ws, const ModelConfig& cfg, int il) {
  BRISK_CHECK(cfg.n_expert > 0, "layer ", il, " has an MoE router but the config names no experts");
  BRISK_CHECK(cfg.n_ff >= cfg.n_expert, "model config: MLP size ", cfg.n_ff, " below the expert count ",
              cfg.n_expert, " (router logits use the MLP buffer)");
  MoeWeights w{
      .router = ws.matrix(blk(il, "ffn_gate_inp.weight"), cfg.n_embd, cfg.n_expert),
      .gate = expert_views(ws, cfg, il, "gate", cfg.n_embd, cfg.n_ff_exp),
      .up = expert_views(ws, cfg, il, "up", cfg.n_embd, cfg.n_ff_exp),
      .down = expert_views(ws, cfg, il, "down", cfg.n_ff_exp, cfg.n_embd),
      .shared = {},
      .shared_gate = {},
  };
  if (ws.has(blk(il, "ffn_gate_shexp.weight")) || cfg.n_ff_shexp > 0) {
    BRISK_CHECK(cfg.n_ff_shexp > 0, "layer ", il, " has a shared expert but the config gives no positive ",
                "shared_expert_intermediate_size");
    BRISK_CHECK(cfg.n_ff >= cfg.n_ff_shexp, "model config: MLP size ", cfg.n_ff, " below the shared expert size ",
                cfg.n_ff_shexp, " (the shared expert uses the MLP buffers)");
    w.shared = MlpWeights{
        .gate = ws.matrix(blk(il, "ffn_gate_shexp.weight"), cfg.n_embd, cfg.n_ff_shexp),
        .up = ws.matrix(blk(il, "ffn_up_shexp.weight"), cfg.n_embd, cfg.n_ff_shexp),
        .down = ws.matrix(blk(il, "ffn_down_shexp.weight"), cfg.n_ff_shexp, cfg.n_embd),
    };
    w.shared_gate = ws.matrix_opt(blk(il, "ffn_gate_inp_shexp.weight"), cfg.n_embd, 1);
  }
  return w;
}

Mat moe_mlp(const Forward& f, const Mat& in, const MoeWeights& w, int il) {
  const ModelConfig& c = f.cfg;
  const Mat logits = f.mat(f.arena.gate, c.n_expert);  // [n_tok, n_expert]
  f.backend.matmul({.out = logits, .x = in, .w = w.router});
  f.tap_tensor("ffn_moe_logits", il, logits);
  const bool shared = !w.shared.gate.empty();
  BRISK_CHECK(!shared || f.arena.t2, "moe: layer ", il, " has a shared expert but the arena no second output");
  const Mat routed = f.mat(shared ? f.arena.t2 : f.arena.t, c.n_embd);
  f.backend.moe({.out = routed, .x = in, .logits = logits, .gate = w.gate.data(), .up = w.up.data(),
                 .down = w.down.data(), .n_expert = c.n_expert, .n_used = c.n_expert_used,
                 .norm_topk = c.norm_topk_prob, .act = c.act});
  f.tap_tensor("ffn_moe_out", il, routed);
  if (!shared) return routed;
  const Mat t = gated_mlp(f, in, w.shared, il);  // arena.t
  if (!w.shared.gate.empty() && !w.shared_gate.empty()) {
    const Mat s = f.mat(f.arena.up, 1);  // [n_tok, 1] free again after the shared MLP
    f.backend.matmul({.out = s, .x = in, .w = w.shared_gate});
    f.backend.sigmoid_mul({.out = t, .x = t, .gate = s});
  }
  f.tap_tensor("ffn_shexp", il, t);
  f.backend.add({.out = t, .a = t, .b = routed});
  f.tap_tensor("ffn_moe_shexp_out", il, t);
  return t;
}

}  // namespace brisk
