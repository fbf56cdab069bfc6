// Draft sources, the adaptive draft length and the speculative-sampling decision of one verify
// row (see speculative.h).
#include "runtime/speculative.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "core/error.h"

namespace brisk {
namespace {

constexpr int64_t kVocabSlack = 128;  // llama.cpp's SPEC_VOCAB_MAX_SIZE_DIFFERENCE

// Probability of `id` in an id-sorted distribution (0 when absent).
double prob_of(const TokenDistribution& d, int32_t id) {
  auto it = std::lower_bound(d.begin(), d.end(), id, [](const auto& e, int32_t v) { return e.first < v; });
  return it != d.end() && it->first == id ? it->second : 0.0;
}

class NgramDraft final : public DraftSource {
 public:
  explicit NgramDraft(const NgramOptions& o) : opt_(o) {
    BRISK_CHECK(o.ngram_min >= 1 && o.ngram_max >= o.ngram_min && o.ngram_max <= 64, "n-gram lookup: sizes ",
                o.ngram_min, "..", o.ngram_max, " are not 1 <= min <= max <= 64");
  }
  const char* name() const override { return "ngram"; }
  void propose(int32_t, const std::vector<int32_t>& h, int32_t n_max, const SamplerParams&, Draft* out) override {
    out->tokens.clear();
    out->q.clear();
    const int64_t len = int64_t(h.size());
    for (int32_t n = std::min<int32_t>(opt_.ngram_max, int32_t(len) - 1); n >= opt_.ngram_min; --n) {
      // The latest earlier occurrence of the last n tokens that has a continuation.
      for (int64_t start = len - n - 1; start >= 0; --start) {
        if (!std::equal(h.begin() + start, h.begin() + start + n, h.end() - n)) continue;
        const int64_t from = start + n;
        for (int64_t i = from; i < len && int32_t(out->tokens.size()) < n_max; ++i) out->tokens.push_back(h[size_t(i)]);
        return;
      }
    }
  }

 private:
  NgramOptions opt_;
};

class OracleDraft final : public DraftSource {
 public:
  explicit OracleDraft(std::vector<int32_t> tokens) : tokens_(std::move(tokens)) {}
  const char* name() const override { return "oracle"; }
  void propose(int32_t, const std::vector<int32_t>& h, int32_t n_max, const SamplerParams&, Draft* out) override {
    out->tokens.clear();
    out->q.clear();
    if (h.size() > tokens_.size() || !std::equal(h.begin(), h.end(), tokens_.begin())) return;
    for (size_t i = h.size(); i < tokens_.size() && int32_t(out->tokens.size()) < n_max; ++i)
      out->tokens.push_back(tokens_[i]);
  }

 private:
  std::vector<int32_t> tokens_;
};

class ModelDraft final : public DraftSource {
 public:
  explicit ModelDraft(const DraftModelOptions& o) : opt_(o) {
    BRISK_CHECK(o.model != nullptr, "draft model: none given");
    const ModelInfo& info = o.model->info();
    const Tokenizer* tok = o.model->tokenizer();
    const int32_t draft_tokens = tok ? tok->vocab_size() : 0;
    // Same vocabulary, as llama.cpp's check: output rows (and tokenizer sizes, where both have
    // one) within kVocabSlack of each other; checkpoints of one family pad their rows differently
    // (Qwen2.5 0.5B: 151936, 7B: 152064) and GGUF tokenizers may list padding tokens.
    auto near = [](int64_t a, int64_t b) { return std::llabs(a - b) <= kVocabSlack; };
    const bool same = near(info.n_vocab, o.target_n_vocab) &&
                      (draft_tokens == 0 || o.target_n_tokens == 0 || near(draft_tokens, o.target_n_tokens));
    BRISK_CHECK(same, "draft model ", o.name, " has a vocabulary of ", draft_tokens > 0 ? draft_tokens : info.n_vocab,
                " tokens (", info.n_vocab, " output rows), the model ", o.target_name, " has ",
                o.target_n_tokens > 0 ? o.target_n_tokens : o.target_n_vocab, " (", o.target_n_vocab,
                " rows): a draft model must share the target's vocabulary");
    ContextOptions c = o.context;
    c.state_checkpoints = false;  // the draft is cut back by its own snapshots or replayed from 0
    ctx_ = Context::create(o.model, c);
    n_vocab_ = std::min(ctx_->n_vocab(), o.target_n_vocab);
    held_.resize(size_t(ctx_->options().n_seq_max));
  }
  const char* name() const override { return "draft"; }

