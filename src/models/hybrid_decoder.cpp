#include "models/hybrid_decoder.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "core/error.h"
#include "models/blocks.h"
#include "models/delta_net.h"
#include "models/dense_decoder.h"
#include "models/moe.h"
#include "models/name_map.h"

namespace brisk {

namespace {

// Layer tensors beyond the Llama map's (suffixes after "model.layers.N." / "blk.N.").
const std::pair<const char*, const char*> kHybridLayer[] = {
    {"linear_attn.in_proj_qkv.weight", "attn_qkv.weight"},
    {"linear_attn.in_proj_z.weight", "attn_gate.weight"},
    {"linear_attn.in_proj_b.weight", "ssm_beta.weight"},
    {"linear_attn.in_proj_a.weight", "ssm_alpha.weight"},
    {"linear_attn.in_proj_qkvz.weight", "ssm_in.weight"},
    {"linear_attn.in_proj_ba.weight", "ssm_ba.weight"},
    {"linear_attn.conv1d.weight", "ssm_conv1d.weight"},
    {"linear_attn.dt_bias", "ssm_dt.bias"},
    {"linear_attn.A_log", "ssm_a"},
    {"linear_attn.norm.weight", "ssm_norm.weight"},
    {"linear_attn.out_proj.weight", "ssm_out.weight"},
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
    {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
    {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
    {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
    {"mlp.experts.gate_up_proj", "ffn_gate_up_exps.weight"},
    {"mlp.experts.down_proj", "ffn_down_exps.weight"},
};

// The MTP head's own tensors (mtp.X -> the nextn names of its first block).
const std::pair<const char*, const char*> kMtpHead[] = {
    {"fc.weight", "nextn.eh_proj.weight"},
    {"pre_fc_norm_embedding.weight", "nextn.enorm.weight"},
    {"pre_fc_norm_hidden.weight", "nextn.hnorm.weight"},
    {"norm.weight", "nextn.shared_head_norm.weight"},
    {"embed_tokens.weight", "nextn.embed_tokens.weight"},
};

// "model.layers.N.rest" -> "blk.N.<mapped rest>", "" when unknown.
std::string layer_name(const std::string& hf) {
  const std::string prefix = "model.layers.";
  if (hf.compare(0, prefix.size(), prefix) != 0) return hf_to_gguf_name(hf);
  const size_t dot = hf.find('.', prefix.size());
  if (dot == std::string::npos) return "";
  const std::string rest = hf.substr(dot + 1);
  for (const auto& [from, to] : kHybridLayer)
    if (rest == from) return "blk." + hf.substr(prefix.size(), dot - prefix.size()) + "." + to;
  return hf_to_gguf_name(hf);
}

// "mtp.J." prefix of the HF MTP names; the build renames it to "blk.{n_layer + J}.".
std::string mtp_prefix(int j) { return "mtp." + std::to_string(j) + "."; }

}  // namespace

std::string hybrid_hf_to_gguf(const std::string& hf) {
  std::string name = hf;
  for (const char* lm : {"model.language_model.", "language_model.model."})
    if (name.compare(0, std::string(lm).size(), lm) == 0) name = "model." + name.substr(std::string(lm).size());
  if (name.compare(0, 10, "model.mtp.") == 0) name = name.substr(6);  // the MTP head under model.
  if (name.compare(0, 4, "mtp.") == 0) {
    const std::string rest = name.substr(4);
    for (const auto& [from, to] : kMtpHead)
      if (rest == from) return mtp_prefix(0) + to;
    const std::string layers = "layers.";
    if (rest.compare(0, layers.size(), layers) != 0) return "";
    const size_t dot = rest.find('.', layers.size());
    if (dot == std::string::npos) return "";
    const std::string j = rest.substr(layers.size(), dot - layers.size());
    const std::string mapped = layer_name("model.layers.0." + rest.substr(dot + 1));
    if (mapped.empty() || j.empty() || j.size() > 3 || j.find_first_not_of("0123456789") != std::string::npos) return "";
    return "mtp." + j + "." + mapped.substr(std::string("blk.0.").size());
  }
  return layer_name(name);  // vision tower and other towers: not mapped, dropped
}

bool hybrid_layer_is_linear(const ModelConfig& cfg, int il) {
  if (!cfg.layer_types.empty()) return cfg.layer_types[size_t(il)] == "linear_attention";
  return (il + 1) % cfg.full_attention_interval != 0;
}

void hybrid_sanitize(ModelConfig& cfg) {
  if (cfg.from_gguf) {
    // llama.cpp counts the MTP blocks in block_count and gives the value head size through
    // ssm.inner_size.
    BRISK_CHECK(cfg.n_nextn >= 0 && cfg.n_nextn < cfg.n_layer, "GGUF key nextn_predict_layers: ", cfg.n_nextn,
                " MTP layers out of range for block_count ", cfg.n_layer);
    cfg.n_layer -= cfg.n_nextn;
    BRISK_CHECK(cfg.linear_n_v_head > 0 && cfg.linear_inner > 0 && cfg.linear_inner % cfg.linear_n_v_head == 0,
                "GGUF key ssm.inner_size: ", cfg.linear_inner, " is not a positive multiple of ssm.time_step_rank ",
                cfg.linear_n_v_head);
    cfg.linear_v_head_dim = cfg.linear_inner / cfg.linear_n_v_head;
    const std::vector<int32_t>& rec = cfg.recurrent_layers;  // covers the MTP blocks too
    if (!rec.empty()) {
      BRISK_CHECK(rec.size() == 1 || int32_t(rec.size()) == cfg.n_layer + cfg.n_nextn,
                  "GGUF key attention.recurrent_layers: ", rec.size(), " entries for ", cfg.n_layer + cfg.n_nextn,
                  " blocks");
      cfg.layer_types.clear();
      for (int il = 0; il < cfg.n_layer; ++il)
        cfg.layer_types.push_back(rec[rec.size() == 1 ? 0 : size_t(il)] ? "linear_attention" : "full_attention");
    }
  }
  if (cfg.full_attention_interval == -1) cfg.full_attention_interval = 4;  // llama.cpp's and transformers' default
  for (std::string& t : cfg.layer_types) {  // transformers' legacy names
    if (t == "mamba") t = "linear_attention";
    if (t == "attention") t = "full_attention";
  }
  BRISK_CHECK(cfg.n_nextn >= 0 && cfg.n_nextn <= 16, "config key mtp_num_hidden_layers: ", cfg.n_nextn,
              " out of range [0, 16]");
  BRISK_CHECK(cfg.linear_n_k_head > 0, "config key linear_num_key_heads: ", cfg.linear_n_k_head, " must be positive");
  BRISK_CHECK(cfg.linear_n_v_head > 0 && cfg.linear_n_v_head % cfg.linear_n_k_head == 0,
              "config key linear_num_value_heads: ", cfg.linear_n_v_head, " is not a positive multiple of ",
              "linear_num_key_heads ", cfg.linear_n_k_head);
  BRISK_CHECK(cfg.linear_k_head_dim > 0 && cfg.linear_k_head_dim <= 1024, "config key linear_key_head_dim: ",
              cfg.linear_k_head_dim, " out of range [1, 1024]");
  BRISK_CHECK(cfg.linear_v_head_dim > 0 && cfg.linear_v_head_dim <= 1024, "config key linear_value_head_dim: ",
              cfg.linear_v_head_dim, " out of range [1, 1024]");
  BRISK_CHECK(cfg.linear_conv_kernel >= 2 && cfg.linear_conv_kernel <= 16, "config key linear_conv_kernel_dim: ",
              cfg.linear_conv_kernel, " out of range [2, 16]");
  BRISK_CHECK(int64_t(cfg.linear_n_v_head) * cfg.linear_k_head_dim * cfg.linear_v_head_dim <= (int64_t(1) << 28),
              "config keys linear_num_value_heads x linear_key_head_dim x linear_value_head_dim: a recurrent state of ",
              int64_t(cfg.linear_n_v_head) * cfg.linear_k_head_dim * cfg.linear_v_head_dim, " floats per layer is too large");
  if (cfg.layer_types.empty()) {
    BRISK_CHECK(cfg.full_attention_interval > 0 && cfg.full_attention_interval <= 65536,
                "config key full_attention_interval: ", cfg.full_attention_interval, " must be positive");
  } else {
    BRISK_CHECK(int32_t(cfg.layer_types.size()) == cfg.n_layer, "config key layer_types: lists ",
                cfg.layer_types.size(), " layers, num_hidden_layers is ", cfg.n_layer);
    for (size_t i = 0; i < cfg.layer_types.size(); ++i)
      BRISK_CHECK(cfg.layer_types[i] == "linear_attention" || cfg.layer_types[i] == "full_attention",
                  "config key layer_types: entry ", i, " '", cfg.layer_types[i],
                  "' is neither linear_attention nor full_attention");
  }
  // transformers rotates int(head_dim * partial_rotary_factor) dims.
  if (!cfg.from_gguf && cfg.n_rot == 0 && cfg.head_dim > 0)
    cfg.n_rot = int32_t(std::floor(double(cfg.head_dim) * double(cfg.partial_rotary)));
  cfg.sliding_window = 0;  // no sliding-window layers in this family
  // Router logits [n_tok, n_expert] and the shared expert use the MLP buffers; MoE checkpoints
  // may have no dense MLP size at all.
  cfg.n_ff = std::max({cfg.n_ff, cfg.n_expert, cfg.n_ff_shexp});
}

namespace {

struct HybridLayer {
  bool linear = false;
  std::vector<float> attn_norm;   // [n_embd] (1 + w applied)
  AttentionWeights attn;          // full-attention layers
  std::vector<float> q_norm;      // [head_dim]
  std::vector<float> k_norm;      // [head_dim]
  DeltaNetWeights delta;          // linear-attention layers
  std::vector<float> post_norm;   // [n_embd]
  bool sparse = false;            // MoE MLP instead of mlp
  MoeWeights moe;
  MlpWeights mlp;
};

// The multi-token-prediction block (run by MtpModel).
struct MtpBlock {
  Weight eh_proj;                        // [n_embd, 2 * n_embd]
  std::vector<float> enorm, hnorm;       // [n_embd]
  std::vector<float> shared_head_norm;   // [n_embd] or empty (the model's output norm)
  Weight shared_head_head;               // [n_vocab, n_embd] or empty (the model's output)
  Weight embed_tokens;                   // [n_vocab, n_embd] or empty (the model's embedding)
  HybridLayer layer;                     // a full-attention layer
};

// The MTP block as a model of its own (vLLM's Qwen3NextMultiTokenPredictor, llama.cpp's nextn
// layer). Row p pairs the target's final-normed hidden state h at position p with the token x
// that followed it (at p + 1) and predicts the token after x; the row sits at position p of the
// block's own KV cache (vLLM's positions):
//   e = rms_norm(embed(x)) * enorm;  g = rms_norm(h) * hnorm
//   y = eh_proj [e ; g]               (embedding half first)
//   y += attn(rms_norm(y)); y += mlp(rms_norm(y))   (one full-attention layer, its own KV cache)
//   logits = output(rms_norm(y) * shared_head_norm)
// The embedding, the final norm (when the block has none) and the LM head are the target's.
// Only the first block runs (chained drafts reuse it, as vLLM does with one MTP layer).
class MtpModel final : public ArchModel {
 public:
  MtpModel(const ModelConfig& target, const MtpBlock& block, const Weight& tok_embd, const std::vector<float>& output_norm,
           const Weight& output, const RopeTable& rope)
      : block_(block), tok_embd_(block.embed_tokens.empty() ? tok_embd : block.embed_tokens),
        output_norm_(block.shared_head_norm.empty() ? output_norm : block.shared_head_norm),
        output_(block.shared_head_head.empty() ? output : block.shared_head_head), rope_(rope) {
    cfg_ = target;
    cfg_.n_layer = 1;
    cfg_.n_nextn = 0;
    cfg_.layer_types = {"full_attention"};
    cfg_.recurrent_layers.clear();
    cfg_.layer_head_dim.clear();
    cfg_.layer_n_head_kv.clear();
    cfg_.layer_n_ff.clear();
  }

  const ModelConfig& config() const { return cfg_; }

  void forward(const Forward& f) const override {
    const ModelConfig& c = f.cfg;
    BRISK_CHECK(f.batch.embd_in != nullptr, "MTP forward: no hidden-state rows given");
    const int64_t n = c.n_embd;
    // [e ; g] in the two halves of the concatenation buffer [n_tok, 2 n_embd].
    float* cat = f.arena.extra.at(kConcat);
    const Mat emb = embed_tokens(f, tok_embd_);
    norm_into(f, Mat{.data = cat, .rows = f.batch.n_tok, .cols = n, .stride = 2 * n}, emb, block_.enorm.data(),
              "mtp_enorm", 0);
    const Mat hid{.data = const_cast<float*>(f.batch.embd_in), .rows = f.batch.n_tok, .cols = n};
    norm_into(f, Mat{.data = cat + n, .rows = f.batch.n_tok, .cols = n, .stride = 2 * n}, hid, block_.hnorm.data(),
              "mtp_hnorm", 0);
    const Mat x = f.mat(f.arena.x, n);
    f.backend.matmul({.out = x, .x = f.mat(cat, 2 * n), .w = block_.eh_proj});
    f.tap_tensor("mtp_eh_proj", 0, x);
    const HybridLayer& L = block_.layer;
    const AttentionParams ap{.rope = &rope_, .gate = f.arena.extra.at(kGate)};
    Mat h = norm(f, x, L.attn_norm.data(), "attn_norm", 0);
    Mat t = self_attention(f, h, L.attn, ap, 0);
    residual_add(f, x, t, "attn_residual", 0);
    h = norm(f, x, L.post_norm.data(), "attn_post_norm", 0);
    t = L.sparse ? moe_mlp(f, h, L.moe, 0) : gated_mlp(f, h, L.mlp, 0);
    residual_add(f, x, t, "l_out", 0);
    lm_head(f, x, output_norm_.data(), output_);
  }

  std::vector<int64_t> extra_arena_widths() const override { return {2 * int64_t(cfg_.n_embd), cfg_.q_width()}; }

 private:
  static constexpr size_t kConcat = 0, kGate = 1;
  ModelConfig cfg_;
  const MtpBlock& block_;
  const Weight& tok_embd_;                 // [n_vocab, n_embd]
  const std::vector<float>& output_norm_;  // [n_embd]
  const Weight& output_;                   // [n_vocab, n_embd]
  const RopeTable& rope_;
};

class HybridDecoder final : public ArchModel {
 public:
  HybridDecoder(const ModelConfig& cfg, WeightStore& ws, const HybridSpec& spec)
      : shape_(DeltaNetShape::of(cfg, cfg.from_gguf && spec.kv_tiled_gguf)) {
    tok_embd_ = ws.matrix("token_embd.weight", cfg.n_embd, cfg.n_vocab);
    output_norm_ = gain(cfg, ws, "output_norm.weight", cfg.n_embd);
    output_ = model_output_weight(cfg, ws);
    rope_ = model_rope_table(cfg, ws);
    layers_.resize(size_t(cfg.n_layer));
    for (int il = 0; il < cfg.n_layer; ++il)
      load_layer(cfg, ws, spec, il, hybrid_layer_is_linear(cfg, il), layers_[size_t(il)]);
    load_mtp(cfg, ws, spec);
    if (!mtp_.empty())
      mtp_model_ = std::make_unique<MtpModel>(cfg, mtp_.front(), tok_embd_, output_norm_, output_, rope_);
  }

  MtpPart mtp() const override {
    if (!mtp_model_) return {};
    return {.arch = mtp_model_.get(), .cfg = &mtp_model_->config()};
  }

  void forward(const Forward& f) const override {
    const ModelConfig& c = f.cfg;
    const Mat x = embed_tokens(f, tok_embd_);
    const DeltaNetBuffers db = delta_net_buffers(f.arena.extra);
    const AttentionParams ap{.rope = &rope_, .gate = f.arena.extra.at(kAttnGate)};
    for (int il = 0; il < c.n_layer; ++il) {
      const HybridLayer& L = layers_[size_t(il)];
      Mat h = norm(f, x, L.attn_norm.data(), "attn_norm", il);
      Mat t = L.linear ? gated_delta_net(f, h, L.delta, shape_, db, il) : self_attention(f, h, L.attn, ap, il);
      residual_add(f, x, t, "attn_residual", il);
      h = norm(f, x, L.post_norm.data(), "attn_post_norm", il);
      t = L.sparse ? moe_mlp(f, h, L.moe, il) : gated_mlp(f, h, L.mlp, il);
      residual_add(f, x, t, "l_out", il);
    }
    lm_head(f, x, output_norm_.data(), output_);
  }

  std::vector<LayerState> layer_states() const override {
    std::vector<LayerState> out;
    for (const HybridLayer& L : layers_)
      out.push_back(L.linear ? LayerState{.kv = false, .recurrent = delta_net_state_floats(shape_)}
                             : LayerState{.kv = true, .recurrent = {}});
    return out;
  }

  std::vector<int64_t> extra_arena_widths() const override {
    std::vector<int64_t> w = delta_net_buffer_widths(shape_);  // extra[0..5]
    w.push_back(q_width_);                                     // extra[kAttnGate]
    return w;
  }

 private:
  static constexpr size_t kAttnGate = 6;

  // A (1 + w) RMSNorm weight: HF stores w, GGUF the gain.
  static std::vector<float> gain(const ModelConfig& cfg, WeightStore& ws, const std::string& name, int64_t n) {
    const float* w = ws.vector(name, n);
    std::vector<float> g(w, w + n);
    if (!cfg.from_gguf)
      for (float& v : g) v += 1.0f;
    return g;
  }

  void load_layer(const ModelConfig& cfg, WeightStore& ws, const HybridSpec& spec, int il, bool linear,
                  HybridLayer& L) {
    const std::string p = "blk." + std::to_string(il) + ".";
    L.linear = linear;
    L.attn_norm = gain(cfg, ws, p + "attn_norm.weight", cfg.n_embd);
    if (linear) {
      L.delta = delta_net_weights_load(ws, shape_, cfg.n_embd, cfg.from_gguf, il);
    } else {
      L.attn = attention_weights_load(ws, cfg, il, {.qk_norm = Need::required, .q_gate = true});
      L.q_norm = gain(cfg, ws, p + "attn_q_norm.weight", cfg.head_dim);
      L.k_norm = gain(cfg, ws, p + "attn_k_norm.weight", cfg.head_dim);
      L.attn.q_norm = L.q_norm.data();
      L.attn.k_norm = L.k_norm.data();
    }
    L.post_norm = gain(cfg, ws, p + "post_attention_norm.weight", cfg.n_embd);
    L.sparse = spec.moe && moe_layer_present(ws, il);
    if (L.sparse) L.moe = moe_weights_load(ws, cfg, il);
    else L.mlp = mlp_weights_load(ws, cfg, il);
    q_width_ = cfg.q_width();
  }

  // GGUF: nextn_predict_layers blocks after the stack (required when the key says so). HF: the
  // mtp.J.* tensors present, renamed to the GGUF block names first.
  void load_mtp(const ModelConfig& cfg, WeightStore& ws, const HybridSpec& spec) {
    int n = cfg.n_nextn;
    if (!cfg.from_gguf) {
      n = 0;
      while (n < 16 && ws.has_prefix(mtp_prefix(n))) {
        ws.rename_prefix(mtp_prefix(n), "blk." + std::to_string(cfg.n_layer + n) + ".");
        ++n;
      }
    }
    for (int j = 0; j < n; ++j) {
      const int il = cfg.n_layer + j;
      const std::string p = "blk." + std::to_string(il) + ".nextn.";
      MtpBlock& m = mtp_.emplace_back();
      m.eh_proj = ws.matrix(p + "eh_proj.weight", 2 * int64_t(cfg.n_embd), cfg.n_embd);
      m.enorm = gain(cfg, ws, p + "enorm.weight", cfg.n_embd);
      m.hnorm = gain(cfg, ws, p + "hnorm.weight", cfg.n_embd);
      if (ws.has(p + "shared_head_norm.weight")) m.shared_head_norm = gain(cfg, ws, p + "shared_head_norm.weight", cfg.n_embd);
      m.shared_head_head = ws.matrix_opt(p + "shared_head_head.weight", cfg.n_embd, cfg.n_vocab);
      m.embed_tokens = ws.matrix_opt(p + "embed_tokens.weight", cfg.n_embd, cfg.n_vocab);
      load_layer(cfg, ws, spec, il, false, m.layer);
    }
  }

  DeltaNetShape shape_;
  int64_t q_width_ = 0;
  Weight tok_embd_;                  // [n_vocab, n_embd]
  std::vector<float> output_norm_;   // [n_embd]
  Weight output_;                    // [n_vocab, n_embd]
  RopeTable rope_;                   // partial: n_rot of head_dim
  std::vector<HybridLayer> layers_;
  std::vector<MtpBlock> mtp_;
  std::unique_ptr<MtpModel> mtp_model_;  // over mtp_.front(); nullptr without MTP weights
};

}  // namespace

std::unique_ptr<ArchModel> hybrid_decoder_build(const ModelConfig& cfg, WeightStore& ws, const HybridSpec& spec) {
  return std::make_unique<HybridDecoder>(cfg, ws, spec);
}

}  // namespace brisk
