// Sampler chain: greedy, temperature, top-k / top-p / min-p sets, penalties, logit bias,
// masks, seeding and the distribution of draws against softmax (chi-square).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "core/error.h"
#include "runtime/sampler.h"

using namespace brisk;

namespace {

std::vector<float> random_logits(int n, uint64_t seed, float scale = 3.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Parameters with every filter off: plain softmax sampling at temperature t.
SamplerParams plain(float t, uint64_t seed = 7) {
  return SamplerParams{.temperature = t, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = seed};
}

// Logits whose softmax is exactly `probs` (up to a constant).
std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> v;
  for (double p : probs) v.push_back(static_cast<float>(std::log(p)));
  return v;
}

std::set<int32_t> draw_set(Sampler& s, const std::vector<float>& logits, int n) {
  std::set<int32_t> seen;
  for (int i = 0; i < n; ++i) seen.insert(s.sample(logits.data()));
  return seen;
}

// Pearson chi-square statistic of observed counts against expected probabilities.
double chi_square(const std::vector<int>& counts, const std::vector<double>& probs, int n) {
  double chi2 = 0.0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = probs[i] * n;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi2;
}

std::vector<double> softmax(const std::vector<float>& logits, float t) {
  const float m = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p;
  double sum = 0.0;
  for (float l : logits) {
    p.push_back(std::exp((static_cast<double>(l) - m) / t));
    sum += p.back();
  }
  for (double& x : p) x /= sum;
  return p;
}

}  // namespace

TEST(Sampler, GreedyIsArgmax) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const auto logits = random_logits(1000, seed);
    Sampler s(SamplerParams{.temperature = 0.0f}, 1000);
    EXPECT_EQ(s.sample(logits.data()), argmax(logits)) << "seed " << seed;
  }
}

TEST(Sampler, GreedyTieTakesLowestId) {
  const std::vector<float> logits = {0.0f, 2.0f, 1.0f, 2.0f};
  Sampler s(SamplerParams{.temperature = 0.0f}, 4);
  EXPECT_EQ(s.sample(logits.data()), 1);
}

TEST(Sampler, TinyTemperatureEqualsGreedy) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const auto logits = random_logits(1000, seed);
    Sampler s(plain(1e-4f, seed), 1000);
    for (int i = 0; i < 20; ++i) EXPECT_EQ(s.sample(logits.data()), argmax(logits));
  }
}

