// NomicBERT (nomic-embed-text): a BERT-shaped post-norm encoder with rotary positions in place of
// the position table and a SwiGLU MLP without biases, over packed inputs (models/embed_forward.h):
//   x = LN(tok_embd[id] + token_types[type])                       LN: token_embd_norm
//   per layer:
//     x = LN(x + o(attn(rope(q), rope(k), v)))   bidirectional within the input, head_dim^-1/2
//     x = LN(x + down(silu(gate(x)) * up(x)))
//   out = x (the last hidden state of every token)
// q / k / v come fused (Wqkv: all q rows, then k, then v) in nomic's checkpoints and llama.cpp's
// `nomic-bert` GGUF files (attn_qkv), or apart; the fused matrix is split once at load. Rotary:
// rotary_emb_fraction of head_dim (GGUF rope.dimension_count), base rotary_emb_base or
// rope_parameters.rope_theta (GGUF rope.freq_base), halves paired (rotate_half; llama.cpp's NEOX).
// Names: nomic's own (emb_ln, encoder.layers.N.attn.Wqkv / out_proj, mlp.fc11 (up) / fc12 (gate)
// / fc2, norm1, norm2) and those of transformers-style ports (layers.N.self_attn.*_proj,
// mlp.*_proj, post_attention_layernorm, post_mlp_layernorm; or BERT-shaped encoder.layer.N.*)
// become llama.cpp's GGUF names.
#include <cmath>

#include "core/error.h"
#include "models/encoder_blocks.h"
#include "models/name_map.h"
#include "models/registry.h"

namespace brisk {

namespace {

std::string nomic_bert_name(const std::string& hf_in) {
  std::string hf = hf_in;
  for (const char* p : {"nomic_bert.", "model.", "bert."})
    if (hf.rfind(p, 0) == 0) {
      hf = hf.substr(std::string(p).size());
      break;
    }
  static const std::pair<const char*, const char*> kGlobal[] = {
      {"embeddings.word_embeddings.weight", "token_embd.weight"},
      {"embeddings.token_type_embeddings.weight", "token_types.weight"},
      {"emb_ln.weight", "token_embd_norm.weight"},
      {"emb_ln.bias", "token_embd_norm.bias"},
      {"embeddings_layernorm.weight", "token_embd_norm.weight"},
      {"embeddings_layernorm.bias", "token_embd_norm.bias"},
      {"embeddings.LayerNorm.weight", "token_embd_norm.weight"},
      {"embeddings.LayerNorm.bias", "token_embd_norm.bias"},
  };
  static const LayerNameRow kLayer[] = {
      {"attn.Wqkv.", "attn_qkv."},
      {"attn.out_proj.", "attn_output."},
      {"self_attn.q_proj.", "attn_q."},
      {"self_attn.k_proj.", "attn_k."},
      {"self_attn.v_proj.", "attn_v."},
      {"self_attn.o_proj.", "attn_output."},
      {"mlp.fc11.", "ffn_up."},
      {"mlp.fc12.", "ffn_gate."},
      {"mlp.fc2.", "ffn_down."},
      {"mlp.up_proj.", "ffn_up."},
      {"mlp.gate_proj.", "ffn_gate."},
      {"mlp.down_proj.", "ffn_down."},
      {"norm1.", "attn_output_norm."},
      {"norm2.", "layer_output_norm."},
      {"post_attention_layernorm.", "attn_output_norm."},
      {"post_mlp_layernorm.", "layer_output_norm."},
      // BERT-shaped ports (encoder.layer.N.attention.self.q_proj, intermediate.gate_proj, ...).
      {"attention.self.q_proj.", "attn_q."},
      {"attention.self.k_proj.", "attn_k."},
      {"attention.self.v_proj.", "attn_v."},
      {"attention.output.dense.", "attn_output."},
      {"attention.output.LayerNorm.", "attn_output_norm."},
      {"intermediate.gate_proj.", "ffn_gate."},
      {"intermediate.up_proj.", "ffn_up."},
      {"output.dense.", "ffn_down."},
      {"output.LayerNorm.", "layer_output_norm."},
  };
  for (const auto& [from, to] : kGlobal)
    if (hf == from) return to;
  // Rotary positions only: a position table some ports keep is not read.
  if (hf == "embeddings.position_embeddings.weight" || hf == "embeddings.position_ids") return "";
  for (const char* prefix : {"encoder.layers.", "encoder.layer.", "layers."})
    if (std::string name = layer_name_map(hf, prefix, kLayer); !name.empty()) return name;
  return "";
}

struct NomicLayer {
  AttentionWeights attn;     // q, k, v, o [d, d], no biases (optional ones are read)
  NormWeights attn_norm;     // [d] after the attention's residual
  GatedFfnWeights ffn;       // gate, up [n_ff, d], down [d, n_ff]
  NormWeights out_norm;      // [d] after the MLP's residual
};

class NomicBert final : public ArchModel {
 public:
  NomicBert(const ModelConfig& cfg, WeightStore& ws) {
    const int32_t d = cfg.n_embd;
    eps_ = cfg.norm_eps;
    shape_ = {.n_embd = d, .n_head = cfg.n_head, .n_head_kv = cfg.n_head, .head_dim = cfg.head_dim};
    tok_embd_ = ws.matrix("token_embd.weight", d, cfg.n_vocab);
    if (const StoredTensor* t = ws.find("token_types.weight")) {
      BRISK_CHECK(t->ne.size() == 2, "nomic-bert: token_types.weight is not a matrix");
      spec_.n_type = int32_t(t->ne[1]);
      type_embd_ = ws.matrix("token_types.weight", d, spec_.n_type);
    }
    embd_norm_ = layer_norm_load(ws, "token_embd_norm.", d);
    layers_.resize(size_t(cfg.n_layer));
    for (int il = 0; il < cfg.n_layer; ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      NomicLayer& L = layers_[size_t(il)];
      L.attn = encoder_attention_load(ws, p, shape_, Need::optional);
      L.attn_norm = layer_norm_load(ws, p + "attn_output_norm.", d);
      L.ffn = {.gate = ws.matrix(p + "ffn_gate.weight", d, cfg.n_ff),
               .up = ws.matrix(p + "ffn_up.weight", d, cfg.n_ff),
               .down = ws.matrix(p + "ffn_down.weight", cfg.n_ff, d)};
      BRISK_CHECK(!ws.has(p + "ffn_up.bias") && !ws.has(p + "ffn_gate.bias") && !ws.has(p + "ffn_down.bias"),
                  "nomic-bert: MLP biases (", p, "ffn_*.bias) are not supported");
      L.out_norm = layer_norm_load(ws, p + "layer_output_norm.", d);
    }
    rope_ = rope_table_build({.n_rot = cfg.n_rot, .theta = cfg.rope_theta, .n_ctx_train = cfg.n_ctx_train,
                              .scaling = cfg.rope_scaling, .neox = true});
    spec_.n_pos = cfg.n_ctx_train;
    spec_.n_out = d;
    // Per token: t, q, k, v, attn [d] and the MLP's gate and up [2 n_ff].
    spec_.scratch_floats = 5 * int64_t(d) + 2 * int64_t(cfg.n_ff);
  }

