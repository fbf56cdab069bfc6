// The BERT family of text encoders (BertModel, RobertaModel, XLMRobertaModel and their
// *ForSequenceClassification cross-encoders), over packed inputs (models/embed_forward.h):
//   x = LN(tok_embd[id] + token_types[type] + position_embd[pos])     LN: token_embd_norm
//   per layer (post-norm):
//     x = LN(x + attn(x))          bidirectional within the input, q/k/v/o with biases, head_dim^-1/2
//     x = LN(x + down(act(up(x))))  act: GELU (erf, or tanh for gelu_new / gelu_pytorch_tanh)
//   out = x (the last hidden state of every token)
//   classification head (cls.* tensors present): score = cls.output(tanh(cls(x[first token]))),
//   or cls.output(x[first token]) in llama.cpp's files that dropped the pooler (no cls.weight)
// Positions: row i of an input reads position_embd[position_offset + i]; RoBERTa-style
// checkpoints from Hugging Face start at pad_token_id + 1 (their padding_idx), GGUF files
// (llama.cpp's converter drops those rows) and BERT at 0. Sizes come from config.json
// (hidden_size, num_hidden_layers, num_attention_heads, intermediate_size,
// max_position_embeddings, type_vocab_size, layer_norm_eps, hidden_act, pad_token_id) or the
// GGUF keys of llama.cpp's `bert` architecture. Tensor names are llama.cpp's.
#include <cmath>

#include "core/error.h"
#include "formats/gguf.h"
#include "models/encoder_blocks.h"
#include "models/name_map.h"
#include "models/registry.h"

