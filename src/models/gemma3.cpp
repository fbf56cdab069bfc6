// Gemma 3 (text): a decoder with "sandwich" norms around attention and MLP,
//   x = embed(ids) * sqrt(n_embd)
//   per layer: x += post_attn_norm(attn(attn_norm(x)));  x += post_ffw_norm(mlp(ffn_norm(x)))
//   logits = softcap(output(rms_norm(x)))
// with per-head q/k RMS norm, GeGLU (gelu_tanh) MLPs, attention scale
// 1/sqrt(query_pre_attn_scalar), and sliding-window layers (layer_types, or every
// sliding_window_pattern-th layer full; llama.cpp's GGUF convention: pattern 6) that use their
// own rope base (rope_theta_swa). Hugging Face stores RMSNorm weights as w - 1 (the norm
// multiplies by 1 + w); llama.cpp's converter already adds the 1, so only HF weights are
// shifted, once, at load.
#include <cmath>
#include <vector>

#include "core/error.h"
#include "models/dense_decoder.h"
#include "models/name_map.h"

namespace brisk {

namespace {

// Gemma's module names: its post_attention_layernorm is the norm after attention (the Llama
// map's ffn_norm is Gemma's pre_feedforward_layernorm).
std::string gemma_hf_to_gguf(const std::string& hf) {
  static const std::pair<const char*, const char*> kNorms[] = {
      {"post_attention_layernorm.weight", "post_attention_norm.weight"},
      {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
      {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
  };
  const std::string prefix = "model.layers.";
  if (hf.compare(0, prefix.size(), prefix) == 0) {
    const size_t dot = hf.find('.', prefix.size());
    if (dot != std::string::npos && dot > prefix.size()) {
      const std::string rest = hf.substr(dot + 1);
      for (const auto& [from, to] : kNorms)
        if (rest == from) {
          const std::string mapped = hf_to_gguf_name(hf.substr(0, dot + 1) + "input_layernorm.weight");
          if (mapped.empty()) return "";
          return mapped.substr(0, mapped.size() - std::string("attn_norm.weight").size()) + to;
        }
    }
  }
  return hf_to_gguf_name(hf);
}

struct GemmaLayer {
  std::vector<float> attn_norm;       // [n_embd]
  AttentionWeights attn;
  std::vector<float> post_attn_norm;  // [n_embd]
  std::vector<float> ffn_norm;        // [n_embd]
  MlpWeights mlp;
  std::vector<float> post_ffw_norm;   // [n_embd]
  std::vector<float> q_norm;          // [head_dim]
  std::vector<float> k_norm;          // [head_dim]
  bool sliding = false;
};

// Whether layer il uses the sliding window: layer_types when the config lists them, else every
// pattern-th layer is full attention (llama.cpp's GGUF convention: pattern 6).
bool gemma_layer_sliding(const ModelConfig& cfg, int il) {
  const int32_t pattern = cfg.swa_pattern > 0 ? cfg.swa_pattern : 6;
  return cfg.sliding_window > 0 && (cfg.layer_types.empty() ? (il + 1) % pattern != 0
                                                            : cfg.layer_types[size_t(il)] == "sliding_attention");
}

// GGUF has no key for the layer pattern: its readers take every sixth layer as full attention.
void gemma_check_gguf(const ModelConfig& cfg) {
  ModelConfig gguf_cfg = cfg;
  gguf_cfg.layer_types.clear();
  gguf_cfg.swa_pattern = 0;
  for (int il = 0; il < cfg.n_layer; ++il)
    BRISK_CHECK(gemma_layer_sliding(cfg, il) == gemma_layer_sliding(gguf_cfg, il), "convert: gemma3 layer ", il,
                " is ", gemma_layer_sliding(cfg, il) ? "sliding" : "full", "-attention, which GGUF cannot say ",
                "(its readers take every sixth layer as full attention)");
}

class Gemma3 final : public ArchModel {
 public:
  Gemma3(const ModelConfig& cfg, WeightStore& ws) {
    // HF: weight w means a gain of (1 + w); GGUF already stores the gain.
    const float shift = cfg.from_gguf ? 0.0f : 1.0f;
    auto gain = [&](const std::string& name, int64_t n) {
      const float* w = ws.vector(name, n);
      std::vector<float> g(w, w + n);
      for (float& v : g) v += shift;
      return g;
    };
    tok_embd_ = ws.matrix("token_embd.weight", cfg.n_embd, cfg.n_vocab);
    output_norm_ = gain("output_norm.weight", cfg.n_embd);
    output_ = model_output_weight(cfg, ws);
    RopeBuildParams rp{.n_rot = cfg.n_rot, .theta = cfg.rope_theta, .n_ctx_train = cfg.n_ctx_train,
                       .scaling = cfg.rope_scaling, .neox = cfg.rope_neox};
    rope_full_ = rope_table_build(rp);
    rp.theta = cfg.rope_theta_swa > 0.0f ? cfg.rope_theta_swa : cfg.rope_theta;
    rp.scaling = RopeScaling{};  // sliding layers use the plain base
    rope_swa_ = rope_table_build(rp);
    layers_.resize(size_t(cfg.n_layer));
    for (int il = 0; il < cfg.n_layer; ++il) {
      GemmaLayer& L = layers_[size_t(il)];
      const std::string p = "blk." + std::to_string(il) + ".";
      L.attn_norm = gain(p + "attn_norm.weight", cfg.n_embd);
      L.attn = attention_weights_load(ws, cfg, il, {});
      L.q_norm = gain(p + "attn_q_norm.weight", cfg.head_dim);
      L.k_norm = gain(p + "attn_k_norm.weight", cfg.head_dim);
      L.attn.q_norm = L.q_norm.data();
      L.attn.k_norm = L.k_norm.data();
      L.post_attn_norm = gain(p + "post_attention_norm.weight", cfg.n_embd);
      L.ffn_norm = gain(p + "ffn_norm.weight", cfg.n_embd);
      L.mlp = mlp_weights_load(ws, cfg, il);
      L.post_ffw_norm = gain(p + "post_ffw_norm.weight", cfg.n_embd);
      L.sliding = gemma_layer_sliding(cfg, il);
    }
  }

  void forward(const Forward& f) const override {
    const ModelConfig& c = f.cfg;
    const Mat x = embed_tokens(f, tok_embd_, float(std::sqrt(double(c.n_embd))));
    for (int il = 0; il < int(layers_.size()); ++il) {
      const GemmaLayer& L = layers_[size_t(il)];
      const AttentionParams ap{.rope = L.sliding ? &rope_swa_ : &rope_full_,
                               .window = L.sliding ? c.sliding_window : 0, .softcap = c.attn_softcap};
      Mat h = norm(f, x, L.attn_norm.data(), "attn_norm", il);
      Mat t = self_attention(f, h, L.attn, ap, il);
      h = norm(f, t, L.post_attn_norm.data(), "attn_post_norm", il);
      residual_add(f, x, h, "ffn_inp", il);
      h = norm(f, x, L.ffn_norm.data(), "ffn_norm", il);
      t = gated_mlp(f, h, L.mlp, il);
      h = norm(f, t, L.post_ffw_norm.data(), "ffn_post_norm", il);
      residual_add(f, x, h, "l_out", il);
    }
    lm_head(f, x, output_norm_.data(), output_);
    if (c.final_softcap > 0.0f && f.batch.n_out > 0) {
      const Mat logits{.data = f.arena.logits, .rows = f.batch.n_out, .cols = c.n_vocab};
      f.backend.softcap({.x = logits, .cap = c.final_softcap});
      f.tap_tensor("result_output_softcapped", -1, logits);
    }
  }

 private:
  Weight tok_embd_;                  // [n_vocab, n_embd]
  std::vector<float> output_norm_;   // [n_embd]
  Weight output_;                    // [n_vocab, n_embd]
  RopeTable rope_full_;
  RopeTable rope_swa_;
  std::vector<GemmaLayer> layers_;
};

}  // namespace

const ArchEntry& arch_gemma3() {
  static const ArchEntry e{
      .name = "gemma3",
      .hf_architectures = {"Gemma3ForCausalLM"},
      .hf_model_types = {"gemma3_text"},
      .gguf_names = {"gemma3"},
      .gguf_rope_neox = true,
      .hf_name_map = &gemma_hf_to_gguf,
      .sanitize = [](ModelConfig& cfg) {
        // GGUF carries no activation key; Gemma's MLP is GeGLU with the tanh gelu.
        if (cfg.from_gguf) cfg.hidden_act = "gelu_pytorch_tanh";
        if (cfg.query_pre_attn_scalar > 0.0f)
          cfg.attn_scale = float(1.0 / std::sqrt(double(cfg.query_pre_attn_scalar)));
      },
      .build = [](const ModelConfig& cfg, WeightStore& ws) -> std::unique_ptr<ArchModel> {
        return std::make_unique<Gemma3>(cfg, ws);
      },
      .convert = {.arch = "gemma3", .norm_shift = 1.0f, .check = &gemma_check_gguf},
  };
  return e;
}

}  // namespace brisk
