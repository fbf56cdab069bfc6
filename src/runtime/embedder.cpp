#include "runtime/embedder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "backend/backend.h"
#include "core/error.h"
#include "core/flags.h"
#include "quant/format.h"
#include "runtime/loaded_model.h"
#include "text/unicode.h"

namespace brisk {

enum class ScoreActivation { sigmoid, identity, tanh };

// sentence-transformers' CrossEncoder activation from config.json ("torch.nn.modules.*.Sigmoid"
// and the like): sentence_transformers.activation_fn (v4+), else sbert_ce_default_activation_function,
// else Sigmoid (the default for one label).
ScoreActivation cross_encoder_activation(const nlohmann::json& config) {
  const nlohmann::json* name = nullptr;
  if (config.is_object()) {
    if (auto st = config.find("sentence_transformers"); st != config.end() && st->is_object() && st->contains("activation_fn"))
      name = &(*st)["activation_fn"];
    else if (auto old = config.find("sbert_ce_default_activation_function"); old != config.end())
      name = &*old;
  }
  if (!name || name->is_null()) return ScoreActivation::sigmoid;
  BRISK_CHECK(name->is_string(), "config.json: the cross-encoder activation must be a class name");
  const std::string s = name->get<std::string>();
  const std::string last = s.substr(s.rfind('.') == std::string::npos ? 0 : s.rfind('.') + 1);
  if (last == "Sigmoid") return ScoreActivation::sigmoid;
  if (last == "Identity") return ScoreActivation::identity;
  if (last == "Tanh") return ScoreActivation::tanh;
  fail("config.json: cross-encoder activation '", s, "' is not supported (Sigmoid, Identity, Tanh)");
}

struct Embedder::Impl {
  std::unique_ptr<Backend> backend;
  const ArchModel* arch = nullptr;
  const EmbedSpec* spec = nullptr;
  const ModelConfig* cfg = nullptr;
  // Backend memory for the largest forward so far.
  int64_t cap_tok = 0, cap_seq = 0;
  float* scratch = nullptr;  // [cap_tok * spec->scratch_floats]
  float* out = nullptr;      // [cap_tok, n_out]
  float* cls = nullptr;      // [cap_seq, n_cls]
  float* cls_scratch = nullptr;  // [cap_seq, n_out]
  // Causal decoders (embedding models, yes/no rerankers): a context of the model's own forward.
  std::unique_ptr<Context> ctx;
  int32_t n_seq = 0;                 // sequences (inputs) per decode call
  int64_t pack_tokens = 0;           // tokens per decode call (an input longer than this runs alone)
  EmbedSpec decoder_spec;            // what `spec` points at for a decoder
  bool yes_no = false;
  ScoreActivation score_act = ScoreActivation::sigmoid;  // of a one-label classification head
  std::vector<float> yes_minus_no;   // [n_embd] LM-head row of "yes" minus the row of "no"
  std::vector<int32_t> prefix_ids, suffix_ids;  // the yes/no prompt's (empty without a tokenizer)
  std::string body_head, body_mid, body_tail;   // body around {query} and {document}

