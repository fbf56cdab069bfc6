// Sampler chain (see sampler.h for the order). Works on a candidate list that starts as the
// whole vocabulary and shrinks step by step:
//   mask + bias + penalties   a copy of the logits plus sparse edits, O(n_vocab + history)
//   top-k                     a bounded heap of the k best, O(n_vocab) comparisons
//   top-p                     softmax at temperature 1, then bisection with nth_element for
//                             the smallest set reaching top_p: O(n) expected, no full sort
//   min-p                     one pass against p_max
//   temperature + draw        softmax of logit / T over the kept set in id order, one uniform
//                             double from mt19937_64.
// Ties between equal logits are broken by the lower token id everywhere and the draw walks
// the kept set in id order, so results do not depend on the standard library's algorithms.
#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace brisk {
namespace {

// Uniform double in [0, 1) from the top 53 bits: the same on every platform, unlike
// std::uniform_real_distribution whose algorithm is left to the library.
double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

}  // namespace

void sampler_ban_ids_without_token(SamplerParams& params, int32_t n_tokens, int32_t n_vocab) {
  for (int32_t id = std::max(n_tokens, 0); id < n_vocab; ++id)
    params.logit_bias.emplace_back(id, -std::numeric_limits<float>::infinity());
}

Sampler::Sampler(SamplerParams params, int32_t n_vocab)
    : params_(std::move(params)), n_vocab_(n_vocab), rng_(params_.seed) {
  BRISK_CHECK(n_vocab_ > 0, "sampler: n_vocab must be positive, got ", n_vocab_);
  BRISK_CHECK(!std::isnan(params_.temperature) && !std::isinf(params_.temperature),
              "sampler: temperature must be finite");
  BRISK_CHECK(!std::isnan(params_.top_p), "sampler: top_p is NaN");
  BRISK_CHECK(!std::isnan(params_.min_p), "sampler: min_p is NaN");
  BRISK_CHECK(std::isfinite(params_.repeat_penalty) && params_.repeat_penalty > 0.0f,
              "sampler: repeat_penalty must be finite and > 0, got ", params_.repeat_penalty);
  BRISK_CHECK(std::isfinite(params_.presence_penalty), "sampler: presence_penalty must be finite");
  BRISK_CHECK(std::isfinite(params_.frequency_penalty),
              "sampler: frequency_penalty must be finite");
  BRISK_CHECK(params_.penalty_last_n >= -1,
              "sampler: penalty_last_n must be >= -1, got ", params_.penalty_last_n);
  for (const auto& [id, bias] : params_.logit_bias) {
    BRISK_CHECK(id >= 0 && id < n_vocab_, "sampler: logit_bias token id ", id,
                " is outside the vocabulary [0, ", n_vocab_, ")");
    BRISK_CHECK(!std::isnan(bias) && bias != std::numeric_limits<float>::infinity(),
                "sampler: logit_bias for token ", id,
                " must be a finite number or -inf (to ban it)");
  }
  cand_.reserve(static_cast<size_t>(n_vocab_));
}

bool Sampler::greedy() const {
  return params_.temperature <= 0.0f || !std::isfinite(1.0f / params_.temperature);
}

bool Sampler::uses_history() const {
  return params_.penalty_last_n != 0 && (params_.repeat_penalty != 1.0f || params_.presence_penalty != 0.0f ||
                                         params_.frequency_penalty != 0.0f);
}

std::vector<std::pair<int32_t, int32_t>> Sampler::penalty_counts() const {
  std::vector<std::pair<int32_t, int32_t>> counts;
  if (!uses_history() || history_.empty()) return counts;
  size_t window = history_.size();
  if (params_.penalty_last_n > 0) window = std::min(window, static_cast<size_t>(params_.penalty_last_n));
  std::vector<int32_t> recent(history_.end() - static_cast<std::ptrdiff_t>(window), history_.end());
  std::sort(recent.begin(), recent.end());
  for (size_t i = 0; i < recent.size();) {
    size_t j = i;
    while (j < recent.size() && recent[j] == recent[i]) ++j;
    counts.emplace_back(recent[i], static_cast<int32_t>(j - i));
    i = j;
  }
  return counts;
}

bool Sampler::device_supported() const {
  return greedy() || (params_.top_k >= 1 && params_.top_k <= kDeviceSampleMaxTopK);
}

void Sampler::device_spec(DeviceSampleSpec* spec, std::vector<DeviceSampleEdit>* edits) {
  BRISK_CHECK(device_supported(), "sampler: top_k ", params_.top_k, " cannot run on the device (1..",
              kDeviceSampleMaxTopK, ")");
  *spec = DeviceSampleSpec{.temperature = params_.temperature,
                           .top_k = params_.top_k,
                           .top_p = params_.top_p,
                           .min_p = params_.min_p,
                           .repeat_penalty = params_.repeat_penalty,
                           .presence_penalty = params_.presence_penalty,
                           .frequency_penalty = params_.frequency_penalty,
                           .edit_offset = static_cast<int32_t>(edits->size())};
  for (const auto& [id, bias] : params_.logit_bias) edits->push_back({.token = id, .count = 0, .bias = bias});
  for (const auto& [token, n] : penalty_counts()) edits->push_back({.token = token, .count = n, .bias = 0.0f});
  spec->n_edits = static_cast<int32_t>(edits->size()) - spec->edit_offset;
  // sample() draws once per non-greedy call, after the chain: so does the device form.
  if (!greedy()) spec->u = uniform01(rng_);
}

