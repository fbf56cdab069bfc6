// ModernBERT (ModernBertModel): a pre-norm encoder with rotary positions, alternating global and
// local attention and a GeGLU MLP, over packed inputs (models/embed_forward.h):
//   x = LN(tok_embd[id])                                         LN: token_embd_norm
//   per layer:
//     x = x + o(attn(rope(q), rope(k), v) of LN(x))   attn_norm (layer 0 has none: identity)
//     x = x + down(act(Wi_a(LN(x))) * Wi_b(LN(x)))    ffn_norm; Wi fused [2 n_ff, d]: the activated
//                                                      half first (HF `input, gate = chunk(2)`)
//   out = LN(x)                                                   output_norm (HF final_norm)
// Global layers attend to the whole input with rope base rope_theta (global_rope_theta); local
// layers to the keys at most local_attention / 2 positions away on either side, with rope base
// rope_theta_swa (local_rope_theta). Layer il is global when il % global_attn_every_n_layers == 0
// (or as config.json's layer_types says); GGUF: attention.sliding_window (= local_attention) and
// attention.sliding_window_pattern, llama.cpp's symmetric window. LayerNorms without bias unless
// the checkpoint has one (norm_bias); act from hidden_activation (gelu: GELU with erf).
// Tensor names are llama.cpp's `modern-bert` ones (attn_qkv, attn_output, ffn_up (fused Wi),
// ffn_down, attn_norm, ffn_norm, output_norm).
#include <cmath>

#include "core/error.h"
#include "formats/gguf.h"
#include "models/encoder_blocks.h"
#include "models/name_map.h"
#include "models/registry.h"

namespace brisk {

namespace {

std::string modern_bert_name(const std::string& hf_in) {
  std::string hf = hf_in;
  if (hf.rfind("model.", 0) == 0) hf = hf.substr(6);
  static const std::pair<const char*, const char*> kGlobal[] = {
      {"embeddings.tok_embeddings.weight", "token_embd.weight"},
      {"embeddings.norm.weight", "token_embd_norm.weight"},
      {"embeddings.norm.bias", "token_embd_norm.bias"},
      {"final_norm.weight", "output_norm.weight"},
      {"final_norm.bias", "output_norm.bias"},
  };
  static const LayerNameRow kLayer[] = {
      {"attn_norm.", "attn_norm."}, {"attn.Wqkv.", "attn_qkv."}, {"attn.Wo.", "attn_output."},
      {"mlp_norm.", "ffn_norm."},   {"mlp.Wi.", "ffn_up."},      {"mlp.Wo.", "ffn_down."},
  };
  for (const auto& [from, to] : kGlobal)
    if (hf == from) return to;
  return layer_name_map(hf, "layers.", kLayer);
}

Activation modern_bert_activation(const std::string& name) {
  if (name == "gelu") return Activation::gelu_erf;
  if (name == "gelu_pytorch_tanh" || name == "gelu_new" || name == "gelu_tanh") return Activation::gelu_tanh;
  if (name == "silu" || name == "swish") return Activation::silu;
  fail("modern-bert config: unsupported hidden_activation '", name, "' (gelu, gelu_pytorch_tanh, silu)");
}

// LayerNorm weight [n] with its bias when the checkpoint has one.
NormWeights modern_bert_norm(WeightStore& ws, const std::string& prefix, int64_t n) {
  return NormWeights{.weight = ws.vector(prefix + "weight", n), .bias = ws.vector_opt(prefix + "bias", n)};
}

struct ModernBertLayer {
  bool has_attn_norm = false;
  NormWeights attn_norm;     // [d] (layer 0: none)
  AttentionWeights attn;     // q, k, v, o [d, d] (from the fused attn_qkv)
  NormWeights ffn_norm;      // [d]
  GatedFfnWeights ffn;       // up: fused Wi [2 n_ff, d]; down [d, n_ff]
  bool local = false;        // attends within +-window
};

class ModernBert final : public ArchModel {
 public:
  ModernBert(const ModelConfig& cfg, WeightStore& ws) {
    const int32_t d = cfg.n_embd;
    eps_ = cfg.norm_eps;
    act_ = modern_bert_activation(cfg.hidden_activation);
    half_window_ = cfg.local_attention / 2;
    shape_ = {.n_embd = d, .n_head = cfg.n_head, .n_head_kv = cfg.n_head, .head_dim = cfg.head_dim};
    tok_embd_ = ws.matrix("token_embd.weight", d, cfg.n_vocab);
    embd_norm_ = modern_bert_norm(ws, "token_embd_norm.", d);
    out_norm_ = modern_bert_norm(ws, "output_norm.", d);
    layers_.resize(size_t(cfg.n_layer));
    for (int il = 0; il < cfg.n_layer; ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      ModernBertLayer& L = layers_[size_t(il)];
      L.has_attn_norm = ws.has(p + "attn_norm.weight");
      if (L.has_attn_norm) L.attn_norm = modern_bert_norm(ws, p + "attn_norm.", d);
      L.attn = encoder_attention_load(ws, p, shape_, Need::optional);
      L.ffn_norm = modern_bert_norm(ws, p + "ffn_norm.", d);
      L.ffn = {.up = ws.matrix(p + "ffn_up.weight", d, 2 * int64_t(cfg.n_ff)),
               .down = ws.matrix(p + "ffn_down.weight", cfg.n_ff, d)};
      BRISK_CHECK(!ws.has(p + "ffn_up.bias") && !ws.has(p + "ffn_down.bias"), "modern-bert: MLP biases (", p,
                  "ffn_*.bias, mlp_bias) are not supported");
      L.local = cfg.sliding(il);
    }
    const float theta_local = cfg.rope_theta_swa > 0 ? cfg.rope_theta_swa : cfg.rope_theta;
    rope_global_ = rope_table_build({.n_rot = cfg.n_rot, .theta = cfg.rope_theta, .n_ctx_train = cfg.n_ctx_train,
                                     .scaling = cfg.rope_scaling, .neox = true});
    rope_local_ = rope_table_build({.n_rot = cfg.n_rot, .theta = theta_local, .n_ctx_train = cfg.n_ctx_train,
                                    .scaling = cfg.rope_scaling, .neox = true});  // rope_scaling applies to both kinds
    spec_.n_pos = cfg.n_ctx_train;
    spec_.n_out = d;
    // Per token: the normed input, t, q, k, v, attn [d] and the MLP's two halves [2 n_ff].
    spec_.scratch_floats = 6 * int64_t(d) + 2 * int64_t(cfg.n_ff);
  }

