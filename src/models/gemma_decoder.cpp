#include "models/gemma_decoder.h"

#include <cmath>
#include <utility>
#include <vector>

#include "core/error.h"
#include "models/dense_decoder.h"
#include "models/moe.h"
#include "models/name_map.h"

namespace brisk {

namespace {

std::string layer_tensor(int il, const char* suffix) { return "blk." + std::to_string(il) + "." + suffix; }

}  // namespace

std::string gemma_hf_to_gguf(const std::string& name) {
  static const std::pair<const char*, const char*> kGlobal[] = {
      {"model.embed_tokens_per_layer.weight", "per_layer_token_embd.weight"},
      {"model.per_layer_model_projection.weight", "per_layer_model_proj.weight"},
      {"model.per_layer_projection_norm.weight", "per_layer_proj_norm.weight"},
  };
  // Per-layer suffix after "model.layers.N." -> suffix after "blk.N." where Gemma differs from
  // the Llama map (its post_attention_layernorm is the norm after attention).
  static const std::pair<const char*, const char*> kLayer[] = {
      {"post_attention_layernorm.weight", "post_attention_norm.weight"},
      {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
      {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
      {"pre_feedforward_layernorm_2.weight", "pre_ffw_norm_2.weight"},
      {"post_feedforward_layernorm_1.weight", "post_ffw_norm_1.weight"},
      {"post_feedforward_layernorm_2.weight", "post_ffw_norm_2.weight"},
      {"layer_scalar", "layer_output_scale.weight"},
      {"per_layer_input_gate.weight", "inp_gate.weight"},
      {"per_layer_projection.weight", "proj.weight"},
      {"post_per_layer_input_norm.weight", "post_norm.weight"},
      {"router.proj.weight", "ffn_gate_inp.weight"},
      {"router.scale", "ffn_gate_inp.scale"},
      {"router.per_expert_scale", "ffn_down_exps.scale"},
      {"experts.gate_up_proj", "ffn_gate_up_exps.weight"},
      {"experts.down_proj", "ffn_down_exps.weight"},
  };
  std::string hf = hf_backbone_name(name);
  const std::string text_model = "model.language_model.";
  if (hf.compare(0, text_model.size(), text_model) == 0) hf = "model." + hf.substr(text_model.size());
  for (const auto& [from, to] : kGlobal)
    if (hf == from) return to;
  const std::string prefix = "model.layers.";
  if (hf.compare(0, prefix.size(), prefix) == 0) {
    const size_t dot = hf.find('.', prefix.size());
    if (dot != std::string::npos && dot > prefix.size() && dot - prefix.size() <= 6) {
      const std::string layer = hf.substr(prefix.size(), dot - prefix.size());
      const std::string rest = hf.substr(dot + 1);
      if (layer.find_first_not_of("0123456789") == std::string::npos)
        for (const auto& [from, to] : kLayer)
          if (rest == from) return "blk." + layer + "." + to;
    }
  }
  return hf_to_gguf_name(hf);
}

int32_t gemma_kv_source(const ModelConfig& cfg, int32_t il) {
  const int32_t first_shared = cfg.n_layer - cfg.n_kv_shared_layers;
  if (cfg.n_kv_shared_layers <= 0 || il < first_shared) return il;
  for (int32_t j = first_shared - 1; j >= 0; --j)
    if (cfg.sliding(j) == cfg.sliding(il)) return j;
  fail("model config: layer ", il, " shares the KV cache of an earlier ", cfg.sliding(il) ? "sliding" : "full",
       "-attention layer, but the first ", first_shared, " layers have none (num_kv_shared_layers ",
       cfg.n_kv_shared_layers, ")");
}

std::vector<LayerKvNeeds> gemma_kv_layers(const ModelConfig& cfg) {
  std::vector<LayerKvNeeds> out;
  for (int32_t il = 0; il < cfg.n_layer; ++il) {
    const int32_t source = gemma_kv_source(cfg, il);
    out.push_back({.n_head_kv = cfg.n_head_kv_of(il), .head_dim = cfg.head_dim_of(il),
                   .window = cfg.sliding(il) ? cfg.sliding_window : 0, .source = source == il ? -1 : source});
  }
  return out;
}

namespace {

struct GemmaLayer {
  bool sliding = false;
  int32_t head_dim = 0;
  int32_t n_head_kv = 0;
  int32_t kv_source = -1;             // the layer whose cache this one reads (itself: its own)
  std::vector<float> attn_norm;       // [n_embd]
  AttentionWeights attn;
  std::vector<float> q_norm;          // [head_dim]
  std::vector<float> k_norm;          // [head_dim] (empty for a KV-shared layer)
  std::vector<float> post_attn_norm;  // [n_embd]
  std::vector<float> ffn_norm;        // [n_embd]
  MlpWeights mlp;
  std::vector<float> post_ffw_norm;   // [n_embd]
  // MoE block beside the MLP (Gemma 4).
  bool moe = false;
  MoeWeights experts;
  std::vector<float> router_gain;     // [n_embd] router.scale / sqrt(n_embd): the router input's norm weight
  std::vector<float> pre_moe_norm;    // [n_embd] pre_ffw_norm_2
  std::vector<float> post_mlp_norm;   // [n_embd] post_ffw_norm_1
  std::vector<float> post_moe_norm;   // [n_embd] post_ffw_norm_2
  // Per-layer embedding input (Gemma 4 "E" models).
  Weight ple_gate;                    // [n_embd_per_layer, n_embd]
  Weight ple_proj;                    // [n_embd, n_embd_per_layer]
  std::vector<float> ple_norm;        // [n_embd]
  float out_scale = 1.0f;             // layer_output_scale
};

class GemmaDecoder final : public ArchModel {
 public:
  GemmaDecoder(const ModelConfig& cfg, WeightStore& ws, const GemmaSpec& spec) : spec_(spec) {
    const float shift = spec.norm_weight_minus_one && !cfg.from_gguf ? 1.0f : 0.0f;
    auto gain = [&](const std::string& name, int64_t n) {
      const float* w = ws.vector(name, n);
      std::vector<float> g(w, w + n);
      for (float& v : g) v += shift;
      return g;
    };
    tok_embd_ = ws.matrix("token_embd.weight", cfg.n_embd, cfg.n_vocab);
    output_norm_ = gain("output_norm.weight", cfg.n_embd);
    output_ = model_output_weight(cfg, ws);
    n_ple_ = cfg.n_embd_per_layer;
    if (n_ple_ > 0) {
      const int64_t width = int64_t(cfg.n_layer) * n_ple_;
      const StoredTensor* t = ws.find("per_layer_token_embd.weight");
      BRISK_CHECK(t && t->ne.size() == 2, "missing tensor per_layer_token_embd.weight (per-layer embeddings of ",
                  n_ple_, " per layer)");
      const int64_t n_vocab_pl = cfg.n_vocab_per_layer > 0 ? cfg.n_vocab_per_layer : t->ne[1];
      BRISK_CHECK(n_vocab_pl >= cfg.n_vocab, "per-layer embeddings cover ", n_vocab_pl, " token ids, the vocabulary has ",
                  cfg.n_vocab);
      ple_tok_embd_ = ws.matrix("per_layer_token_embd.weight", width, n_vocab_pl);
      ple_model_proj_ = ws.matrix("per_layer_model_proj.weight", cfg.n_embd, width);
      ple_proj_norm_ = gain("per_layer_proj_norm.weight", n_ple_);
    }
    layers_.resize(size_t(cfg.n_layer));
    for (int il = 0; il < cfg.n_layer; ++il) load_layer(cfg, ws, il, gain);
  }

  std::vector<LayerKvNeeds> kv_layers(const ModelConfig& cfg) const override { return gemma_kv_layers(cfg); }

  void forward(const Forward& f) const override {
    const ModelConfig& c = f.cfg;
    const Mat x = embed_tokens(f, tok_embd_, float(std::sqrt(double(c.n_embd))));
    if (n_ple_ > 0) per_layer_inputs(f, x);
    for (int il = 0; il < int(layers_.size()); ++il) layer(f, x, il);
    lm_head(f, x, output_norm_.data(), output_);
    if (c.final_softcap > 0.0f && f.batch.n_out > 0) {
      const Mat logits{.data = f.arena.logits, .rows = f.batch.n_out, .cols = c.n_vocab};
      f.backend.softcap({.x = logits, .cap = c.final_softcap});
      f.tap_tensor("result_output_softcapped", -1, logits);
    }
  }

 private:
  template <class Gain>
  void load_layer(const ModelConfig& cfg, WeightStore& ws, int il, Gain& gain) {
    GemmaLayer& L = layers_[size_t(il)];
    L.sliding = cfg.sliding(il);
    L.head_dim = cfg.head_dim_of(il);
    L.n_head_kv = cfg.n_head_kv_of(il);
    L.kv_source = gemma_kv_source(cfg, il);
    const bool own_kv = L.kv_source == il;
    if (!own_kv) {
      const GemmaLayer& S = layers_[size_t(L.kv_source)];
      BRISK_CHECK(S.head_dim == L.head_dim && S.n_head_kv == L.n_head_kv, "layer ", il, " reads the KV cache of layer ",
                  L.kv_source, ", whose heads differ (", S.n_head_kv, " x ", S.head_dim, " vs ", L.n_head_kv, " x ",
                  L.head_dim, ")");
    }
    // Full layers of a K = V model have no attn_v (GGUF: its absence says so).
    const Need v = L.sliding || !spec_.values_are_keys ? Need::required
                   : cfg.from_gguf                       ? Need::optional
                   : cfg.attention_k_eq_v                ? Need::none
                                                         : Need::required;
    L.attn_norm = gain(layer_tensor(il, "attn_norm.weight"), cfg.n_embd);
    L.attn = attention_weights_load(ws, cfg, il, {.k = own_kv ? Need::required : Need::none, .v = v});
    L.q_norm = gain(layer_tensor(il, "attn_q_norm.weight"), L.head_dim);
    L.attn.q_norm = L.q_norm.data();
    if (own_kv) {
      L.k_norm = gain(layer_tensor(il, "attn_k_norm.weight"), L.head_dim);
      L.attn.k_norm = L.k_norm.data();
    }
    L.post_attn_norm = gain(layer_tensor(il, "post_attention_norm.weight"), cfg.n_embd);
    L.ffn_norm = gain(layer_tensor(il, "ffn_norm.weight"), cfg.n_embd);
    L.mlp = mlp_weights_load(ws, cfg, il);
    L.post_ffw_norm = gain(layer_tensor(il, "post_ffw_norm.weight"), cfg.n_embd);
    L.moe = moe_layer_present(ws, il);
    BRISK_CHECK(L.moe || !cfg.moe_block, "missing tensor ", layer_tensor(il, "ffn_gate_inp.weight"),
                " (enable_moe_block: every layer has an MoE block)");
    if (L.moe) {
      L.experts = moe_weights_load(ws, cfg, il);
      L.router_gain = gain(layer_tensor(il, "ffn_gate_inp.scale"), cfg.n_embd);
      for (float& g : L.router_gain) g = float(double(g) / std::sqrt(double(cfg.n_embd)));
      L.pre_moe_norm = gain(layer_tensor(il, "pre_ffw_norm_2.weight"), cfg.n_embd);
      L.post_mlp_norm = gain(layer_tensor(il, "post_ffw_norm_1.weight"), cfg.n_embd);
      L.post_moe_norm = gain(layer_tensor(il, "post_ffw_norm_2.weight"), cfg.n_embd);
    }
    if (n_ple_ > 0) {
      L.ple_gate = ws.matrix(layer_tensor(il, "inp_gate.weight"), cfg.n_embd, n_ple_);
      L.ple_proj = ws.matrix(layer_tensor(il, "proj.weight"), n_ple_, cfg.n_embd);
      L.ple_norm = gain(layer_tensor(il, "post_norm.weight"), cfg.n_embd);
    }
    if (const float* s = ws.vector_opt(layer_tensor(il, "layer_output_scale.weight"), 1)) L.out_scale = *s;
  }

  // arena.per_layer := (rms_norm(per_layer_model_proj(x) / sqrt(n_embd)) + tok_rows * sqrt(n_ple)) / sqrt(2),
  // [n_tok, n_layer * n_ple]: layer il's input is columns [il * n_ple, (il + 1) * n_ple).
  void per_layer_inputs(const Forward& f, const Mat& x) const {
    const ModelConfig& c = f.cfg;
    Backend& be = f.backend;
    const int64_t width = int64_t(c.n_layer) * n_ple_;
    const Mat p = f.mat(f.arena.per_layer, width);
    be.matmul({.out = p, .x = x, .w = ple_model_proj_});
    // rms_norm(y / s) with epsilon e is rms_norm(y) with epsilon e * s^2: the 1 / sqrt(n_embd)
    // scale of the projection goes into the norm's epsilon.
    be.rms_norm({.out = p, .x = p, .weight = ple_proj_norm_.data(), .group = n_ple_,
                 .eps = float(double(c.rms_eps) * double(c.n_embd))});
    const Mat tok = f.mat(f.arena.per_layer_tok, width);
    be.embedding({.out = tok, .table = ple_tok_embd_, .ids = f.batch.ids, .scale = float(std::sqrt(double(n_ple_)))});
    be.add({.out = p, .a = p, .b = tok});
    be.scale({.out = p, .x = p, .scale = float(1.0 / std::sqrt(2.0))});
    f.tap_tensor("inp_per_layer", -1, p);
  }

  void layer(const Forward& f, const Mat& x, int il) const {
    const ModelConfig& c = f.cfg;
    Backend& be = f.backend;
    const GemmaLayer& L = layers_[size_t(il)];
    const AttentionParams ap{.rope = L.sliding ? &spec_.rope_swa : &spec_.rope_full,
                             .window = L.sliding ? c.sliding_window : 0, .softcap = c.attn_softcap,
                             .head_dim = L.head_dim, .n_head_kv = L.n_head_kv, .v_norm = spec_.v_norm};
    Mat h = norm(f, x, L.attn_norm.data(), "attn_norm", il);
    Mat t = self_attention(f, h, L.attn, ap, il);
    h = norm(f, t, L.post_attn_norm.data(), "attn_post_norm", il);
    residual_add(f, x, h, "ffn_inp", il);
    h = norm(f, x, L.ffn_norm.data(), "ffn_norm", il);
    t = gated_mlp(f, h, L.mlp, il);
    if (L.moe) {
      // t := post_ffw_norm_1(mlp) + post_ffw_norm_2(moe(pre_ffw_norm_2(x))), routed on
      // rms_norm(x) * router.scale / sqrt(n_embd).
      norm_into(f, t, t, L.post_mlp_norm.data(), "ffn_mlp", il);
      const Mat r = norm_into(f, f.mat(f.arena.h, c.n_embd), x, L.router_gain.data(), "ffn_moe_router_in", il);
      const Mat e = norm_into(f, f.mat(f.arena.t2, c.n_embd), x, L.pre_moe_norm.data(), "ffn_norm_2", il);
      const Mat m = moe_mlp(f, e, L.experts, il, {.router_in = &r, .out = f.arena.h});
      norm_into(f, m, m, L.post_moe_norm.data(), "ffn_moe", il);
      be.add({.out = t, .a = t, .b = m});
      f.tap_tensor("ffn_moe_combined", il, t);
    }
    h = norm(f, t, L.post_ffw_norm.data(), "ffn_post_norm", il);
    const bool more = n_ple_ > 0 || L.out_scale != 1.0f;
    residual_add(f, x, h, more ? "pe_in" : "l_out", il);
    if (n_ple_ > 0) {
      const Mat g = f.mat(f.arena.per_layer_gate, n_ple_);  // [n_tok, n_ple]
      be.matmul({.out = g, .x = x, .w = L.ple_gate});
      const Mat in{.data = f.arena.per_layer + int64_t(il) * n_ple_, .rows = f.batch.n_tok, .cols = n_ple_,
                   .stride = int64_t(c.n_layer) * n_ple_};
      be.gated_act({.out = g, .gate = g, .up = in, .act = c.act});
      t = f.mat(f.arena.t, c.n_embd);
      be.matmul({.out = t, .x = g, .w = L.ple_proj});
      norm_into(f, t, t, L.ple_norm.data(), "per_layer_embd_out", il);
      residual_add(f, x, t, L.out_scale != 1.0f ? "pe_out" : "l_out", il);
    }
    if (L.out_scale != 1.0f) {
      be.scale({.out = x, .x = x, .scale = L.out_scale});
      f.tap_tensor("l_out", il, x);
    }
  }

  GemmaSpec spec_;
  Weight tok_embd_;                   // [n_vocab, n_embd]
  std::vector<float> output_norm_;    // [n_embd]
  Weight output_;                     // [n_vocab, n_embd]
  int32_t n_ple_ = 0;                 // n_embd_per_layer
  Weight ple_tok_embd_;               // [n_vocab_per_layer, n_layer * n_ple]
  Weight ple_model_proj_;             // [n_layer * n_ple, n_embd]
  std::vector<float> ple_proj_norm_;  // [n_ple]
  std::vector<GemmaLayer> layers_;
};

}  // namespace

std::unique_ptr<ArchModel> gemma_decoder_build(const ModelConfig& cfg, WeightStore& ws, const GemmaSpec& spec) {
  return std::make_unique<GemmaDecoder>(cfg, ws, spec);
}

}  // namespace brisk