  void release() {
    for (float** p : {&scratch, &out, &cls, &cls_scratch})
      if (*p) {
        backend->free(*p);
        *p = nullptr;
      }
  }
  void reserve(int64_t n_tok, int64_t n_seq) {
    if (n_tok <= cap_tok && n_seq <= cap_seq) return;
    release();
    cap_tok = std::max(n_tok, cap_tok);
    cap_seq = std::max(n_seq, cap_seq);
    auto get = [&](int64_t floats) { return static_cast<float*>(backend->alloc(sizeof(float) * size_t(std::max<int64_t>(floats, 1)))); };
    scratch = get(cap_tok * spec->scratch_floats);
    out = get(cap_tok * spec->n_out);
    cls = get(cap_seq * std::max(1, spec->n_cls));
    cls_scratch = get(cap_seq * spec->n_out);
  }
  ~Impl() {
    if (backend) release();
  }
};

namespace {

const LoadedModel& embed_loaded(const Model& m) {
  const auto* lm = dynamic_cast<const LoadedModel*>(&m);
  BRISK_CHECK(lm, "embeddings: not a loaded model");
  return *lm;
}

bool embed_is_decoder(const LoadedModel& lm) {
  return lm.arch_ && lm.arch_->embedder() == nullptr && lm.arch_->encoder() == nullptr;
}

std::string embed_lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// config.json's first "architectures" entry ("" when absent).
std::string embed_hf_class(const LoadedModel& lm) {
  const nlohmann::json& c = lm.config_json_;
  if (!c.is_object()) return "";
  auto it = c.find("architectures");
  if (it == c.end() || !it->is_array() || it->empty() || !(*it)[0].is_string()) return "";
  return (*it)[0].get<std::string>();
}

// A causal decoder whose files say it is an embedding model: a GGUF {arch}.pooling_type, a
// sentence-transformers folder (modules.json), a backbone checkpoint saved without a head
// (config.json names a bare "...Model" class, as AutoModel saves Qwen3-Embedding), or a decoder
// whose attention runs both ways (use_bidirectional_attention: EmbeddingGemma).
bool embed_decoder_marked(const LoadedModel& lm) {
  if (lm.config().pooling_type >= 0 || lm.config().bidirectional == "all") return true;
  if (lm.folder_.empty()) return false;
  if (std::filesystem::exists(std::filesystem::path(lm.folder_) / "modules.json")) return true;
  const std::string cls = embed_hf_class(lm);
  return cls.size() > 5 && cls.compare(cls.size() - 5, 5, "Model") == 0 && cls.find("For") == std::string::npos;
}

// Row r of a 2-D stored tensor [rows, n] as floats.
std::vector<float> embed_tensor_row(const StoredTensor& t, int64_t r, const std::string& what) {
  BRISK_CHECK(t.ne.size() == 2 && r >= 0 && r < t.ne[1], what, ": ", t.name, " has no row ", r);
  const size_t row_bytes = t.n_bytes / size_t(t.ne[1]);
  std::vector<float> out(size_t(t.ne[0]));
  format_traits(t.type).dequantize_row(static_cast<const uint8_t*>(t.data) + size_t(r) * row_bytes, out.data(), t.ne[0]);
  return out;
}

// A GGUF's Dense layers after the pooling, as llama.cpp's converter writes a sentence-transformers
// pipeline's 2_Dense / 3_Dense (dense_2.weight, dense_3.weight: linear, no bias).
void embed_gguf_dense(const WeightStore& ws, int32_t n_embd, PoolingConfig& p) {
  int64_t width = n_embd;
  for (const char* name : {"dense_2.weight", "dense_3.weight"}) {
    const StoredTensor* t = ws.find(name);
    if (!t) continue;
    BRISK_CHECK(t->ne.size() == 2 && t->ne[0] == width && t->ne[1] > 0 && t->ne[1] <= (1 << 20), "GGUF tensor ", name,
                " must be [n_out, ", width, "] (the Dense layer after the pooling)");
    DenseLayer d{.n_in = int32_t(t->ne[0]), .n_out = int32_t(t->ne[1])};
    for (int64_t r = 0; r < t->ne[1]; ++r) {
      const std::vector<float> row = embed_tensor_row(*t, r, name);
      d.w.insert(d.w.end(), row.begin(), row.end());
    }
    width = d.n_out;
    p.dense.push_back(std::move(d));
  }
}

}  // namespace

const YesNoPrompt& yes_no_default_prompt() {
  static const YesNoPrompt p{
      .prefix = "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
                "Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n",
      .body = "<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}",
      .suffix = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
      .instruction = "Given a web search query, retrieve relevant passages that answer the query",
  };
  return p;
}

bool Embedder::yes_no_detected(const Model& model) {
  const auto* lm = dynamic_cast<const LoadedModel*>(&model);
  if (!lm || !embed_is_decoder(*lm)) return false;
  if (lm->config().pooling_type == 4) {
    const StoredTensor* t = lm->weights_->find("cls.output.weight");
    return t && t->ne.size() == 2 && t->ne[1] == 2;
  }
  if (lm->folder_.empty() || embed_hf_class(*lm).find("ForCausalLM") == std::string::npos) return false;
  std::filesystem::path dir = std::filesystem::path(lm->folder_).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();
  std::vector<std::string> names = {dir.filename().string()};
  // The Hub cache's layout: models--ORG--NAME/snapshots/REVISION.
  if (dir.parent_path().filename() == "snapshots") names.push_back(dir.parent_path().parent_path().filename().string());
  if (lm->config_json_.is_object() && lm->config_json_.contains("_name_or_path") &&
      lm->config_json_["_name_or_path"].is_string())
    names.push_back(lm->config_json_["_name_or_path"].get<std::string>());
  for (const std::string& name : names)
    if (embed_lower(name).find("reranker") != std::string::npos) return true;
  return false;
}

bool Embedder::supports(const Model& model, YesNoMode yes_no) {
  const auto* lm = dynamic_cast<const LoadedModel*>(&model);
  if (!lm || !lm->arch_) return false;
  if (lm->arch_->embedder() != nullptr) return true;
  if (!embed_is_decoder(*lm)) return false;
  if (yes_no == YesNoMode::on || (yes_no == YesNoMode::detect && yes_no_detected(model))) return true;
  return embed_decoder_marked(*lm);
}

int32_t Embedder::mlp_width(const Model& model) { return embed_loaded(model).config().n_ff; }

Embedder::Embedder(std::shared_ptr<const Model> model, const EmbedderOptions& options)
    : model_(std::move(model)), impl_(std::make_unique<Impl>()) {
  BRISK_CHECK(model_ != nullptr, "embeddings: no model");
  const LoadedModel& lm = embed_loaded(*model_);
  BRISK_CHECK(supports(*model_, options.yes_no), "model '", lm.info().architecture,
              "' is not an embedding model (an encoder such as BERT or XLM-RoBERTa, or a decoder whose files mark it "
              "as one: sentence-transformers modules.json, a GGUF pooling_type) nor a yes/no reranker");
  BRISK_CHECK(options.n_batch >= 1, "embeddings: n_batch must be at least 1");
  n_batch_ = options.n_batch;
  if (embed_is_decoder(lm)) {
    init_decoder(options);
    return;
  }
  impl_->backend = make_backend(options.device, options.n_threads);
  impl_->arch = &lm.arch_for(*impl_->backend);
  impl_->spec = impl_->arch->embedder();
  impl_->cfg = &lm.config();
  const ModelConfig& cfg = lm.config();
  if (!lm.folder_.empty()) pooling_ = pooling_config_from_folder(lm.folder_, impl_->spec->n_out);
  else pooling_ = pooling_config_from_gguf(cfg.pooling_type, cfg.arch + ".pooling_type");
  if (impl_->spec->n_cls > 0) impl_->score_act = cross_encoder_activation(lm.config_json_);
  if (lm.folder_.empty()) embed_gguf_dense(*lm.weights_, impl_->spec->n_out, pooling_);
}

void Embedder::init_decoder(const EmbedderOptions& options) {
  Impl& m = *impl_;
  const LoadedModel& lm = embed_loaded(*model_);
  const ModelConfig& cfg = lm.config();
  m.cfg = &cfg;
  m.yes_no = options.yes_no == YesNoMode::on || (options.yes_no == YesNoMode::detect && yes_no_detected(*model_));
  m.decoder_spec = EmbedSpec{.n_out = cfg.n_embd, .n_cls = m.yes_no ? 1 : 0,
                             .n_pos = cfg.n_ctx_train > 0 ? cfg.n_ctx_train : 32768};
  m.spec = &m.decoder_spec;
  if (!lm.folder_.empty()) pooling_ = pooling_config_from_folder(lm.folder_, cfg.n_embd);
  else if (!m.yes_no || cfg.pooling_type != 4) pooling_ = pooling_config_from_gguf(cfg.pooling_type, cfg.arch + ".pooling_type");
  if (lm.folder_.empty() && !m.yes_no) embed_gguf_dense(*lm.weights_, cfg.n_embd, pooling_);
  if (m.yes_no) {
    pooling_.mode = PoolingMode::last;
    pooling_.rank = true;
    // The LM head's rows of "yes" and "no", read before a context lays the weights out for its backend.
    const std::string what = "yes/no reranker";
    const WeightStore& ws = *lm.weights_;
    const Tokenizer* tok = model_->tokenizer();
    std::vector<float> yes, no;
    const StoredTensor* cls = ws.find("cls.output.weight");
    if (cls && options.yes_id < 0 && options.no_id < 0) {
      // llama.cpp's conversion: rows of the LM head named by classifier.output_labels ("yes" then
      // "no"; without the labels, that order).
      const std::vector<std::string>& labels = cfg.cls_labels;
      std::string names;
      for (const std::string& l : labels) {
        if (!names.empty()) names += ", ";
        names += l;
      }
      const int64_t n_rows = labels.empty() ? 2 : int64_t(labels.size());
      BRISK_CHECK(cls->ne.size() == 2 && cls->ne[0] == cfg.n_embd && cls->ne[1] == n_rows, what,
                  ": cls.output.weight must be [", n_rows, ", ", cfg.n_embd, "] (the LM head's rows of ",
                  labels.empty() ? std::string("yes and no") : names, ")");
      auto row_of = [&](const char* label, int64_t fallback) {
        if (labels.empty()) return fallback;
        const auto it = std::find(labels.begin(), labels.end(), label);
        BRISK_CHECK(it != labels.end(), what, ": classifier.output_labels (", names, ") has no \"",
                    label, "\"");
        return int64_t(it - labels.begin());
      };
      yes = embed_tensor_row(*cls, row_of("yes", 0), what);
      no = embed_tensor_row(*cls, row_of("no", 1), what);
    } else {
      const int32_t yes_id = options.yes_id >= 0 ? options.yes_id : tok ? tok->token_id("yes") : -1;
      const int32_t no_id = options.no_id >= 0 ? options.no_id : tok ? tok->token_id("no") : -1;
      BRISK_CHECK(yes_id >= 0 && no_id >= 0, what, ": the ", tok ? "tokenizer has no single token \"yes\" / \"no\"" :
                  "model has no tokenizer to find the \"yes\" / \"no\" tokens", " (give their ids)");
      BRISK_CHECK(yes_id < cfg.n_vocab && no_id < cfg.n_vocab, what, ": yes / no ids ", yes_id, " / ", no_id,
                  " are outside the vocabulary of ", cfg.n_vocab);
      const StoredTensor* head = cfg.tie_embeddings ? nullptr : ws.find("output.weight");
      if (!head) head = ws.find("token_embd.weight");
      BRISK_CHECK(head, what, ": the model has no LM head (output.weight / token_embd.weight)");
      yes = embed_tensor_row(*head, yes_id, what);
      no = embed_tensor_row(*head, no_id, what);
    }
    m.yes_minus_no.resize(yes.size());
    for (size_t i = 0; i < yes.size(); ++i) m.yes_minus_no[i] = yes[i] - no[i];
    const YesNoPrompt& p = yes_no_default_prompt();
    std::string body = p.body;
    const std::string instruction = options.instruction.empty() ? p.instruction : options.instruction;
    body.replace(body.find("{instruction}"), 13, instruction);
    const size_t q = body.find("{query}"), d = body.find("{document}");
    m.body_head = body.substr(0, q);
    m.body_mid = body.substr(q + 7, d - q - 7);
    m.body_tail = body.substr(d + 10);
    if (tok) {
      m.prefix_ids = tok->encode(p.prefix, EncodeOptions{.add_special = false, .parse_special = true});
      m.suffix_ids = tok->encode(p.suffix, EncodeOptions{.add_special = false, .parse_special = true});
    }
  }
  // Inputs run as separate sequences of one batch; the cache holds them for one call only, in
  // F32 so that the vectors are those of the float32 reference.
  // A bidirectional decoder sees each input whole in one forward: the context's forwards hold the
  // longest input, and a call packs at most that many tokens.
  m.n_seq = 64;
  const int32_t ctx_batch = std::min(n_batch_, 2048);
  const bool both_ways = cfg.bidirectional == "all";
  m.pack_tokens = both_ways ? std::max(ctx_batch, max_tokens()) : n_batch_;
  m.ctx = Context::create(model_, ContextOptions{.n_ctx = max_tokens(), .n_seq_max = m.n_seq,
                                                 .n_batch = both_ways ? int32_t(m.pack_tokens) : ctx_batch,
                                                 .kv_type = QuantType::F32, .n_threads = options.n_threads,
                                                 .device = options.device});
  BRISK_CHECK(m.ctx->set_keep_hidden(true), "embeddings: the ", cfg.arch, " context cannot keep hidden states");
}

Embedder::~Embedder() = default;

bool Embedder::yes_no() const { return impl_->yes_no; }

float Embedder::relevance(const std::vector<float>& logits) const {
  BRISK_CHECK(n_cls() == 1 && logits.size() == 1, "the model's classification head has ", n_cls(),
              " labels: a relevance score needs a one-label cross-encoder or a yes/no reranker");
  const float x = logits[0];
  if (impl_->yes_no) return 1.0f / (1.0f + std::exp(-x));  // P(yes) of the softmax over no / yes
  switch (impl_->score_act) {
    case ScoreActivation::identity: return x;
    case ScoreActivation::tanh: return std::tanh(x);
    case ScoreActivation::sigmoid: break;
  }
  return 1.0f / (1.0f + std::exp(-x));
}

EmbedInput Embedder::pair_text(const std::string& query, const std::string& document, bool truncate,
                               const std::string& what) const {
  if (!impl_->yes_no) return pair(tokenize(query), tokenize(document));
  const Tokenizer* tok = model_->tokenizer();
  BRISK_CHECK(tok, "the model has no tokenizer (tokenizer.json in its folder, or tokenizer.ggml.* in its GGUF): "
              "give token ids instead of text");
  const Impl& m = *impl_;
  std::vector<int32_t> body = tok->encode(m.body_head + query + m.body_mid + document + m.body_tail,
                                          EncodeOptions{.add_special = false, .parse_special = false});
  const int64_t room = int64_t(max_tokens()) - int64_t(m.prefix_ids.size() + m.suffix_ids.size());
  if (int64_t(body.size()) > room) {
    BRISK_CHECK(truncate, what, " with the query has ", body.size() + m.prefix_ids.size() + m.suffix_ids.size(),
                " tokens, more than the model's maximum of ", max_tokens());
    BRISK_CHECK(room > 0, "the yes/no prompt leaves no room within the model's maximum of ", max_tokens(), " tokens");
    body.resize(size_t(room));
  }
  EmbedInput in;
  in.ids = m.prefix_ids;
  in.ids.insert(in.ids.end(), body.begin(), body.end());
  in.ids.insert(in.ids.end(), m.suffix_ids.begin(), m.suffix_ids.end());
  return in;
}

int32_t Embedder::dim() const { return pooled_dim(pooling_, impl_->spec->n_out); }
int32_t Embedder::n_cls() const { return impl_->spec->n_cls; }
int32_t Embedder::vocab_size() const { return impl_->cfg->n_vocab; }

int32_t Embedder::max_tokens() const {
  const int32_t positions = impl_->spec->n_pos - impl_->spec->position_offset;
  return pooling_.max_seq_length > 0 ? std::min(positions, pooling_.max_seq_length) : positions;
}

std::vector<int32_t> Embedder::tokenize(const std::string& text) const {
  const Tokenizer* tok = model_->tokenizer();
  BRISK_CHECK(tok, "the model has no tokenizer (tokenizer.json in its folder, or tokenizer.ggml.* in its GGUF): "
              "give token ids instead of text");
  // sentence-transformers lowercases the whole text (prompt included) before tokenizing.
  return tok->encode(pooling_.lower_case ? brisk::text::unicode_lowercase(text) : text,
                     EncodeOptions{.add_special = true, .parse_special = false});
}

EmbedInput Embedder::pair(const std::vector<int32_t>& a, const std::vector<int32_t>& b) const {
  // a and b as tokenize() gives them: leading special tokens, text, trailing ones.
  const Tokenizer* tok = model_->tokenizer();
  if (impl_->yes_no) {
    // The prompt around the two id lists (their own special tokens left out).
    BRISK_CHECK(tok, "a yes/no reranker builds its prompt with the tokenizer, and the model has none: give each "
                "document as the complete prompt's ids");
    auto text = [&](const std::vector<int32_t>& v) {
      size_t lo = 0, hi = v.size();
      while (lo < hi && tok->is_special(v[lo])) ++lo;
      while (hi > lo && tok->is_special(v[hi - 1])) --hi;
      return std::vector<int32_t>(v.begin() + int64_t(lo), v.begin() + int64_t(hi));
    };
    auto plain = [&](const std::string& s) { return tok->encode(s, EncodeOptions{.add_special = false}); };
    EmbedInput in;
    for (const std::vector<int32_t>& part : {impl_->prefix_ids, plain(impl_->body_head), text(a), plain(impl_->body_mid),
                                             text(b), plain(impl_->body_tail), impl_->suffix_ids})
      in.ids.insert(in.ids.end(), part.begin(), part.end());
    return in;
  }
  size_t lead = 0;
  while (tok && lead < b.size() && tok->is_special(b[lead])) ++lead;
  size_t trail = 0;
  while (tok && trail < a.size() && tok->is_special(a[a.size() - 1 - trail])) ++trail;
  EmbedInput in;
  in.ids = a;
  const bool typed = impl_->spec->n_type >= 2;
  if (!typed)  // RoBERTa: the separator twice between the segments
    in.ids.insert(in.ids.end(), a.end() - int64_t(trail), a.end());
  in.types.assign(in.ids.size(), 0);
  in.ids.insert(in.ids.end(), b.begin() + int64_t(lead), b.end());
  in.types.resize(in.ids.size(), typed ? 1 : 0);
  return in;
}

void Embedder::check(const EmbedInput& in, const std::string& what) const {
  BRISK_CHECK(!in.ids.empty(), what, " is empty");
  BRISK_CHECK(int64_t(in.ids.size()) <= max_tokens(), what, " has ", in.ids.size(),
              " tokens, more than the model's maximum of ", max_tokens());
  for (size_t i = 0; i < in.ids.size(); ++i)
    BRISK_CHECK(in.ids[i] >= 0 && in.ids[i] < impl_->cfg->n_vocab, what, ": token id ", in.ids[i], " at ", i,
                " is outside the vocabulary [0, ", impl_->cfg->n_vocab, ")");
  BRISK_CHECK(in.types.empty() || in.types.size() == in.ids.size(), what, ": ", in.types.size(), " token types for ",
              in.ids.size(), " tokens");
  for (int32_t t : in.types)
    BRISK_CHECK(t >= 0 && t < std::max(1, impl_->spec->n_type), what, ": token type ", t, " out of range");
}

void Embedder::run_decoder(const std::vector<EmbedInput>& inputs, std::vector<std::vector<float>>* hidden,
                           std::vector<std::vector<float>>* cls) {
  Impl& m = *impl_;
  const int64_t n_embd = m.cfg->n_embd;
  if (hidden) hidden->assign(inputs.size(), {});
  if (cls) cls->assign(inputs.size(), {});
  std::vector<BatchToken> batch;
  for (size_t first = 0; first < inputs.size();) {
    // Up to n_seq inputs while they fit n_batch tokens (an input longer than that runs alone;
    // the context splits it into forwards of its own n_batch).
    size_t last = first;
    int64_t n_tok = 0;
    while (last < inputs.size() && int64_t(last - first) < m.n_seq &&
           (last == first || n_tok + int64_t(inputs[last].ids.size()) <= m.pack_tokens))
      n_tok += int64_t(inputs[last++].ids.size());
    for (int32_t s = 0; s < m.n_seq; ++s)
      if (m.ctx->seq_length(s) > 0) m.ctx->seq_truncate(s, 0);
    batch.clear();
    for (size_t i = first; i < last; ++i)
      for (size_t t = 0; t < inputs[i].ids.size(); ++t)
        batch.push_back(BatchToken{.token = inputs[i].ids[t], .pos = int32_t(t), .seq = int32_t(i - first)});
    m.ctx->decode(batch);
    int64_t row = 0;
    for (size_t i = first; i < last; ++i) {
      const int64_t len = int64_t(inputs[i].ids.size());
      if (hidden) (*hidden)[i].assign(m.ctx->hidden(int32_t(row)), m.ctx->hidden(int32_t(row)) + len * n_embd);
      if (cls) {
        const float* h = m.ctx->hidden(int32_t(row + len - 1));
        double dot = 0.0;
        for (int64_t c = 0; c < n_embd; ++c) dot += double(h[c]) * double(m.yes_minus_no[size_t(c)]);
        (*cls)[i] = {float(dot)};
      }
      row += len;
    }
    for (int32_t s = 0; s < int32_t(last - first); ++s) m.ctx->seq_truncate(s, 0);
    stats_.tokens += n_tok;
    stats_.forwards += 1;
    first = last;
  }
}

void Embedder::run(const std::vector<EmbedInput>& inputs, std::vector<std::vector<float>>* hidden,
                   std::vector<std::vector<float>>* cls, std::vector<std::vector<float>>* pooled) {
  for (size_t i = 0; i < inputs.size(); ++i) check(inputs[i], "input " + std::to_string(i));
  Impl& m = *impl_;
  if (m.ctx) {
    BRISK_CHECK(!cls || m.yes_no, "the model has no classification head (not a cross-encoder nor a yes/no reranker)");
    run_decoder(inputs, hidden, cls);
    return;
  }
  const EmbedSpec& spec = *m.spec;
  BRISK_CHECK(!cls || spec.n_cls > 0, "the model has no classification head (not a cross-encoder)");
  if (hidden) hidden->assign(inputs.size(), {});
  if (cls) cls->assign(inputs.size(), {});
  if (pooled) pooled->assign(inputs.size(), {});
  std::vector<int32_t> ids, types, pos, start, pick;
  std::vector<float> rows;
  for (size_t first = 0; first < inputs.size();) {
    // Pack inputs in order while they fit n_batch tokens (an input longer than that runs alone).
    size_t last = first;
    int64_t n_tok = 0;
    while (last < inputs.size() && (last == first || n_tok + int64_t(inputs[last].ids.size()) <= n_batch_))
      n_tok += int64_t(inputs[last++].ids.size());
    const int64_t n_seq = int64_t(last - first);
    ids.clear(), types.clear(), pos.clear(), start.assign(1, 0);
    for (size_t i = first; i < last; ++i) {
      const EmbedInput& in = inputs[i];
      ids.insert(ids.end(), in.ids.begin(), in.ids.end());
      for (size_t t = 0; t < in.ids.size(); ++t) {
        types.push_back(in.types.empty() ? 0 : in.types[t]);
        pos.push_back(spec.position_offset + int32_t(t));
      }
      start.push_back(int32_t(ids.size()));
    }
    m.reserve(n_tok, n_seq);
    const Mat out{.data = m.out, .rows = n_tok, .cols = spec.n_out};
    EmbedForward f{.backend = *m.backend, .cfg = *m.cfg, .n_tok = int32_t(n_tok), .n_seq = int32_t(n_seq),
                   .ids = ids.data(), .types = types.data(), .pos = pos.data(), .seq_start = start.data(),
                   .scratch = m.scratch, .out = out};
    if (cls) {
      f.cls = Mat{.data = m.cls, .rows = n_seq, .cols = spec.n_cls};
      f.cls_scratch = Mat{.data = m.cls_scratch, .rows = n_seq, .cols = spec.n_out};
    }
    m.arch->embed(f);
    if (pooled) {
      // One row per input into cls_scratch ([n_seq, n_out]), then one copy of those rows.
      const Mat p{.data = m.cls_scratch, .rows = n_seq, .cols = spec.n_out};
      if (pooling_.mode == PoolingMode::mean) {
        BRISK_CHECK(m.backend->mean_rows({.out = p, .x = out, .n_seq = int32_t(n_seq), .seq_start = start.data()}),
                    "embeddings: the ", m.backend->name(), " backend cannot pool on the device");
      } else {
        pick.resize(size_t(n_seq));
        for (int64_t s = 0; s < n_seq; ++s)
          pick[size_t(s)] = pooling_.mode == PoolingMode::cls ? start[size_t(s)] : start[size_t(s) + 1] - 1;
        m.backend->get_rows({.out = p, .x = out, .rows = pick.data()});
      }
      rows.resize(size_t(n_seq * spec.n_out));
      m.backend->copy(rows.data(), m.cls_scratch, sizeof(float) * rows.size());
      for (int64_t s = 0; s < n_seq; ++s)
        (*pooled)[first + size_t(s)].assign(rows.begin() + s * spec.n_out, rows.begin() + (s + 1) * spec.n_out);
    }
    m.backend->synchronize();
    for (size_t i = first; pooled == nullptr && i < last; ++i) {
      const int64_t s = int64_t(i - first), b = start[size_t(s)], len = start[size_t(s) + 1] - b;
      if (hidden) {
        (*hidden)[i].resize(size_t(len * spec.n_out));
        m.backend->copy((*hidden)[i].data(), m.out + b * spec.n_out, sizeof(float) * size_t(len * spec.n_out));
      }
      if (cls) {
        (*cls)[i].resize(size_t(spec.n_cls));
        m.backend->copy((*cls)[i].data(), m.cls + s * spec.n_cls, sizeof(float) * size_t(spec.n_cls));
      }
    }
    stats_.tokens += n_tok;
    stats_.forwards += 1;
    first = last;
  }
}

std::vector<std::vector<float>> Embedder::hidden(const std::vector<EmbedInput>& inputs) {
  std::vector<std::vector<float>> h;
  run(inputs, &h, nullptr);
  return h;
}

std::vector<std::vector<float>> Embedder::embed(const std::vector<EmbedInput>& inputs, int32_t dimensions) {
  std::vector<std::vector<float>> h;
  const int32_t n_embd = impl_->spec->n_out;
  // An encoder on a device pools there (the mean in double in row order, as pool() does; CLS /
  // last: the row itself) and copies one row per input back instead of every hidden state.
  const PoolingMode mode = pooling_.mode;
  const bool on_device = !impl_->ctx && impl_->backend && impl_->backend->name() != "cpu" &&
                         !flags().no_cuda_pooling &&
                         (mode == PoolingMode::mean || mode == PoolingMode::cls || mode == PoolingMode::last);
  if (on_device) {
    std::vector<std::vector<float>> rows;
    run(inputs, nullptr, nullptr, &rows);
    PoolingConfig rest = pooling_;
    rest.mode = PoolingMode::cls;  // of the one pooled row: the row
    for (size_t i = 0; i < rows.size(); ++i) {
      rows[i] = pool(rest, rows[i].data(), 1, n_embd);
      if (dimensions > 0) rows[i] = truncate_dims(rows[i], dim(), dimensions, pooling_.normalize);
    }
    return rows;
  }
  run(inputs, &h, nullptr);
  for (size_t i = 0; i < h.size(); ++i) {
    h[i] = pool(pooling_, h[i].data(), int64_t(inputs[i].ids.size()), n_embd);
    if (dimensions > 0) h[i] = truncate_dims(h[i], dim(), dimensions, pooling_.normalize);
  }
  return h;
}

std::vector<std::vector<float>> Embedder::classify(const std::vector<EmbedInput>& inputs) {
  std::vector<std::vector<float>> c;
  run(inputs, nullptr, &c);
  return c;
}

}  // namespace brisk