namespace brisk {

namespace {

// Hugging Face names (with or without the bert. / roberta. model prefix) -> llama.cpp's GGUF names.
std::string bert_name(const std::string& hf_in) {
  std::string hf = hf_in;
  for (const char* p : {"bert.", "roberta.", "model."})
    if (hf.rfind(p, 0) == 0) {
      hf = hf.substr(std::string(p).size());
      break;
    }
  static const std::pair<const char*, const char*> kGlobal[] = {
      {"embeddings.word_embeddings.weight", "token_embd.weight"},
      {"embeddings.token_type_embeddings.weight", "token_types.weight"},
      {"embeddings.position_embeddings.weight", "position_embd.weight"},
      {"embeddings.LayerNorm.weight", "token_embd_norm.weight"},
      {"embeddings.LayerNorm.bias", "token_embd_norm.bias"},
      // Classification heads: BERT's pooler + classifier, RoBERTa's classifier.dense + out_proj.
      {"pooler.dense.weight", "cls.weight"},
      {"pooler.dense.bias", "cls.bias"},
      {"classifier.dense.weight", "cls.weight"},
      {"classifier.dense.bias", "cls.bias"},
      {"classifier.out_proj.weight", "cls.output.weight"},
      {"classifier.out_proj.bias", "cls.output.bias"},
      {"classifier.weight", "cls.output.weight"},
      {"classifier.bias", "cls.output.bias"},
  };
  static const LayerNameRow kLayer[] = {
      {"attention.self.query.", "attn_q."},
      {"attention.self.key.", "attn_k."},
      {"attention.self.value.", "attn_v."},
      {"attention.output.dense.", "attn_output."},
      {"attention.output.LayerNorm.", "attn_output_norm."},
      {"intermediate.dense.", "ffn_up."},
      {"output.dense.", "ffn_down."},
      {"output.LayerNorm.", "layer_output_norm."},
  };
  for (const auto& [from, to] : kGlobal)
    if (hf == from) return to;
  return layer_name_map(hf, "encoder.layer.", kLayer);
}

UnaryOp bert_activation(const std::string& name) {
  if (name == "gelu" || name.empty()) return UnaryOp::gelu_erf;
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") return UnaryOp::gelu_tanh;
  fail("bert config: unsupported hidden_act '", name, "' (gelu, gelu_new, gelu_pytorch_tanh)");
}

struct BertLayer {
  AttentionWeights attn;     // q, k, v, o [d, d] with biases
  NormWeights attn_norm;     // [d] after the attention's residual
  FfnWeights ffn;            // up [n_ff, d], down [d, n_ff] with biases
  NormWeights out_norm;      // [d] after the MLP's residual
};

class Bert final : public ArchModel {
 public:
  Bert(const ModelConfig& cfg, WeightStore& ws, bool hf_roberta) {
    const int32_t d = cfg.n_embd;
    BRISK_CHECK(cfg.position_embedding_type.empty() || cfg.position_embedding_type == "absolute",
                "bert config: position_embedding_type '", cfg.position_embedding_type,
                "' is not supported (absolute)");
    act_ = bert_activation(cfg.activation_function);
    eps_ = cfg.norm_eps;
    shape_ = {.n_embd = d, .n_head = cfg.n_head, .n_head_kv = cfg.n_head, .head_dim = cfg.head_dim};
    tok_embd_ = ws.matrix("token_embd.weight", d, cfg.n_vocab);
    const StoredTensor* pos = ws.find("position_embd.weight");
    BRISK_CHECK(pos && pos->ne.size() == 2, "bert: position_embd.weight (embeddings.position_embeddings) is missing");
    spec_.n_pos = int32_t(pos->ne[1]);
    pos_embd_ = ws.matrix("position_embd.weight", d, spec_.n_pos);
    if (const StoredTensor* t = ws.find("token_types.weight")) {
      BRISK_CHECK(t->ne.size() == 2, "bert: token_types.weight is not a matrix");
      spec_.n_type = int32_t(t->ne[1]);
      type_embd_ = ws.matrix("token_types.weight", d, spec_.n_type);
    }
    embd_norm_ = layer_norm_load(ws, "token_embd_norm.", d);
    layers_.resize(size_t(cfg.n_layer));
    const AttentionLoadSpec biases{.qkv_bias = Need::required, .out_bias = Need::required};
    for (int il = 0; il < cfg.n_layer; ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      BertLayer& L = layers_[size_t(il)];
      L.attn = attention_load(ws, p + "attn_", shape_, biases);
      L.attn_norm = layer_norm_load(ws, p + "attn_output_norm.", d);
      L.ffn = ffn_load(ws, p + "ffn_", d, cfg.n_ff);
      L.out_norm = layer_norm_load(ws, p + "layer_output_norm.", d);
    }
    if (const StoredTensor* o = ws.find("cls.output.weight")) {
      BRISK_CHECK(o->ne.size() == 2 && o->ne[0] == int64_t(d) && o->ne[1] >= 1,
                  "bert: cls.output.weight (classifier) must be [n_labels, ", d, "]");
      spec_.n_cls = int32_t(o->ne[1]);
      // llama.cpp's converter drops BertForSequenceClassification's pooler (a direct projection).
      cls_dense_ = ws.find("cls.weight") != nullptr;
      if (cls_dense_) {
        cls_ = ws.matrix("cls.weight", d, d);
        cls_bias_ = ws.vector("cls.bias", d);
      }
      cls_out_ = ws.matrix("cls.output.weight", d, spec_.n_cls);
      cls_out_bias_ = ws.vector_opt("cls.output.bias", spec_.n_cls);
    }
    // A RoBERTa checkpoint from Hugging Face keeps the padding rows of its position table.
    spec_.position_offset = hf_roberta ? std::max(0, cfg.pad_token_id) + 1 : 0;
    BRISK_CHECK(spec_.n_pos > spec_.position_offset, "bert: ", spec_.n_pos, " positions leave no room after offset ",
                spec_.position_offset);
    spec_.n_out = d;
    // Per token: h, t, q, k, v, attn [d] and the MLP hidden [n_ff].
    spec_.scratch_floats = 6 * int64_t(d) + cfg.n_ff;
  }