TEST(Sampler, SameSeedSameSequence) {
  const auto logits = random_logits(500, 3, 1.0f);
  auto run = [&](uint64_t seed) {
    Sampler s(SamplerParams{.temperature = 1.0f, .seed = seed}, 500);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) {
      out.push_back(s.sample(logits.data()));
      s.accept(out.back());
    }
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(Sampler, ResetReseedsAndClearsHistory) {
  const auto logits = random_logits(300, 9, 1.0f);
  Sampler s(SamplerParams{.temperature = 1.0f, .repeat_penalty = 1.3f}, 300);
  std::vector<int32_t> first, second;
  for (int i = 0; i < 32; ++i) {
    first.push_back(s.sample(logits.data()));
    s.accept(first.back());
  }
  s.reset();
  for (int i = 0; i < 32; ++i) {
    second.push_back(s.sample(logits.data()));
    s.accept(second.back());
  }
  EXPECT_EQ(first, second);
}

TEST(Sampler, TopKNeverLeavesTheKBest) {
  const int n_vocab = 200;
  const auto logits = random_logits(n_vocab, 11, 0.5f);  // flat: many tokens are likely
  std::vector<int32_t> order(n_vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  for (int k : {1, 3, 10}) {
    const std::set<int32_t> best(order.begin(), order.begin() + k);
    SamplerParams p = plain(2.0f, 5);
    p.top_k = k;
    Sampler s(p, n_vocab);
    const auto seen = draw_set(s, logits, 3000);
    EXPECT_EQ(seen, best) << "k=" << k;  // never outside, and every one of them appears
  }
}

TEST(Sampler, TopPKeepsSmallestPrefixReachingP) {
  const auto logits = logits_of({0.5, 0.3, 0.15, 0.05});
  auto set_for = [&](float top_p) {
    SamplerParams p = plain(1.0f, 3);
    p.top_p = top_p;
    Sampler s(p, 4);
    return draw_set(s, logits, 4000);
  };
  EXPECT_EQ(set_for(0.4f), (std::set<int32_t>{0}));
  EXPECT_EQ(set_for(0.75f), (std::set<int32_t>{0, 1}));
  EXPECT_EQ(set_for(0.9f), (std::set<int32_t>{0, 1, 2}));
  EXPECT_EQ(set_for(0.99f), (std::set<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(set_for(0.0f), (std::set<int32_t>{0}));  // at least one token survives
}

TEST(Sampler, TopPOnLargeFlatVocabulary) {
  // Flat logits: the top-p set is most of the vocabulary.
  const int n_vocab = 5000;
  std::vector<float> logits(n_vocab, 0.0f);
  logits[17] = 1.0f;
  SamplerParams p = plain(1.0f, 2);
  p.top_p = 0.9f;
  Sampler s(p, n_vocab);
  const auto seen = draw_set(s, logits, 600);
  EXPECT_GT(seen.size(), 300u);
  // The ~10% of mass cut off is the highest ids among the equal logits (ties -> lower id first).
  EXPECT_LT(*seen.rbegin(), 4600);
}

TEST(Sampler, MinPKeepsTokensAboveFractionOfBest) {
  const auto logits = logits_of({0.5, 0.3, 0.15, 0.05});
  auto set_for = [&](float min_p) {
    SamplerParams p = plain(1.0f, 4);
    p.min_p = min_p;
    Sampler s(p, 4);
    return draw_set(s, logits, 4000);
  };
  EXPECT_EQ(set_for(0.2f), (std::set<int32_t>{0, 1, 2}));   // threshold 0.10
  EXPECT_EQ(set_for(0.5f), (std::set<int32_t>{0, 1}));      // threshold 0.25
  EXPECT_EQ(set_for(0.9f), (std::set<int32_t>{0}));         // threshold 0.45
  EXPECT_EQ(set_for(0.05f), (std::set<int32_t>{0, 1, 2, 3}));
}

TEST(Sampler, FiltersUseTemperatureOneProbabilities) {
  // top-p runs before temperature: a high temperature must not widen the kept set.
  const auto logits = logits_of({0.5, 0.3, 0.15, 0.05});
  SamplerParams p = plain(5.0f, 8);
  p.top_p = 0.75f;
  Sampler s(p, 4);
  EXPECT_EQ(draw_set(s, logits, 3000), (std::set<int32_t>{0, 1}));
}

TEST(Sampler, RepeatPenaltyDividesPositiveMultipliesNegative) {
  {
    const std::vector<float> logits = {2.0f, 1.9f, 0.0f};
    Sampler s(SamplerParams{.temperature = 0.0f, .repeat_penalty = 1.1f}, 3);
    EXPECT_EQ(s.sample(logits.data()), 0);
    s.accept(0);  // 2.0 / 1.1 = 1.82 < 1.9
    EXPECT_EQ(s.sample(logits.data()), 1);
  }
  {
    const std::vector<float> logits = {-1.0f, -1.05f, -9.0f};
    Sampler s(SamplerParams{.temperature = 0.0f, .repeat_penalty = 1.1f}, 3);
    EXPECT_EQ(s.sample(logits.data()), 0);
    s.accept(0);  // -1.0 * 1.1 = -1.1 < -1.05 (dividing would have raised it)
    EXPECT_EQ(s.sample(logits.data()), 1);
  }
}

TEST(Sampler, PresenceAndFrequencyPenalties) {
  const std::vector<float> logits = {1.0f, 1.5f, -5.0f};
  {
    // presence: subtracted once per distinct token present.
    Sampler s(SamplerParams{.temperature = 0.0f, .presence_penalty = 0.6f}, 3);
    for (int i = 0; i < 5; ++i) s.accept(1);  // 1.5 - 0.6 = 0.9 < 1.0
    EXPECT_EQ(s.sample(logits.data()), 0);
  }
  {
    // frequency: subtracted per occurrence. 3 x 0.1 = 0.3 keeps token 1 ahead (1.2 > 1.0)...
    Sampler s(SamplerParams{.temperature = 0.0f, .frequency_penalty = 0.1f}, 3);
    for (int i = 0; i < 3; ++i) s.accept(1);
    EXPECT_EQ(s.sample(logits.data()), 1);
    // ...and 6 x 0.1 = 0.6 does not (0.9 < 1.0).
    for (int i = 0; i < 3; ++i) s.accept(1);
    EXPECT_EQ(s.sample(logits.data()), 0);
  }
}

TEST(Sampler, PenaltyWindowOnlyCoversLastN) {
  const std::vector<float> logits = {2.0f, 1.9f, 0.0f};
  Sampler s(SamplerParams{.temperature = 0.0f, .repeat_penalty = 1.5f, .penalty_last_n = 2}, 3);
  s.accept(0);
  EXPECT_EQ(s.sample(logits.data()), 1);
  s.accept(2);
  s.accept(2);  // token 0 has left the window of 2
  EXPECT_EQ(s.sample(logits.data()), 0);

  Sampler off(SamplerParams{.temperature = 0.0f, .repeat_penalty = 1.5f, .penalty_last_n = 0}, 3);
  off.accept(0);
  EXPECT_EQ(off.sample(logits.data()), 0);

  Sampler whole(SamplerParams{.temperature = 0.0f, .repeat_penalty = 1.5f, .penalty_last_n = -1},
                3);
  whole.accept(0);
  for (int i = 0; i < 500; ++i) whole.accept(2);
  EXPECT_EQ(whole.sample(logits.data()), 1);
}

TEST(Sampler, PenalizedDistributionMatchesSoftmaxOfPenalizedLogits) {
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -0.5f, 0.8f};
  SamplerParams p = plain(1.0f, 21);
  p.repeat_penalty = 1.25f;
  p.frequency_penalty = 0.2f;
  p.presence_penalty = 0.1f;
  Sampler s(p, 5);
  s.accept(0);
  s.accept(0);
  s.accept(3);
  std::vector<float> expected_logits = logits;
  expected_logits[0] = 1.0f / 1.25f - 2 * 0.2f - 0.1f;
  expected_logits[3] = -0.5f * 1.25f - 0.2f - 0.1f;
  const auto probs = softmax(expected_logits, 1.0f);
  const int n = 20000;
  std::vector<int> counts(5, 0);
  for (int i = 0; i < n; ++i) counts[s.sample(logits.data())]++;
  // 4 degrees of freedom: P(chi2 > 23.5) ~ 1e-4.
  EXPECT_LT(chi_square(counts, probs, n), 23.5);
}

TEST(Sampler, LogitBiasBansAndBoosts) {
  const auto logits = random_logits(100, 5);
  const int32_t best = argmax(logits);
  const float ninf = -std::numeric_limits<float>::infinity();
  {
    Sampler s(SamplerParams{.temperature = 0.0f, .logit_bias = {{best, ninf}}}, 100);
    EXPECT_NE(s.sample(logits.data()), best);
  }
  {
    Sampler s(SamplerParams{.temperature = 0.0f, .logit_bias = {{(best + 1) % 100, 100.0f}}}, 100);
    EXPECT_EQ(s.sample(logits.data()), (best + 1) % 100);
  }
  {
    // Banned tokens never appear in random draws either, even when they dominate.
    std::vector<float> flat(10, 0.0f);
    flat[3] = 10.0f;
    SamplerParams p = plain(3.0f, 6);
    p.logit_bias = {{3, ninf}, {4, ninf}};
    Sampler s(p, 10);
    const auto seen = draw_set(s, flat, 3000);
    EXPECT_EQ(seen.count(3), 0u);
    EXPECT_EQ(seen.count(4), 0u);
    EXPECT_EQ(seen.size(), 8u);
  }
}

TEST(Sampler, AllowedMaskRestrictsDraws) {
  const auto logits = random_logits(50, 12, 0.5f);
  std::vector<bool> allowed(50, false);
  allowed[7] = allowed[20] = allowed[33] = true;
  Sampler s(plain(1.0f, 1), 50);
  std::set<int32_t> seen;
  for (int i = 0; i < 2000; ++i) seen.insert(s.sample(logits.data(), &allowed));
  EXPECT_EQ(seen, (std::set<int32_t>{7, 20, 33}));
  Sampler g(SamplerParams{.temperature = 0.0f}, 50);
  const int32_t got = g.sample(logits.data(), &allowed);
  EXPECT_TRUE(got == 7 || got == 20 || got == 33);
}

TEST(Sampler, DrawFrequenciesMatchSoftmax) {
  const std::vector<float> logits = {0.3f, -1.2f, 1.1f, 0.0f, 0.7f, -0.4f};
  for (float t : {0.7f, 1.0f, 1.6f}) {
    Sampler s(plain(t, 1234), 6);
    const int n = 30000;
    std::vector<int> counts(6, 0);
    for (int i = 0; i < n; ++i) counts[s.sample(logits.data())]++;
    // 5 degrees of freedom: P(chi2 > 25.7) ~ 1e-4.
    EXPECT_LT(chi_square(counts, softmax(logits, t), n), 25.7) << "temperature " << t;
  }
}

TEST(Sampler, NonFiniteLogits) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> logits = {nan, 1.0f, inf, 0.5f, inf};
  Sampler s(plain(1.0f, 3), 5);
  EXPECT_EQ(draw_set(s, logits, 500), (std::set<int32_t>{2, 4}));
  std::vector<float> with_nan = {nan, 1.0f, -inf};
  Sampler g(SamplerParams{.temperature = 0.0f}, 3);
  EXPECT_EQ(g.sample(with_nan.data()), 1);
}

TEST(Sampler, RejectsBadInput) {
  EXPECT_THROW(Sampler(SamplerParams{}, 0), Error);
  EXPECT_THROW(Sampler(SamplerParams{.logit_bias = {{10, 1.0f}}}, 10), Error);
  EXPECT_THROW(Sampler(SamplerParams{.logit_bias = {{-1, 1.0f}}}, 10), Error);
  EXPECT_THROW(Sampler(SamplerParams{.repeat_penalty = 0.0f}, 10), Error);
  EXPECT_THROW(Sampler(SamplerParams{.penalty_last_n = -2}, 10), Error);
  Sampler s(SamplerParams{}, 4);
  EXPECT_THROW(s.accept(4), Error);
  EXPECT_THROW(s.accept(-1), Error);
  const std::vector<float> logits(4, 0.0f);
  std::vector<bool> none(4, false);
  EXPECT_THROW(s.sample(logits.data(), &none), Error);
  std::vector<bool> short_mask(3, true);
  EXPECT_THROW(s.sample(logits.data(), &short_mask), Error);
  EXPECT_THROW(s.sample(nullptr), Error);
}
