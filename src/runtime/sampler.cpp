// Sampler chain (see sampler.h for the order). Works on a candidate list that starts as the
// whole vocabulary and shrinks step by step:
//   mask + bias + penalties   O(n_vocab + history)
//   top-k                     nth_element, O(n_vocab)
//   top-p                     softmax at temperature 1, then a partial sort of the best 256
//                             (enough for most steps), a full sort only when they fall short
//   min-p                     one pass against p_max
//   temperature + draw        softmax of logit / T, one uniform double from mt19937_64.
// Ties between equal logits are broken by the lower token id everywhere, so results do not
// depend on the standard library's sort.
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

int32_t Sampler::sample(const float* logits, const std::vector<bool>* allowed) {
  BRISK_CHECK(logits != nullptr, "sampler: logits pointer is null");
  BRISK_CHECK(allowed == nullptr || allowed->size() == static_cast<size_t>(n_vocab_),
              "sampler: allowed mask has ", allowed ? allowed->size() : 0, " entries, vocabulary has ",
              n_vocab_);

  // 1. Every token as a candidate, then bias and penalties by id (cand_[i].id == i here).
  cand_.resize(static_cast<size_t>(n_vocab_));
  for (int32_t i = 0; i < n_vocab_; ++i) cand_[i] = Candidate{i, logits[i], 0.0f};
  for (const auto& [id, bias] : params_.logit_bias) cand_[id].logit += bias;

  const bool use_penalties = params_.penalty_last_n != 0 &&
                             (params_.repeat_penalty != 1.0f || params_.presence_penalty != 0.0f ||
                              params_.frequency_penalty != 0.0f);
  if (use_penalties && !history_.empty()) {
    size_t window = history_.size();
    if (params_.penalty_last_n > 0) {
      window = std::min(window, static_cast<size_t>(params_.penalty_last_n));
    }
    std::vector<int32_t> recent(history_.end() - static_cast<std::ptrdiff_t>(window), history_.end());
    std::sort(recent.begin(), recent.end());
    for (size_t i = 0; i < recent.size();) {
      size_t j = i;
      while (j < recent.size() && recent[j] == recent[i]) ++j;
      const int32_t id = recent[i];
      const float count = static_cast<float>(j - i);
      float& l = cand_[id].logit;
      l = l > 0.0f ? l / params_.repeat_penalty : l * params_.repeat_penalty;
      l -= count * params_.frequency_penalty + params_.presence_penalty;
      i = j;
    }
  }

  // 2. Drop masked, banned (-inf) and NaN candidates. If some logits are +inf, only those
  //    remain, equally likely.
  bool any_pos_inf = false;
  for (const Candidate& c : cand_) {
    if (c.logit == std::numeric_limits<float>::infinity() && (!allowed || (*allowed)[c.id])) {
      any_pos_inf = true;
      break;
    }
  }
  size_t n = 0;
  for (size_t i = 0; i < cand_.size(); ++i) {
    Candidate c = cand_[i];
    if (allowed && !(*allowed)[c.id]) continue;
    if (std::isnan(c.logit) || c.logit == -std::numeric_limits<float>::infinity()) continue;
    if (any_pos_inf) {
      if (c.logit != std::numeric_limits<float>::infinity()) continue;
      c.logit = 0.0f;
    }
    cand_[n++] = c;
  }
  cand_.resize(n);
  BRISK_CHECK(n > 0, "sampler: every token is masked out or banned; nothing can be sampled");

  auto better = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };

  // 3. Greedy (also when 1 / temperature overflows).
  if (params_.temperature <= 0.0f || !std::isfinite(1.0f / params_.temperature)) {
    return std::min_element(cand_.begin(), cand_.end(), better)->id;
  }

  // 4. top-k.
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < cand_.size()) {
    std::nth_element(cand_.begin(), cand_.begin() + params_.top_k - 1, cand_.end(), better);
    cand_.resize(static_cast<size_t>(params_.top_k));
  }

  // 5. Probabilities at temperature 1 for top-p and min-p.
  const bool use_top_p = params_.top_p < 1.0f;
  const bool use_min_p = params_.min_p > 0.0f;
  if (use_top_p || use_min_p) {
    float max_logit = -std::numeric_limits<float>::infinity();
    for (const Candidate& c : cand_) max_logit = std::max(max_logit, c.logit);
    double sum = 0.0;
    for (Candidate& c : cand_) {
      c.p = std::exp(c.logit - max_logit);
      sum += c.p;
    }
    for (Candidate& c : cand_) c.p = static_cast<float>(c.p / sum);

    if (use_top_p) {
      // Smallest prefix (by probability) whose mass reaches top_p; at least one token.
      // Sort the best 256 first; only a flat distribution needs the full sort.
      size_t sorted = std::min<size_t>(cand_.size(), 256);
      while (true) {
        std::partial_sort(cand_.begin(), cand_.begin() + sorted, cand_.end(), better);
        double cum = 0.0;
        size_t keep = 0;
        for (; keep < sorted; ++keep) {
          cum += cand_[keep].p;
          if (cum >= params_.top_p) {
            ++keep;
            break;
          }
        }
        if (cum >= params_.top_p || sorted == cand_.size()) {
          cand_.resize(std::max<size_t>(keep, 1));
          break;
        }
        sorted = cand_.size();  // a flat distribution: sort everything
      }
    }

    if (use_min_p) {
      float p_max = 0.0f;
      for (const Candidate& c : cand_) p_max = std::max(p_max, c.p);
      const float threshold = std::min(params_.min_p, 1.0f) * p_max;
      size_t m = 0;
      for (size_t i = 0; i < cand_.size(); ++i) {
        if (cand_[i].p >= threshold) cand_[m++] = cand_[i];
      }
      cand_.resize(std::max<size_t>(m, 1));  // the best one always passes (min_p <= 1)
    }
  }

  // 6. Temperature and draw.
  const float inv_t = 1.0f / params_.temperature;
  float max_logit = -std::numeric_limits<float>::infinity();
  for (const Candidate& c : cand_) max_logit = std::max(max_logit, c.logit);
  double total = 0.0;
  for (Candidate& c : cand_) {
    c.p = std::exp((c.logit - max_logit) * inv_t);  // <= 1, never NaN: logits are finite here
    total += c.p;
  }
  const double target = uniform01(rng_) * total;
  double cum = 0.0;
  for (const Candidate& c : cand_) {
    cum += c.p;
    if (target < cum) return c.id;
  }
  // Rounding left the target at the very top: the last candidate with any mass.
  for (auto it = cand_.rbegin(); it != cand_.rend(); ++it) {
    if (it->p > 0.0f) return it->id;
  }
  return cand_.front().id;
}

}  // namespace brisk