  const EmbedSpec* embedder() const override { return &spec_; }

  void forward(const Forward&) const override {
    fail("nomic-bert: an encoder-only model has no causal forward (use it for embeddings)");
  }

  // See the file comment. f.out is the residual stream.
  void embed(const EmbedForward& f) const override {
    const ModelConfig& cfg = f.cfg;
    Backend& be = f.backend;
    const BlockContext c{.backend = be, .tap = f.tap};
    const int64_t d = cfg.n_embd;
    EmbedScratch mat{.next = f.scratch, .rows = f.n_tok};
    const Mat x = f.out, t = mat(d), q = mat(d), k = mat(d), v = mat(d), attn = mat(d), hidden = mat(2 * cfg.n_ff);
    be.embedding({.out = x, .table = tok_embd_, .ids = f.ids});
    if (spec_.n_type > 0) {
      be.embedding({.out = t, .table = type_embd_, .ids = f.types});
      be.add({.out = x, .a = x, .b = t});
    }
    layer_norm(c, x, x, embd_norm_, eps_, "inp_embd", -1);
    for (int il = 0; il < int(layers_.size()); ++il) {
      const NomicLayer& L = layers_[size_t(il)];
      full_attention(c, {.out = t, .x = x, .q = q, .k = k, .v = v, .attn = attn, .w = &L.attn, .shape = shape_,
                         .n_seq = f.n_seq, .seq_start = f.seq_start, .rope = &rope_, .rope_pos = f.pos},
                     il);
      be.add({.out = x, .a = x, .b = t});
      layer_norm(c, x, x, L.attn_norm, eps_, "attn_out_norm", il);
      gated_ffn(c, {.out = t, .x = x, .hidden = hidden, .w = &L.ffn, .act = Activation::silu}, il);
      be.add({.out = x, .a = x, .b = t});
      layer_norm(c, x, x, L.out_norm, eps_, "l_out", il);
    }
  }

 private:
  EmbedSpec spec_;
  AttentionShape shape_;
  RopeTable rope_;
  float eps_ = 1e-12f;
  Weight tok_embd_;                 // [n_vocab, d]
  Weight type_embd_;                // [n_type, d]
  NormWeights embd_norm_;           // [d]
  std::vector<NomicLayer> layers_;
};

void nomic_bert_sanitize(ModelConfig& c) {
  // nomic's config: activation_function "swiglu"; transformers' port: hidden_act "silu".
  std::string act = c.activation_function.empty() ? c.hidden_act : c.activation_function;
  BRISK_CHECK(act == "swiglu" || act == "silu" || act == "swish", "nomic-bert config: activation '", act,
              "' is not supported (SwiGLU: swiglu / silu)");
  c.activation_function = "swiglu";
  c.hidden_act = "silu";
  c.n_head_kv = c.n_head;
  if (c.norm_eps <= 0.0f) c.norm_eps = 1e-12f;
  c.sliding_window = 0;
  c.tie_embeddings = true;  // no LM head
  c.rope_neox = true;
  c.position_embedding_type = "rotary";
}

std::unique_ptr<ArchModel> nomic_bert_build(const ModelConfig& cfg, WeightStore& ws) {
  return std::make_unique<NomicBert>(cfg, ws);
}

}  // namespace

const ArchEntry& arch_nomic_bert() {
  static const ArchEntry e{
      .name = "nomic-bert",
      .hf_architectures = {"NomicBertModel"},
      .hf_model_types = {"nomic_bert"},
      .gguf_names = {"nomic-bert"},
      .hf_name_map = &nomic_bert_name,
      // NomicBertConfig switches the engine does not run: pre-norm blocks, interleaved (GPT-J)
      // rotary pairs, xPos, dynamic NTK scaling, the MoE layers of nomic-embed-text-v2-moe.
      .hf_config_fixed = R"({"prenorm": false, "rotary_emb_interleaved": false, "rotary_emb_scale_base": null,
          "rotary_scaling_factor": null, "moe_every_n_layers": 0})",
      .sanitize = &nomic_bert_sanitize,
      .build = &nomic_bert_build,
      .convert = {.arch = "nomic-bert", .tokenizer = "bert"},
  };
  return e;
}

}  // namespace brisk
