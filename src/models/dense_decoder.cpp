#include "models/dense_decoder.h"

#include <vector>

#include "models/moe.h"

namespace brisk {

RopeTable model_rope_table(const ModelConfig& cfg, WeightStore& ws) {
  RopeBuildParams p{.n_rot = cfg.n_rot, .theta = cfg.rope_theta, .n_ctx_train = cfg.n_ctx_train,
                    .scaling = cfg.rope_scaling, .neox = cfg.rope_neox};
  if (const float* f = ws.vector_opt("rope_freqs.weight", cfg.n_rot / 2))
    p.freq_factors.assign(f, f + cfg.n_rot / 2);
  return rope_table_build(p);
}

Weight model_output_weight(const ModelConfig& cfg, const WeightStore& ws) {
  if (!cfg.tie_embeddings) {
    Weight w = ws.matrix_opt("output.weight", cfg.n_embd, cfg.n_vocab);
    if (!w.empty()) return w;
  }
  return ws.matrix("token_embd.weight", cfg.n_embd, cfg.n_vocab);
}

namespace {

struct DenseLayer {
  const float* attn_norm = nullptr;  // [n_embd]
  AttentionWeights attn;
  const float* ffn_norm = nullptr;   // [n_embd]
  MlpWeights mlp;
  bool sparse = false;               // MoE MLP instead of mlp
  MoeWeights moe;
};

class DenseDecoder final : public ArchModel {
 public:
  DenseDecoder(const ModelConfig& cfg, WeightStore& ws, const DenseSpec& spec) {
    tok_embd_ = ws.matrix("token_embd.weight", cfg.n_embd, cfg.n_vocab);
    output_norm_ = ws.vector("output_norm.weight", cfg.n_embd);
    output_ = model_output_weight(cfg, ws);
    rope_ = model_rope_table(cfg, ws);
    layers_.resize(size_t(cfg.n_layer));
    for (int il = 0; il < cfg.n_layer; ++il) {
      DenseLayer& L = layers_[size_t(il)];
      const std::string p = "blk." + std::to_string(il) + ".";
      L.attn_norm = ws.vector(p + "attn_norm.weight", cfg.n_embd);
      L.attn = attention_weights_load(ws, cfg, il, spec.attention);
      L.ffn_norm = ws.vector(p + "ffn_norm.weight", cfg.n_embd);
      L.sparse = spec.moe && moe_layer_present(ws, il);
      if (L.sparse) L.moe = moe_weights_load(ws, cfg, il);
      else L.mlp = mlp_weights_load(ws, cfg, il);
    }
  }

  void forward(const Forward& f) const override {
    const Mat x = embed_tokens(f, tok_embd_);
    const AttentionParams attn{.rope = &rope_, .window = f.cfg.sliding_window};
    for (int il = 0; il < int(layers_.size()); ++il) {
      const DenseLayer& L = layers_[size_t(il)];
      Mat h = norm(f, x, L.attn_norm, "attn_norm", il);
      Mat t = self_attention(f, h, L.attn, attn, il);
      residual_add(f, x, t, "ffn_inp", il);
      h = norm(f, x, L.ffn_norm, "ffn_norm", il);
      t = L.sparse ? moe_mlp(f, h, L.moe, il) : gated_mlp(f, h, L.mlp, il);
      residual_add(f, x, t, "l_out", il);
    }
    lm_head(f, x, output_norm_, output_);
  }

 private:
  Weight tok_embd_;             // [n_vocab, n_embd]
  const float* output_norm_ = nullptr;  // [n_embd]
  Weight output_;               // [n_vocab, n_embd]
  RopeTable rope_;
  std::vector<DenseLayer> layers_;
};

}  // namespace

std::unique_ptr<ArchModel> dense_decoder_build(const ModelConfig& cfg, WeightStore& ws, const DenseSpec& spec) {
  return std::make_unique<DenseDecoder>(cfg, ws, spec);
}

}  // namespace brisk
