// A small deterministic stand-in for the engine, for scheduler and server tests.
// FakeContext keeps, per sequence, the token ids "in its KV" and produces logits that are a
// pure function of that history (a hash of every (position, token) pair), so any mix-up of
// sequences, positions or reused prefixes changes the output. It checks the same things a
// real Context does (sequence index, position == sequence length, token range, batch size).
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/engine_api.h"
#include "runtime/scheduler.h"

namespace brisk::testing {

inline uint64_t fake_mix(uint64_t h, uint64_t v) {
  uint64_t x = h ^ (v * 0x9E3779B97F4A7C15ull);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return x;
}

// Logits of the next token after `history`: [n_vocab], values in [-4, 4).
inline void fake_logits(const std::vector<int32_t>& history, int32_t n_vocab, float* out) {
  uint64_t h = 0x1234567ull;
  for (size_t i = 0; i < history.size(); ++i) h = fake_mix(h, (uint64_t(i) << 32) | uint32_t(history[i]));
  for (int32_t v = 0; v < n_vocab; ++v) {
    const uint64_t x = fake_mix(h, uint64_t(v) + 1);
    out[v] = float(double(x >> 11) / double(1ull << 53) * 8.0 - 4.0);
  }
}

class FakeContext : public Context {
 public:
  // Tokens outside [favored_lo, favored_hi) get logits 50 lower (so a byte-level fake
  // tokenizer produces printable text); the default favors every token.
  explicit FakeContext(ContextOptions options, int32_t n_vocab, int32_t favored_lo = 0, int32_t favored_hi = -1)
      : options_(options), n_vocab_(n_vocab), favored_lo_(favored_lo),
        favored_hi_(favored_hi < 0 ? n_vocab : favored_hi), seqs_(size_t(options.n_seq_max)) {}