void Sampler::accept(int32_t token) {
  BRISK_CHECK(token >= 0 && token < n_vocab_, "sampler: accepted token id ", token,
              " is outside the vocabulary [0, ", n_vocab_, ")");
  history_.push_back(token);
  // Keep the history bounded when only a window is used (trim in batches: amortized O(1)).
  const int32_t n = params_.penalty_last_n;
  if (n >= 0 && history_.size() > 2 * static_cast<size_t>(n) + 64) {
    history_.erase(history_.begin(), history_.end() - n);
  }
}

void Sampler::reset() {
  history_.clear();
  rng_.seed(params_.seed);
}

int32_t Sampler::prepare(const float* logits, const std::vector<bool>* allowed) {
  BRISK_CHECK(logits != nullptr, "sampler: logits pointer is null");
  BRISK_CHECK(allowed == nullptr || allowed->size() == static_cast<size_t>(n_vocab_),
              "sampler: allowed mask has ", allowed ? allowed->size() : 0,
              " entries, vocabulary has ", n_vocab_);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const size_t n_vocab = static_cast<size_t>(n_vocab_);

  // 1. Working logits: copy, then the sparse edits (bias, penalties), then the mask.
  work_.assign(logits, logits + n_vocab);
  for (const auto& [id, bias] : params_.logit_bias) work_[static_cast<size_t>(id)] += bias;
  for (const auto& [token, n] : penalty_counts()) {
    const float count = static_cast<float>(n);
    float& l = work_[static_cast<size_t>(token)];
    l = l > 0.0f ? l / params_.repeat_penalty : l * params_.repeat_penalty;
    l -= count * params_.frequency_penalty + params_.presence_penalty;
  }
  if (allowed) {
    for (size_t i = 0; i < n_vocab; ++i) {
      if (!(*allowed)[i]) work_[i] = -kInf;
    }
  }

  // 2. NaN counts as banned. If some logits are +inf, only those remain, equally likely.
  float max_logit = -kInf;
  for (float& l : work_) {
    l = std::isnan(l) ? -kInf : l;
    max_logit = l > max_logit ? l : max_logit;
  }
  BRISK_CHECK(max_logit > -kInf,
              "sampler: every token is masked out or banned; nothing can be sampled");
  if (max_logit == kInf) {
    for (float& l : work_) l = l == kInf ? 0.0f : -kInf;
    max_logit = 0.0f;
  }

  // 3. Greedy (also when 1 / temperature overflows): the first token with the top logit.
  if (greedy()) {
    return static_cast<int32_t>(std::find(work_.begin(), work_.end(), max_logit) - work_.begin());
  }

  auto better = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };

  // 4. Candidates: the k best through a bounded heap (one comparison per token in the common
  //    case), or every token that is not banned.
  cand_.clear();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n_vocab) {
    const size_t k = static_cast<size_t>(params_.top_k);
    // better() as the heap order keeps the worst kept candidate at the front.
    for (size_t i = 0; i < n_vocab; ++i) {
      const float l = work_[i];
      if (l == -kInf) continue;
      const Candidate c{static_cast<int32_t>(i), l, 0.0f};
      if (cand_.size() < k) {
        cand_.push_back(c);
        std::push_heap(cand_.begin(), cand_.end(), better);
      } else if (better(c, cand_.front())) {
        std::pop_heap(cand_.begin(), cand_.end(), better);
        cand_.back() = c;
        std::push_heap(cand_.begin(), cand_.end(), better);
      }
    }
  } else {
    for (size_t i = 0; i < n_vocab; ++i) {
      if (work_[i] != -kInf) cand_.push_back(Candidate{static_cast<int32_t>(i), work_[i], 0.0f});
    }
  }

  // 5. Probabilities at temperature 1 for top-p and min-p.
  const bool use_top_p = params_.top_p < 1.0f;
  const bool use_min_p = params_.min_p > 0.0f;
  if (use_top_p || use_min_p) {
    float top = -kInf;
    for (const Candidate& c : cand_) top = std::max(top, c.logit);
    double sum = 0.0;
    for (Candidate& c : cand_) {
      c.p = std::exp(c.logit - top);
      sum += c.p;
    }
    for (Candidate& c : cand_) c.p = static_cast<float>(c.p / sum);

    if (use_top_p) {
      // The smallest set of best candidates whose mass reaches top_p (at least one), found by
      // bisection with nth_element: expected O(n), no full sort. Invariants: cand_[0, lo) are
      // the lo best and hold mass_lo < top_p; the hi best reach top_p (or hi is everything).
      size_t lo = 0, hi = cand_.size();
      double mass_lo = 0.0;
      while (hi - lo > 1) {
        const size_t mid = lo + (hi - lo) / 2;
        std::nth_element(cand_.begin() + static_cast<std::ptrdiff_t>(lo),
                         cand_.begin() + static_cast<std::ptrdiff_t>(mid),
                         cand_.begin() + static_cast<std::ptrdiff_t>(hi), better);
        double mass_mid = mass_lo;
        for (size_t i = lo; i < mid; ++i) mass_mid += cand_[i].p;
        if (mass_mid >= params_.top_p) {
          hi = mid;
        } else {
          lo = mid;
          mass_lo = mass_mid;
        }
      }
      // Now hi == lo + 1: cand_[lo] is the next best, and with it the mass reaches top_p.
      cand_.resize(lo + 1);
    }

    if (use_min_p) {
      float p_max = 0.0f;
      for (const Candidate& c : cand_) p_max = std::max(p_max, c.p);
      const float threshold = std::min(params_.min_p, 1.0f) * p_max;
      size_t m = 0;
      for (size_t i = 0; i < cand_.size(); ++i) {
        if (cand_[i].p >= threshold) cand_[m++] = cand_[i];
      }
      cand_.resize(m);  // the best candidate always passes
    }
  }

  return -1;
}

