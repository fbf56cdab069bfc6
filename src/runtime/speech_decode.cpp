#include "runtime/speech_decode.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace brisk {

namespace {

constexpr float kNegInf = -INFINITY;

// log(sum(exp(x[i]))) over [begin, end); -inf when every value is -inf.
double row_log_sum_exp(const float* x, int32_t begin, int32_t end) {
  float mx = kNegInf;
  for (int32_t i = begin; i < end; ++i) mx = std::max(mx, x[i]);
  if (mx == kNegInf) return -INFINITY;
  double s = 0.0;
  for (int32_t i = begin; i < end; ++i) s += std::exp(double(x[i]) - mx);
  return mx + std::log(s);
}

void row_log_softmax(const float* x, float* out, int32_t n) {
  const double lse = row_log_sum_exp(x, 0, n);
  for (int32_t i = 0; i < n; ++i) out[i] = float(double(x[i]) - lse);
}

int32_t row_argmax(const float* x, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

float row_softmax_at(const float* x, int32_t n, int32_t i) { return float(std::exp(double(x[i]) - row_log_sum_exp(x, 0, n))); }

}  // namespace

int32_t speech_max_new_tokens(const SpeechConfig& cfg, int32_t prompt_len, int32_t max_new_tokens, int32_t n_ctx) {
  const int32_t room = n_ctx - prompt_len;
  if (max_new_tokens > 0) return std::max(1, std::min(max_new_tokens, room));
  if (cfg.max_length < 0) return std::max(1, room);
  // transformers raises max_length by the tokens before the first generated one (previous text
  // and start tokens, at most n_text_ctx / 2 - 1), within the decoder's positions.
  const int32_t n_initial = std::min(cfg.n_text_ctx / 2 - 1, prompt_len - 1);
  const int32_t total = std::min({cfg.max_length + n_initial, cfg.n_text_ctx, n_ctx});
  return std::max(1, std::min(total - prompt_len, room));
}

void speech_rules_apply(const SpeechRules& r, float* scores, const std::vector<int32_t>& generated) {
  const SpeechConfig& c = *r.cfg;
  const int32_t n = c.n_vocab;
  if (r.suppress) {
    if (generated.empty())
      for (int32_t t : c.begin_suppress) scores[t] = kNegInf;
    for (int32_t t : c.suppress) scores[t] = kNegInf;
  }
  if (!r.timestamps || !c.has_timestamps()) return;
  const int32_t tb = c.timestamp_begin;
  scores[c.no_timestamps] = kNegInf;
  const size_t len = generated.size();
  const bool last_ts = len >= 1 && generated[len - 1] >= tb;
  const bool penultimate_ts = len < 2 || generated[len - 2] >= tb;
  if (last_ts) {
    if (penultimate_ts) {
      std::fill(scores + tb, scores + n, kNegInf);         // a pair is complete: text next
    } else {
      std::fill(scores, scores + std::min(c.eot, n), kNegInf);  // an open pair: no text
    }
  }
  int32_t last_time = -1;
  for (int32_t t : generated)
    if (t >= tb) last_time = t;
  if (last_time >= 0) {
    // Timestamps never decrease; after a completed pair (or text), not even the same one again.
    const int32_t limit = last_ts && !penultimate_ts ? last_time : last_time + 1;
    std::fill(scores + tb, scores + std::min(limit, n), kNegInf);
  }
  if (generated.empty()) {
    std::fill(scores, scores + tb, kNegInf);
    if (c.max_initial_timestamp_index >= 0) {
      const int64_t last_allowed = int64_t(tb) + c.max_initial_timestamp_index;
      if (last_allowed + 1 < n) std::fill(scores + last_allowed + 1, scores + n, kNegInf);
    }
  }
  // All timestamps together likelier than the likeliest text token: a timestamp comes next.
  const double lse = row_log_sum_exp(scores, 0, n);
  if (lse == -INFINITY) return;
  const double ts_logprob = row_log_sum_exp(scores, tb, n) - lse;
  float max_text = kNegInf;
  for (int32_t i = 0; i < tb; ++i) max_text = std::max(max_text, scores[i]);
  if (ts_logprob > double(max_text) - lse) std::fill(scores, scores + tb, kNegInf);
}

namespace {

struct BeamCandidate {
  float score = 0.0f;   // summed log-probability
  int32_t beam = 0;
  int32_t token = 0;
};

// Greedy or sampling on sequence 0.
WindowDecodeResult decode_single(Context& ctx, const SpeechConfig& cfg, const WindowDecodeOptions& o,
                                 std::vector<float> logits, int32_t max_new) {
  WindowDecodeResult res;
  const int32_t n = cfg.n_vocab;
  const int32_t prompt_len = int32_t(o.prompt.size());
  std::vector<float> scores(size_t(n), 0.0f), lp(size_t(n), 0.0f);
  while (int32_t(res.tokens.size()) < max_new) {
    scores = logits;
    if (o.apply_rules) speech_rules_apply(o.rules, scores.data(), res.tokens);
    int32_t tok;
    if (o.temperature > 0.0f) {
      // Top-k keeps every score at least the k-th largest (ties included), as transformers does.
      if (o.top_k > 0 && o.top_k < n) {
        std::vector<float> sorted(scores);
        std::nth_element(sorted.begin(), sorted.begin() + (o.top_k - 1), sorted.end(), std::greater<float>());
        const float kth = sorted[size_t(o.top_k - 1)];
        for (float& s : scores)
          if (s < kth) s = kNegInf;
      }
      const double lse = row_log_sum_exp(scores.data(), 0, n) ;
      BRISK_CHECK(lse != -INFINITY, "speech decoding: every token is banned");
      // Sample from softmax(scores / T).
      std::vector<double> p(static_cast<size_t>(n));
      float mx = kNegInf;
      for (float s : scores) mx = std::max(mx, s);
      double total = 0.0;
      for (int32_t i = 0; i < n; ++i) total += p[size_t(i)] = scores[size_t(i)] == kNegInf ? 0.0 : std::exp((double(scores[size_t(i)]) - mx) / o.temperature);
      std::uniform_real_distribution<double> u(0.0, total);
      double x = u(*o.rng), acc = 0.0;
      tok = -1;
      for (int32_t i = 0; i < n; ++i) {
        if (p[size_t(i)] == 0.0) continue;
        acc += p[size_t(i)];
        tok = i;
        if (acc > x) break;
      }
    } else {
      tok = row_argmax(scores.data(), n);
      BRISK_CHECK(scores[size_t(tok)] != kNegInf, "speech decoding: every token is banned");
    }
    row_log_softmax(scores.data(), lp.data(), n);
    res.sum_logprob += lp[size_t(tok)];
    res.tokens.push_back(tok);
    if (tok == cfg.eot && o.stop_at_eot) break;
    if (int32_t(res.tokens.size()) >= max_new) break;
    ctx.decode({BatchToken{.token = tok, .pos = prompt_len + int32_t(res.tokens.size()) - 1, .seq = 0, .want_logits = true}});
    const float* l = ctx.logits(0);
    logits.assign(l, l + n);
  }
  // transformers' _retrieve_avg_logprobs: every generated token's log-probability, end-of-text
  // included, over their count.
  res.avg_logprob = res.sum_logprob / double(std::max<size_t>(1, res.tokens.size()));
  return res;
}

WindowDecodeResult decode_beam(Context& ctx, const SpeechConfig& cfg, const WindowDecodeOptions& o,
                               const std::vector<float>& first_logits, int32_t max_new) {
  const int32_t nb = o.beam_size, n = cfg.n_vocab, prompt_len = int32_t(o.prompt.size());
  const int32_t keep = 2 * nb;  // candidates per step (one end-of-text token)
  const float length_penalty = 1.0f;
  const int32_t max_length = prompt_len + max_new;
  for (int32_t b = 1; b < nb; ++b) ctx.seq_copy(0, b, prompt_len);
  std::vector<std::vector<float>> logits(size_t(nb), first_logits);
  std::vector<std::vector<int32_t>> running(static_cast<size_t>(nb));
  std::vector<float> running_score(size_t(nb), -1.0e9f);
  running_score[0] = 0.0f;
  struct Finished {
    float score = -1.0e9f;
    bool done = false;
    std::vector<int32_t> tokens;
  };
  std::vector<Finished> finished(static_cast<size_t>(nb));
  bool improvable = true;
  int32_t base = 0;  // running beams live in sequences [base, base + nb)
  std::vector<float> lp(static_cast<size_t>(n));
  std::vector<BeamCandidate> cand;
  for (int32_t cur_len = prompt_len;; ++cur_len) {
    cand.clear();
    for (int32_t b = 0; b < nb; ++b) {
      row_log_softmax(logits[size_t(b)].data(), lp.data(), n);
      if (o.apply_rules) speech_rules_apply(o.rules, lp.data(), running[size_t(b)]);
      for (int32_t t = 0; t < n; ++t)
        if (lp[size_t(t)] != kNegInf) cand.push_back({lp[size_t(t)] + running_score[size_t(b)], b, t});
    }
    BRISK_CHECK(!cand.empty(), "speech decoding: every token is banned");
    const size_t k = std::min(cand.size(), size_t(keep));
    std::partial_sort(cand.begin(), cand.begin() + int64_t(k), cand.end(), [&](const BeamCandidate& a, const BeamCandidate& b) {
      if (a.score != b.score) return a.score > b.score;
      return int64_t(a.beam) * n + a.token < int64_t(b.beam) * n + b.token;
    });
    cand.resize(k);
    std::vector<bool> hits(k);
    for (size_t j = 0; j < k; ++j) hits[j] = cand[j].token == cfg.eot || cur_len + 1 >= max_length;
    // Finished: the top nb candidates that ended, scored by length, merged with the kept ones.
    std::vector<std::pair<float, std::vector<int32_t>>> merged;
    for (const Finished& f : finished) merged.push_back({f.done ? f.score : -1.0e9f, f.tokens});
    std::vector<bool> merged_done;
    for (const Finished& f : finished) merged_done.push_back(f.done);
    for (size_t j = 0; j < k; ++j) {
      float s = cand[j].score / std::pow(float(cur_len + 1 - prompt_len), length_penalty);
      const bool just = hits[j] && j < size_t(nb);
      if (!improvable) s += -1.0e9f;
      if (!just) s += -1.0e9f;
      std::vector<int32_t> toks = running[size_t(cand[j].beam)];
      toks.push_back(cand[j].token);
      merged.push_back({s, std::move(toks)});
      merged_done.push_back(just);
    }
    std::vector<size_t> order(merged.size());
    std::iota(order.begin(), order.end(), size_t(0));
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return merged[a].first > merged[b].first; });
    std::vector<Finished> next_finished(static_cast<size_t>(nb));
    for (int32_t i = 0; i < nb; ++i) {
      next_finished[size_t(i)] = {.score = merged[order[size_t(i)]].first, .done = merged_done[order[size_t(i)]],
                                  .tokens = merged[order[size_t(i)]].second};
    }
    finished = std::move(next_finished);
    // Running: the best nb candidates that did not end.
    std::vector<size_t> run_idx(k);
    std::iota(run_idx.begin(), run_idx.end(), size_t(0));
    std::stable_sort(run_idx.begin(), run_idx.end(), [&](size_t a, size_t b) {
      return cand[a].score + (hits[a] ? -1.0e9f : 0.0f) > cand[b].score + (hits[b] ? -1.0e9f : 0.0f);
    });
    run_idx.resize(size_t(nb));
    bool all_hit = true;
    for (size_t j = 0; j < k; ++j) all_hit = all_hit && hits[j];
    std::vector<std::vector<int32_t>> next_running(static_cast<size_t>(nb));
    std::vector<float> next_score(static_cast<size_t>(nb));
    for (int32_t i = 0; i < nb; ++i) {
      const BeamCandidate& c = cand[run_idx[size_t(i)]];
      next_score[size_t(i)] = c.score + (hits[run_idx[size_t(i)]] ? -1.0e9f : 0.0f);
      next_running[size_t(i)] = running[size_t(c.beam)];
      next_running[size_t(i)].push_back(c.token);
    }
    // The early-stop heuristic: the best running beam at its current length against the worst
    // kept finished one (any slot still empty keeps the search going).
    const float best_possible = next_score[0] / std::pow(float(cur_len + 1 - prompt_len), length_penalty);
    bool any_better = false;
    float worst = INFINITY;
    for (const Finished& f : finished) worst = std::min(worst, f.score);
    for (const Finished& f : finished) any_better = any_better || best_possible > (f.done ? worst : -1.0e9f);
    improvable = improvable && any_better;
    if (!improvable || all_hit) break;
    // The new running beams' caches: beam i continues old beam cand.beam (ping-pong halves, so
    // no copy overwrites a source still to be read).
    const int32_t other = base == 0 ? nb : 0;
    std::vector<BatchToken> batch;
    for (int32_t i = 0; i < nb; ++i) {
      const BeamCandidate& c = cand[run_idx[size_t(i)]];
      ctx.seq_copy(base + c.beam, other + i, cur_len);
      batch.push_back({.token = c.token, .pos = cur_len, .seq = other + i, .want_logits = true});
    }
    ctx.decode(batch);
    for (int32_t i = 0; i < nb; ++i) {
      const float* l = ctx.logits(i);
      logits[size_t(i)].assign(l, l + n);
    }
    running = std::move(next_running);
    running_score = std::move(next_score);
    base = other;
  }
  WindowDecodeResult res;
  res.tokens = finished[0].tokens;
  res.avg_logprob = finished[0].score;
  res.sum_logprob = finished[0].score;
  return res;
}

}  // namespace