  void decode(const std::vector<BatchToken>& batch) override {
    BRISK_CHECK(!batch.empty(), "fake decode: empty batch");
    BRISK_CHECK(int32_t(batch.size()) <= options_.n_batch, "fake decode: batch of ", batch.size(),
                " exceeds n_batch ", options_.n_batch);
    std::vector<std::vector<int32_t>> next = seqs_;
    std::vector<float> logits;
    int32_t rows = 0;
    for (const BatchToken& t : batch) {
      BRISK_CHECK(t.seq >= 0 && t.seq < options_.n_seq_max, "fake decode: bad seq ", t.seq);
      BRISK_CHECK(t.token >= 0 && t.token < n_vocab_, "fake decode: bad token ", t.token);
      auto& h = next[size_t(t.seq)];
      BRISK_CHECK(t.pos == int32_t(h.size()), "fake decode: seq ", t.seq, " pos ", t.pos,
                  " but length ", h.size());
      BRISK_CHECK(t.pos < options_.n_ctx, "fake decode: pos ", t.pos, " beyond n_ctx");
      h.push_back(t.token);
      if (t.want_logits) {
        logits.resize(size_t(rows + 1) * size_t(n_vocab_));
        float* row = logits.data() + size_t(rows) * size_t(n_vocab_);
        fake_logits(h, n_vocab_, row);
        for (int32_t v = 0; v < n_vocab_; ++v)
          if (v < favored_lo_ || v >= favored_hi_) row[v] -= 50.0f;
        ++rows;
      }
    }
    seqs_ = std::move(next);
    logits_ = std::move(logits);
    n_rows_ = rows;
    // Device sampling (emulated): each wanted row drawn by its sampler, only the ids kept.
    ids_mode_ = !next_samplers_.empty();
    if (ids_mode_) {
      BRISK_CHECK(int32_t(next_samplers_.size()) == rows, "fake decode: ", next_samplers_.size(), " samplers for ", rows,
                  " wanted rows");
      ids_.assign(size_t(rows), -1);
      for (int32_t r = 0; r < rows; ++r)
        ids_[size_t(r)] = next_samplers_[size_t(r)]->sample(logits_.data() + size_t(r) * size_t(n_vocab_));
      next_samplers_.clear();
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (ids_mode_) max_device_rows_ = std::max(max_device_rows_, rows);
    batch_sizes_.push_back(int32_t(batch.size()));
    n_decoded_ += batch.size();
  }
  const float* logits(int32_t i) const override {
    BRISK_CHECK(i >= 0 && i < n_rows_, "fake logits: row ", i, " of ", n_rows_);
    BRISK_CHECK(!ids_mode_, "fake logits: the last batch picked its ids on the device");
    return logits_.data() + size_t(i) * size_t(n_vocab_);
  }
  int32_t n_vocab() const override { return n_vocab_; }
  int32_t seq_length(int32_t seq) const override { return int32_t(seqs_.at(size_t(seq)).size()); }
  void seq_truncate(int32_t seq, int32_t n_keep) override {
    auto& h = seqs_.at(size_t(seq));
    BRISK_CHECK(n_keep >= 0 && n_keep <= int32_t(h.size()), "fake truncate: ", n_keep, " of ", h.size());
    h.resize(size_t(windowed_keep(int32_t(h.size()), n_keep)));
  }
  void seq_copy(int32_t src, int32_t dst, int32_t n) override {
    const auto& s = seqs_.at(size_t(src));
    BRISK_CHECK(n >= 0 && n <= int32_t(s.size()), "fake copy: ", n, " of ", s.size());
    seqs_.at(size_t(dst)).assign(s.begin(), s.begin() + windowed_keep(int32_t(s.size()), n));
    std::lock_guard<std::mutex> lock(mu_);
    n_copies_++;
  }
  const ContextOptions& options() const override { return options_; }
  void set_tap(TapFn) override {}  // the fake has no intermediates

  // A backend that samples on the device, emulated: set_next_device_samplers is accepted for
  // samplers a device can run, and the next decode keeps only each wanted row's id (its
  // sampler's draw), as the CUDA backend does.
  void emulate_device_sampling(bool on) { device_sampling_ = on; }
  bool set_next_device_samplers(std::vector<Sampler*> rows) override {
    next_samplers_.clear();
    if (!device_sampling_ || rows.empty()) return false;
    for (Sampler* s : rows)
      if (!s || !s->device_supported()) return false;
    next_samplers_ = std::move(rows);
    return true;
  }
  const int32_t* device_ids() const override { return ids_mode_ && n_rows_ > 0 ? ids_.data() : nullptr; }
  // The most rows one decode picked on the device (a verify group there: more than 1).
  int32_t max_device_rows() const { std::lock_guard<std::mutex> l(mu_); return max_device_rows_; }

  // Like a model whose sliding-window layers keep only the last `window` positions: going back
  // more than that from a sequence's length keeps nothing (0: everything is kept).
  void set_window(int32_t window) { window_ = window; }

  // Observations for tests (thread-safe).
  std::vector<int32_t> batch_sizes() const { std::lock_guard<std::mutex> l(mu_); return batch_sizes_; }
  uint64_t n_decoded() const { std::lock_guard<std::mutex> l(mu_); return n_decoded_; }
  int32_t n_copies() const { std::lock_guard<std::mutex> l(mu_); return n_copies_; }

 private:
  ContextOptions options_;
  int32_t n_vocab_;
  int32_t favored_lo_, favored_hi_;
  std::vector<std::vector<int32_t>> seqs_;
  std::vector<float> logits_;
  int32_t n_rows_ = 0;
  mutable std::mutex mu_;
  std::vector<int32_t> batch_sizes_;
  uint64_t n_decoded_ = 0;
  int32_t n_copies_ = 0;
  int32_t window_ = 0;
  bool device_sampling_ = false, ids_mode_ = false;
  std::vector<Sampler*> next_samplers_;
  std::vector<int32_t> ids_;
  int32_t max_device_rows_ = 0;
  int32_t windowed_keep(int32_t len, int32_t n) const { return window_ > 0 && n < len - window_ ? 0 : n; }
};

// Greedy pick (argmax over allowed tokens, logit_bias applied), the reference for tests that
// do not need the engine's Sampler.
class GreedySampler : public TokenSampler {
 public:
  GreedySampler(const SamplerParams& p, int32_t n_vocab) : params_(p), n_vocab_(n_vocab) {}
  int32_t sample(const float* logits, const std::vector<bool>* allowed) override {
    int32_t best = -1;
    float best_v = 0.0f;
    for (int32_t v = 0; v < n_vocab_; ++v) {
      if (allowed && !(*allowed)[size_t(v)]) continue;
      float x = logits[v];
      for (const auto& [id, b] : params_.logit_bias) if (id == v) x += b;
      if (best < 0 || x > best_v) { best = v; best_v = x; }
    }
    return best < 0 ? 0 : best;
  }
  void accept(int32_t) override {}
 private:
  SamplerParams params_;
  int32_t n_vocab_;
};

inline SamplerFactory greedy_factory() {
  return [](const SamplerParams& p, int32_t n_vocab) -> std::unique_ptr<TokenSampler> {
    return std::make_unique<GreedySampler>(p, n_vocab);
  };
}

// The tokens a greedy decode of `prompt` gives with the fake model, computed directly.
inline std::vector<int32_t> fake_greedy(std::vector<int32_t> prompt, int32_t n, int32_t n_vocab,
                                        const std::vector<int32_t>& stop = {}, int32_t favored_lo = 0,
                                        int32_t favored_hi = -1) {
  if (favored_hi < 0) favored_hi = n_vocab;
  std::vector<int32_t> out;
  std::vector<float> lg(static_cast<size_t>(n_vocab));
  for (int32_t i = 0; i < n; ++i) {
    fake_logits(prompt, n_vocab, lg.data());
    for (int32_t v = 0; v < n_vocab; ++v)
      if (v < favored_lo || v >= favored_hi) lg[size_t(v)] -= 50.0f;
    const int32_t t = int32_t(std::max_element(lg.begin(), lg.end()) - lg.begin());
    if (std::find(stop.begin(), stop.end(), t) != stop.end()) break;
    out.push_back(t);
    prompt.push_back(t);
  }
  return out;
}

}  // namespace brisk::testing