int32_t Sampler::sample(const float* logits, const std::vector<bool>* allowed) {
  const int32_t picked = prepare(logits, allowed);
  if (picked >= 0) return picked;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const size_t n_vocab = static_cast<size_t>(n_vocab_);

  // 6. Temperature and the draw, over the kept candidates in id order (so the result does not
  //    depend on how the selection steps above arranged them). Small sets are sorted by id;
  //    large ones are scattered into the dense work_ buffer and scanned.
  const float inv_t = 1.0f / params_.temperature;
  float top = -kInf;
  for (const Candidate& c : cand_) top = std::max(top, c.logit);
  constexpr size_t kSortLimit = 4096;
  if (cand_.size() <= kSortLimit) {
    std::sort(cand_.begin(), cand_.end(),
              [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
    double total = 0.0;
    for (Candidate& c : cand_) {
      c.p = std::exp((c.logit - top) * inv_t);  // <= 1, never NaN: logits are finite here
      total += c.p;
    }
    const double target = uniform01(rng_) * total;
    double cum = 0.0;
    for (const Candidate& c : cand_) {
      cum += c.p;
      if (target < cum) return c.id;
    }
    for (auto it = cand_.rbegin(); it != cand_.rend(); ++it) {  // rounding at the very top
      if (it->p > 0.0f) return it->id;
    }
    return cand_.front().id;
  }
  std::fill(work_.begin(), work_.end(), 0.0f);
  for (const Candidate& c : cand_) work_[static_cast<size_t>(c.id)] = std::exp((c.logit - top) * inv_t);
  double total = 0.0;
  for (float p : work_) total += p;
  const double target = uniform01(rng_) * total;
  double cum = 0.0;
  int32_t last = -1;
  for (size_t i = 0; i < n_vocab; ++i) {
    if (work_[i] == 0.0f) continue;
    cum += work_[i];
    last = static_cast<int32_t>(i);
    if (target < cum) return last;
  }
  return last;  // rounding at the very top; the best candidate has p == 1, so last >= 0
}

}  // namespace brisk

namespace brisk {

void Sampler::distribution(const float* logits, const std::vector<bool>* allowed, TokenDistribution* out) {
  out->clear();
  const int32_t picked = prepare(logits, allowed);
  if (picked >= 0) {
    out->push_back({picked, 1.0});
    return;
  }
  // As sample()'s step 6: float weights over the kept candidates in id order, a double total.
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float inv_t = 1.0f / params_.temperature;
  float top = -kInf;
  for (const Candidate& c : cand_) top = std::max(top, c.logit);
  std::sort(cand_.begin(), cand_.end(), [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
  double total = 0.0;
  for (Candidate& c : cand_) {
    c.p = std::exp((c.logit - top) * inv_t);
    total += c.p;
  }
  out->reserve(cand_.size());
  for (const Candidate& c : cand_)
    if (c.p > 0.0f) out->push_back({c.id, double(c.p) / total});
}

double Sampler::uniform() { return uniform01(rng_); }

int32_t Sampler::draw(const TokenDistribution& weights) {
  double total = 0.0;
  for (const auto& [id, w] : weights) total += w;
  BRISK_CHECK(total > 0.0, "sampler: drawing from a distribution without mass");
  const double target = uniform01(rng_) * total;
  double cum = 0.0;
  for (const auto& [id, w] : weights) {
    cum += w;
    if (target < cum) return id;
  }
  for (auto it = weights.rbegin(); it != weights.rend(); ++it)  // rounding at the very top
    if (it->second > 0.0) return it->first;
  return weights.front().first;
}

}  // namespace brisk