  void propose(int32_t slot, const std::vector<int32_t>& h, int32_t n_max, const SamplerParams& sampling,
               Draft* out) override {
    out->tokens.clear();
    out->q.clear();
    if (slot < 0 || slot >= int32_t(held_.size()) || h.empty()) return;
    const int32_t n_ctx = ctx_->options().n_ctx;
    n_max = std::min<int64_t>(n_max, int64_t(n_ctx) - int64_t(h.size()));
    if (n_max <= 0) return;
    std::vector<int32_t>& held = held_[size_t(slot)];
    // Keep the longest common prefix (where the context can be cut back to), run the rest.
    size_t keep = 0;
    while (keep < held.size() && keep + 1 < h.size() && held[keep] == h[keep]) ++keep;
    keep = size_t(ctx_->seq_restorable(slot, int32_t(keep)));
    ctx_->seq_truncate(slot, int32_t(keep));
    held.resize(keep);
    const int32_t n_batch = ctx_->options().n_batch;
    for (size_t i = keep; i < h.size();) {
      std::vector<BatchToken> batch;
      for (; i < h.size() && int32_t(batch.size()) < n_batch; ++i)
        batch.push_back({.token = h[i], .pos = int32_t(i), .seq = slot, .want_logits = i + 1 == h.size()});
      ctx_->decode(batch);
    }
    held = h;
    SamplerParams p = sampling;
    p.repeat_penalty = 1.0f;
    p.presence_penalty = p.frequency_penalty = 0.0f;
    p.logit_bias.erase(std::remove_if(p.logit_bias.begin(), p.logit_bias.end(),
                                      [&](const auto& b) { return b.first >= ctx_->n_vocab(); }),
                       p.logit_bias.end());
    p.seed = sampling.seed ^ (0x9E3779B97F4A7C15ull + uint64_t(draws_++));
    // Ids past the target's rows cannot be verified: never drafted.
    for (int32_t id = n_vocab_; id < ctx_->n_vocab(); ++id)
      p.logit_bias.emplace_back(id, -std::numeric_limits<float>::infinity());
    Sampler sampler(p, ctx_->n_vocab());
    TokenDistribution q;
    for (int32_t i = 0; i < n_max; ++i) {
      const float* logits = ctx_->logits(0);
      int32_t tok;
      if (sampler.greedy()) {
        tok = sampler.sample(logits);
      } else {
        sampler.distribution(logits, nullptr, &q);
        tok = sampler.draw(q);
        out->q.push_back(q);
      }
      out->tokens.push_back(tok);
      if (i + 1 == n_max) break;
      ctx_->decode({{.token = tok, .pos = int32_t(held.size()), .seq = slot, .want_logits = true}});
      held.push_back(tok);
    }
  }

 private:
  DraftModelOptions opt_;
  std::unique_ptr<Context> ctx_;
  int32_t n_vocab_ = 0;
  std::vector<std::vector<int32_t>> held_;  // [n_seq] tokens in the draft context's KV per slot
  uint64_t draws_ = 0;
};

}  // namespace

std::unique_ptr<DraftSource> draft_source_ngram(const NgramOptions& options) {
  return std::make_unique<NgramDraft>(options);
}

std::unique_ptr<DraftSource> draft_source_oracle(std::vector<int32_t> tokens) {
  return std::make_unique<OracleDraft>(std::move(tokens));
}

std::unique_ptr<DraftSource> draft_source_model(const DraftModelOptions& options) {
  return std::make_unique<ModelDraft>(options);
}

namespace {
constexpr double kMinWorth = 0.2;   // a draft position is worth a verify row while kept this often
constexpr double kRateDecay = 0.7;  // weight of the previous average
}  // namespace

DraftLength::DraftLength(int32_t draft_min, int32_t draft_max, bool adaptive)
    : min_(std::max(1, draft_min)), max_(std::max(1, draft_max)), adaptive_(adaptive) {
  min_ = std::min(min_, max_);
}

int32_t DraftLength::next() const {
  if (!adaptive_ || rate_ >= 0.999) return max_;
  if (rate_ <= 0.0) return min_;
  const double k = std::floor(std::log(kMinWorth) / std::log(rate_));
  return int32_t(std::clamp<double>(k, double(min_), double(max_)));
}

void DraftLength::update(int32_t drafted, int32_t accepted) {
  if (drafted <= 0) return;
  rate_ = kRateDecay * rate_ + (1.0 - kRateDecay) * double(accepted) / double(drafted);
}

VerifyPick spec_verify_row(Sampler& sampler, const TokenDistribution& p, int32_t draft, const TokenDistribution* q) {
  BRISK_CHECK(!p.empty(), "speculative sampling: the target distribution is empty");
  const double pd = prob_of(p, draft);
  const double qd = q ? prob_of(*q, draft) : 1.0;
  // Keep with probability min(1, p/q); a draft q never proposes has qd == 0 and is kept if p > 0.
  if (pd > 0.0 && (qd <= pd || sampler.uniform() * qd < pd)) return {.accepted = true, .token = draft};
  TokenDistribution residual;
  residual.reserve(p.size());
  for (const auto& [id, pi] : p) {
    const double r = pi - (q ? prob_of(*q, id) : (id == draft ? 1.0 : 0.0));
    if (r > 0.0) residual.emplace_back(id, r);
  }
  return {.accepted = false, .token = residual.empty() ? sampler.draw(p) : sampler.draw(residual)};
}

}  // namespace brisk
