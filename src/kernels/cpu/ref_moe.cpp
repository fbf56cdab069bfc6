// Scalar references of the MoE, scale and soft-cap ops: materialized softmax, a stable sort for the
// top-k, and each chosen expert evaluated token by token through the reference matmul.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/cpu/ref.h"

namespace brisk::ref {

void moe(const MoeArgs& a) {
  const int64_t n_embd = a.x.cols;
  std::vector<float> p(size_t(a.n_expert));
  std::vector<int32_t> order(size_t(a.n_expert));
  for (int64_t t = 0; t < a.x.rows; ++t) {
    std::copy(a.logits.row(t), a.logits.row(t) + a.n_expert, p.begin());
    softmax(p.data(), a.n_expert);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t i, int32_t j) { return p[size_t(i)] > p[size_t(j)]; });
    double sum = 0.0;
    for (int32_t k = 0; k < a.n_used; ++k) sum += p[size_t(order[size_t(k)])];
    std::vector<double> acc(size_t(n_embd), 0.0);
    for (int32_t k = 0; k < a.n_used; ++k) {
      const int32_t e = order[size_t(k)];
      double wk = a.norm_topk ? p[size_t(e)] / sum : p[size_t(e)];
      if (a.expert_scale) wk *= double(a.expert_scale[e]);
      const int64_t n_ff = a.gate[e].n_out;
      std::vector<float> g(static_cast<size_t>(n_ff)), u(static_cast<size_t>(n_ff)), d(static_cast<size_t>(n_embd));
      const Mat x1{.data = a.x.row(t), .rows = 1, .cols = n_embd};
      const Mat g1{.data = g.data(), .rows = 1, .cols = n_ff};
      const Mat u1{.data = u.data(), .rows = 1, .cols = n_ff};
      matmul({.out = g1, .x = x1, .w = a.gate[e]});
      matmul({.out = u1, .x = x1, .w = a.up[e]});
      gated_act({.out = g1, .gate = g1, .up = u1, .act = a.act});
      matmul({.out = {.data = d.data(), .rows = 1, .cols = n_embd}, .x = g1, .w = a.down[e]});
      for (int64_t i = 0; i < n_embd; ++i) acc[size_t(i)] += wk * double(d[size_t(i)]);
    }
    for (int64_t i = 0; i < n_embd; ++i) a.out.row(t)[i] = float(acc[size_t(i)]);
  }
}

void scale(const ScaleArgs& a) {
  for (int64_t r = 0; r < a.x.rows; ++r)
    for (int64_t i = 0; i < a.x.cols; ++i) a.out.row(r)[i] = float(double(a.x.row(r)[i]) * double(a.scale));
}

void softcap(const SoftcapArgs& a) {
  for (int64_t r = 0; r < a.x.rows; ++r)
    for (int64_t i = 0; i < a.x.cols; ++i)
      a.x.row(r)[i] = float(double(a.cap) * std::tanh(double(a.x.row(r)[i]) / double(a.cap)));
}

}  // namespace brisk::ref