WindowDecodeResult speech_decode_window(Context& ctx, const SpeechConfig& cfg, const WindowDecodeOptions& o) {
  const int32_t prompt_len = int32_t(o.prompt.size());
  BRISK_CHECK(prompt_len >= 1, "speech decoding: empty decoder prompt");
  BRISK_CHECK(o.beam_size >= 1 && 2 * o.beam_size <= ctx.options().n_seq_max, "speech decoding: ", o.beam_size,
              " beams need ", 2 * o.beam_size, " sequences, the context holds ", ctx.options().n_seq_max);
  BRISK_CHECK(o.temperature >= 0.0f && std::isfinite(o.temperature), "speech decoding: temperature ", o.temperature,
              " must be finite and >= 0");
  BRISK_CHECK(o.temperature == 0.0f || o.rng, "speech decoding: sampling needs a random generator");
  const int32_t room = ctx.options().n_ctx - prompt_len;
  BRISK_CHECK(room >= 1, "speech decoding: the decoder prompt of ", prompt_len, " tokens fills the decoder context of ",
              ctx.options().n_ctx);
  const int32_t max_new = speech_max_new_tokens(cfg, prompt_len, o.max_new_tokens, ctx.options().n_ctx);
  ctx.seq_truncate(0, 0);
  std::vector<BatchToken> batch;
  for (int32_t i = 0; i < prompt_len; ++i)
    batch.push_back({.token = o.prompt[size_t(i)], .pos = i, .seq = 0,
                     .want_logits = i == prompt_len - 1 || i == o.sot_index});
  ctx.decode(batch);
  const int32_t n = cfg.n_vocab;
  const int32_t last_row = o.sot_index >= 0 && o.sot_index < prompt_len - 1 ? 1 : 0;
  const float* l = ctx.logits(last_row);
  std::vector<float> logits(l, l + n);
  float no_speech = 0.0f;
  if (o.sot_index >= 0 && cfg.no_speech >= 0) no_speech = row_softmax_at(ctx.logits(0), n, cfg.no_speech);
  if (o.prompt_logits) *o.prompt_logits = logits;
  WindowDecodeResult res = o.beam_size > 1 && o.temperature == 0.0f ? decode_beam(ctx, cfg, o, logits, max_new)
                                                                    : decode_single(ctx, cfg, o, std::move(logits), max_new);
  res.no_speech_prob = no_speech;
  return res;
}

}  // namespace brisk