  const EmbedSpec* embedder() const override { return &spec_; }

  void forward(const Forward&) const override {
    fail("modern-bert: an encoder-only model has no causal forward (use it for embeddings)");
  }

  // See the file comment. f.out is the residual stream.
  void embed(const EmbedForward& f) const override {
    const ModelConfig& cfg = f.cfg;
    Backend& be = f.backend;
    const BlockContext c{.backend = be, .tap = f.tap};
    const int64_t d = cfg.n_embd;
    EmbedScratch mat{.next = f.scratch, .rows = f.n_tok};
    const Mat x = f.out, hn = mat(d), t = mat(d), q = mat(d), k = mat(d), v = mat(d), attn = mat(d),
              hidden = mat(2 * cfg.n_ff);
    be.embedding({.out = x, .table = tok_embd_, .ids = f.ids});
    layer_norm(c, x, x, embd_norm_, eps_, "inp_embd", -1);
    for (int il = 0; il < int(layers_.size()); ++il) {
      const ModernBertLayer& L = layers_[size_t(il)];
      if (L.has_attn_norm) layer_norm(c, hn, x, L.attn_norm, eps_, "attn_norm", il);
      full_attention(c, {.out = t, .x = L.has_attn_norm ? hn : x, .q = q, .k = k, .v = v, .attn = attn, .w = &L.attn,
                         .shape = shape_, .n_seq = f.n_seq, .seq_start = f.seq_start,
                         .rope = L.local ? &rope_local_ : &rope_global_, .rope_pos = f.pos,
                         .window = L.local ? half_window_ : 0},
                     il);
      be.add({.out = x, .a = x, .b = t});
      layer_norm(c, hn, x, L.ffn_norm, eps_, "ffn_norm", il);
      gated_ffn(c, {.out = t, .x = hn, .hidden = hidden, .w = &L.ffn, .act = act_}, il);
      be.add({.out = x, .a = x, .b = t});
      f.tap_tensor("l_out", il, x);
    }
    layer_norm(c, x, x, out_norm_, eps_, "final_norm_out", -1);
  }

