// Mixture-of-experts routing and logit soft-capping. Routing: softmax over the router logits
// of a token, the n_used most probable experts (ties: lower id first), optionally renormalized
// and scaled per expert.
// The expert MLPs themselves run as ordinary matmuls over each expert's gathered tokens
// (backend/cpu/cpu_backend.cpp).
#include <algorithm>
#include <cmath>

#include "kernels/cpu/ops.h"

namespace brisk::cpu {

void moe_route_rows(const MoeArgs& a, int32_t* ids, float* w, int ith, int nth) {
  int64_t begin = 0, end = 0;
  split_range(a.logits.rows, ith, nth, &begin, &end);
  const int32_t ne = a.n_expert;
  const int32_t k = a.n_used;
  for (int64_t t = begin; t < end; ++t) {
    const float* l = a.logits.row(t);  // [n_expert]
    float mx = l[0];
    for (int32_t e = 1; e < ne; ++e) mx = std::max(mx, l[e]);
    double sum = 0.0;
    for (int32_t e = 0; e < ne; ++e) sum += std::exp(double(l[e]) - double(mx));
    int32_t* ti = ids + t * k;
    float* tw = w + t * k;
    // Selection by repeated scan: k and n_expert are small (<= a few hundred).
    double chosen = 0.0;
    for (int32_t j = 0; j < k; ++j) {
      int32_t best = -1;
      for (int32_t e = 0; e < ne; ++e) {
        bool taken = false;
        for (int32_t q = 0; q < j; ++q) taken = taken || ti[q] == e;
        if (!taken && (best < 0 || l[e] > l[best])) best = e;
      }
      ti[j] = best;
      const double p = std::exp(double(l[best]) - double(mx)) / sum;
      tw[j] = float(p);
      chosen += p;
    }
    if (a.norm_topk)
      for (int32_t j = 0; j < k; ++j) tw[j] = float(double(tw[j]) / chosen);
    if (a.expert_scale)
      for (int32_t j = 0; j < k; ++j) tw[j] *= a.expert_scale[ti[j]];
  }
}

void softcap_rows(const SoftcapArgs& a, bool simd, int ith, int nth) {
  // Items: (row, span of up to kSpan columns), so that one row of 262k logits splits too.
  constexpr int64_t kSpan = 4096;
  const int64_t spans = (a.x.cols + kSpan - 1) / kSpan;
  int64_t begin = 0, end = 0;
  split_range(a.x.rows * spans, ith, nth, &begin, &end);
  const float inv = 1.0f / a.cap;
  for (int64_t item = begin; item < end; ++item) {
    const int64_t c0 = (item % spans) * kSpan, n = std::min(kSpan, a.x.cols - c0);
    float* x = a.x.row(item / spans) + c0;
    if (simd) {
      softcap_span_avx512(x, n, a.cap);
      continue;
    }
    for (int64_t i = 0; i < n; ++i) x[i] = a.cap * std::tanh(x[i] * inv);
  }
}

}  // namespace brisk::cpu
