#include "runtime/embedder.h"

#include <algorithm>

#include "backend/backend.h"
#include "core/error.h"
#include "runtime/loaded_model.h"

namespace brisk {

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

}  // namespace

bool Embedder::supports(const Model& model) {
  const auto* lm = dynamic_cast<const LoadedModel*>(&model);
  return lm && lm->arch_ && lm->arch_->embedder() != nullptr;
}

int32_t Embedder::mlp_width(const Model& model) { return embed_loaded(model).config().n_ff; }

Embedder::Embedder(std::shared_ptr<const Model> model, const EmbedderOptions& options)
    : model_(std::move(model)), impl_(std::make_unique<Impl>()) {
  BRISK_CHECK(model_ != nullptr, "embeddings: no model");
  const LoadedModel& lm = embed_loaded(*model_);
  BRISK_CHECK(supports(*model_), "model '", lm.info().architecture,
              "' is not an embedding model (an encoder such as BERT or XLM-RoBERTa)");
  BRISK_CHECK(options.n_batch >= 1, "embeddings: n_batch must be at least 1");
  impl_->backend = make_backend(options.device, options.n_threads);
  impl_->arch = &lm.arch_for(*impl_->backend);
  impl_->spec = impl_->arch->embedder();
  impl_->cfg = &lm.config();
  n_batch_ = options.n_batch;
  const ModelConfig& cfg = lm.config();
  if (!lm.folder_.empty()) pooling_ = pooling_config_from_folder(lm.folder_, impl_->spec->n_out);
  else pooling_ = pooling_config_from_gguf(cfg.pooling_type, cfg.arch + ".pooling_type");
}

Embedder::~Embedder() = default;

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
  return tok->encode(text, EncodeOptions{.add_special = true, .parse_special = false});
}

EmbedInput Embedder::pair(const std::vector<int32_t>& a, const std::vector<int32_t>& b) const {
  // a and b as tokenize() gives them: leading special tokens, text, trailing ones.
  const Tokenizer* tok = model_->tokenizer();
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

void Embedder::run(const std::vector<EmbedInput>& inputs, std::vector<std::vector<float>>* hidden,
                   std::vector<std::vector<float>>* cls) {
  for (size_t i = 0; i < inputs.size(); ++i) check(inputs[i], "input " + std::to_string(i));
  Impl& m = *impl_;
  const EmbedSpec& spec = *m.spec;
  BRISK_CHECK(!cls || spec.n_cls > 0, "the model has no classification head (not a cross-encoder)");
  if (hidden) hidden->assign(inputs.size(), {});
  if (cls) cls->assign(inputs.size(), {});
  std::vector<int32_t> ids, types, pos, start;
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
    m.backend->synchronize();
    for (size_t i = first; i < last; ++i) {
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
  run(inputs, &h, nullptr);
  const int32_t n_embd = impl_->spec->n_out;
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