 private:
  EmbedSpec spec_;
  AttentionShape shape_;
  RopeTable rope_global_, rope_local_;
  Activation act_ = Activation::gelu_erf;
  int32_t half_window_ = 0;
  float eps_ = 1e-5f;
  Weight tok_embd_;                 // [n_vocab, d]
  NormWeights embd_norm_;           // [d]
  NormWeights out_norm_;            // [d]
  std::vector<ModernBertLayer> layers_;
};

void modern_bert_sanitize(ModelConfig& c) {
  // config.json: hidden_activation (read into hidden_act); GGUF: {arch}.hidden_activation, else
  // llama.cpp's default GeGLU.
  if (c.hidden_activation.empty()) c.hidden_activation = c.from_gguf ? "gelu" : c.hidden_act;
  modern_bert_activation(c.hidden_activation);
  c.hidden_act = "silu";  // the gated MLP's activation is hidden_activation
  c.n_head_kv = c.n_head;
  if (c.norm_eps <= 0.0f) c.norm_eps = 1e-5f;
  // The local window: config.json's local_attention, GGUF's sliding_window (llama.cpp writes
  // local_attention there); transformers' own sliding_window attribute is half of it.
  if (c.local_attention <= 0) c.local_attention = c.sliding_window;
  BRISK_CHECK(c.local_attention >= 0, "modern-bert config: negative local_attention");
  c.sliding_window = c.local_attention;
  if (c.swa_pattern <= 0 && !c.layer_types.empty()) {  // the period of config.json's layer_types
    c.swa_pattern = c.n_layer;
    for (int il = 1; il < int(c.layer_types.size()); ++il)
      if (c.layer_types[size_t(il)] == "full_attention") {
        c.swa_pattern = il;
        break;
      }
  }
  if (c.swa_pattern <= 0) c.swa_pattern = 3;  // ModernBertConfig's global_attn_every_n_layers
  if (c.layer_types.empty() && c.n_layer > 0 && c.n_layer <= 65536)
    for (int il = 0; il < c.n_layer; ++il)
      c.layer_types.push_back(il % c.swa_pattern == 0 || c.local_attention == 0 ? "full_attention" : "sliding_attention");
  // A GGUF without rope.freq_base_swa: llama.cpp's loader takes rope.freq_base; config.json:
  // local_rope_theta's default.
  if (c.rope_theta_swa <= 0.0f) c.rope_theta_swa = c.from_gguf ? c.rope_theta : 10000.0f;
  c.tie_embeddings = true;  // no LM head
  c.rope_neox = true;
}

// GGUF holds the global / local pattern as a period: the layer types must follow one.
void modern_bert_check(const ModelConfig& c) {
  for (int il = 0; il < c.n_layer; ++il)
    BRISK_CHECK(c.sliding(il) == (il % c.swa_pattern != 0), "convert: modern-bert layer ", il, " is ",
                c.sliding(il) ? "local" : "global", ", which GGUF's sliding_window_pattern ", c.swa_pattern,
                " cannot say");
}

void modern_bert_keys(const ModelConfig& c, const std::string& arch, gguf::Writer& w) {
  w.set(arch + ".attention.sliding_window_pattern", gguf::Value::from_u32(uint32_t(c.swa_pattern)));
}

std::unique_ptr<ArchModel> modern_bert_build(const ModelConfig& cfg, WeightStore& ws) {
  return std::make_unique<ModernBert>(cfg, ws);
}

}  // namespace

const ArchEntry& arch_modern_bert() {
  static const ArchEntry e{
      .name = "modern-bert",
      .hf_architectures = {"ModernBertModel"},
      .hf_model_types = {"modernbert"},
      .gguf_names = {"modern-bert"},
      .hf_name_map = &modern_bert_name,
      // ModernBertConfig
      .hf_config_defaults = R"({"hidden_activation": "gelu", "norm_eps": 1e-5, "local_attention": 128})",
      .sanitize = &modern_bert_sanitize,
      .build = &modern_bert_build,
      .convert = {.arch = "modern-bert", .check = &modern_bert_check, .keys = &modern_bert_keys, .tokenizer = "gpt2"},
  };
  return e;
}

}  // namespace brisk
