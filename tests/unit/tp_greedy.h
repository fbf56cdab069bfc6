// Shared by the tensor-parallel tests: greedy decoding of a context with every step's logits
// kept, and the largest logit difference between two such runs.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/engine_api.h"

namespace brisk::test {

// Greedy decode of n tokens after the prompt (sequence 0); every step's logits into *logits.
inline std::vector<int32_t> tp_greedy(Context& ctx, const std::vector<int32_t>& prompt, int32_t n,
                                      std::vector<std::vector<float>>* logits) {
  std::vector<BatchToken> b;
  for (size_t i = 0; i < prompt.size(); ++i)
    b.push_back({.token = prompt[i], .pos = int32_t(i), .seq = 0, .want_logits = i + 1 == prompt.size()});
  ctx.decode(b);
  std::vector<int32_t> ids;
  const int32_t nv = ctx.n_vocab();
  for (int32_t step = 0; step < n; ++step) {
    const float* l = ctx.logits(0);
    logits->emplace_back(l, l + nv);
    ids.push_back(int32_t(std::max_element(l, l + nv) - l));
    ctx.decode({{.token = ids.back(), .pos = int32_t(prompt.size()) + step, .seq = 0, .want_logits = true}});
  }
  return ids;
}

// The largest |a - b| over every step, relative to the step's largest |a| (at least 1).
inline float tp_worst_difference(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  float worst = 0.0f;
  for (size_t s = 0; s < a.size(); ++s) {
    float peak = 1.0f;
    for (float v : a[s]) peak = std::max(peak, std::fabs(v));
    for (size_t i = 0; i < a[s].size(); ++i) worst = std::max(worst, std::fabs(a[s][i] - b[s][i]) / peak);
  }
  return worst;
}

}  // namespace brisk::test