  const EmbedSpec* embedder() const override { return &spec_; }

  void forward(const Forward&) const override {
    fail("bert: an encoder-only model has no causal forward (use it for embeddings or reranking)");
  }

  // See the file comment. f.out is the residual stream.
  void embed(const EmbedForward& f) const override {
    const ModelConfig& cfg = f.cfg;
    Backend& be = f.backend;
    const BlockContext c{.backend = be, .tap = f.tap};
    const int64_t d = cfg.n_embd;
    EmbedScratch mat{.next = f.scratch, .rows = f.n_tok};
    const Mat x = f.out, h = mat(d), t = mat(d), q = mat(d), k = mat(d), v = mat(d), attn = mat(d), hidden = mat(cfg.n_ff);
    be.embedding({.out = x, .table = tok_embd_, .ids = f.ids});
    be.embedding({.out = h, .table = pos_embd_, .ids = f.pos});
    be.add({.out = x, .a = x, .b = h});
    if (spec_.n_type > 0) {
      be.embedding({.out = h, .table = type_embd_, .ids = f.types});
      be.add({.out = x, .a = x, .b = h});
    }
    layer_norm(c, x, x, embd_norm_, eps_, "inp_embd", -1);
    for (int il = 0; il < int(layers_.size()); ++il) {
      const BertLayer& L = layers_[size_t(il)];
      full_attention(c, {.out = t, .x = x, .q = q, .k = k, .v = v, .attn = attn, .w = &L.attn, .shape = shape_,
                         .n_seq = f.n_seq, .seq_start = f.seq_start},
                     il);
      // t (a matmul's output) is not read after the residual adds: b_dead.
      be.add({.out = x, .a = x, .b = t, .b_dead = true});
      layer_norm(c, x, x, L.attn_norm, eps_, "attn_out_norm", il);
      ffn(c, {.out = t, .x = x, .hidden = hidden, .w = &L.ffn, .act = act_}, il);
      be.add({.out = x, .a = x, .b = t, .b_dead = true});
      layer_norm(c, x, x, L.out_norm, eps_, "l_out", il);
    }
    if (f.cls.rows == 0) return;
    BRISK_CHECK(spec_.n_cls > 0, "bert: the model has no classification head");
    BRISK_CHECK(f.cls.rows == f.n_seq && f.cls.cols == spec_.n_cls && f.cls_scratch.rows == f.n_seq,
                "bert: classification output must be [", f.n_seq, ", ", spec_.n_cls, "]");
    // The first token of each input, its dense + tanh in the (now free) scratch rows of h: a
    // matmul must not write the rows it reads (F32 weights read x in place).
    const Mat pooled{.data = h.data, .rows = f.n_seq, .cols = d};
    be.get_rows({.out = f.cls_scratch, .x = x, .rows = f.seq_start});
    if (cls_dense_) {
      be.matmul({.out = pooled, .x = f.cls_scratch, .w = cls_, .bias = cls_bias_});
      be.unary({.out = pooled, .x = pooled, .op = UnaryOp::tanh});
    }
    be.matmul({.out = f.cls, .x = cls_dense_ ? pooled : f.cls_scratch, .w = cls_out_, .bias = cls_out_bias_});
    f.tap_tensor("cls_out", -1, f.cls);
  }

 private:
  EmbedSpec spec_;
  AttentionShape shape_;
  UnaryOp act_ = UnaryOp::gelu_erf;
  float eps_ = 1e-12f;
  Weight tok_embd_;                 // [n_vocab, d]
  Weight pos_embd_;                 // [n_pos, d]
  Weight type_embd_;                // [n_type, d]
  NormWeights embd_norm_;           // [d]
  std::vector<BertLayer> layers_;
  bool cls_dense_ = false;          // cls.weight present (else cls.output reads the first token)
  Weight cls_;                      // [d, d]
  const float* cls_bias_ = nullptr; // [d]
  Weight cls_out_;                  // [n_cls, d]
  const float* cls_out_bias_ = nullptr;  // [n_cls]
};

void bert_sanitize(ModelConfig& c) {
  // The MLP activation travels in activation_function (hidden_act names only decoder MLPs).
  // GGUF files carry none (llama.cpp's bert is GELU); a config.json without hidden_act has
  // BertConfig's "gelu" (hf_config_defaults).
  if (c.activation_function.empty()) c.activation_function = c.from_gguf ? "gelu" : c.hidden_act;
  c.hidden_act = "silu";  // unused
  c.n_head_kv = c.n_head;
  if (c.norm_eps <= 0.0f) c.norm_eps = 1e-12f;
  c.sliding_window = 0;
  c.tie_embeddings = true;  // no LM head
}

// llama.cpp writes RoBERTa / XLM-RoBERTa checkpoints as `bert` files without the padding rows of
// the position table (the first pad_token_id + 1), and the context length without them.
void roberta_convert_tensors(ModelConfig& cfg, ConvertTensors& t) {
  auto it = t.find("position_embd.weight");
  BRISK_CHECK(it != t.end() && it->second.ne.size() == 2, "convert: roberta: embeddings.position_embeddings is missing");
  const uint64_t offset = uint64_t(std::max(0, cfg.pad_token_id) + 1), d = it->second.ne[0], rows = it->second.ne[1];
  BRISK_CHECK(rows > offset, "convert: roberta: ", rows, " position rows leave none after the padding offset ", offset);
  it->second.f.erase(it->second.f.begin(), it->second.f.begin() + int64_t(offset * d));
  it->second.ne[1] = rows - offset;
  cfg.n_ctx_train = int32_t(rows - offset);
}

// llama.cpp's bert loader requires the attention's direction.
void bert_convert_keys(const ModelConfig&, const std::string& arch, gguf::Writer& w) {
  w.set(arch + ".attention.causal", gguf::Value::from_bool(false));
}

std::unique_ptr<ArchModel> bert_build(const ModelConfig& cfg, WeightStore& ws) {
  return std::make_unique<Bert>(cfg, ws, cfg.arch == "roberta" && !cfg.from_gguf);
}

}  // namespace

const ArchEntry& arch_bert() {
  static const ArchEntry e{
      .name = "bert",
      .hf_architectures = {"BertModel", "BertForSequenceClassification"},
      .hf_model_types = {"bert"},
      .gguf_names = {"bert"},
      .hf_name_map = &bert_name,
      .hf_config_defaults = R"({"hidden_act": "gelu", "layer_norm_eps": 1e-12, "pad_token_id": 0})",  // BertConfig
      .sanitize = &bert_sanitize,
      .build = &bert_build,
      .convert = {.arch = "bert", .keys = &bert_convert_keys, .tokenizer = "bert"},
  };
  return e;
}

const ArchEntry& arch_roberta() {
  static const ArchEntry e{
      .name = "roberta",
      .hf_architectures = {"RobertaModel", "XLMRobertaModel", "RobertaForSequenceClassification",
                           "XLMRobertaForSequenceClassification"},
      .hf_model_types = {"roberta", "xlm-roberta"},
      .gguf_names = {},
      .hf_name_map = &bert_name,
      // RobertaConfig / XLMRobertaConfig
      .hf_config_defaults = R"({"hidden_act": "gelu", "layer_norm_eps": 1e-12, "pad_token_id": 1})",
      .sanitize = &bert_sanitize,
      .build = &bert_build,
      // Tokenizers: Unigram (XLM-RoBERTa) is written as t5; RoBERTa's byte-level BPE is left out.
      .convert = {.arch = "bert", .tensors = &roberta_convert_tensors, .keys = &bert_convert_keys, .tokenizer = "t5"},
  };
  return e;
}

}  // namespace brisk
