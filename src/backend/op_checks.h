// Argument checks that more than one backend runs before an op, so that every backend refuses
// the same inputs with the same message (where the data lives is each backend's own check).
#pragma once
#include <cstdint>

#include "core/error.h"
#include "core/op_args.h"

namespace brisk {

// The gated delta rule's head layout and the shapes of q, k, v, alpha, beta and out.
inline void check_delta_rule_shapes(const DeltaRuleArgs& a) {
  BRISK_CHECK(a.n_k_head > 0 && a.n_v_head > 0 && a.n_v_head % a.n_k_head == 0 && a.k_dim > 0 && a.v_dim > 0 &&
                  a.decay_rate && a.dt_bias,
              "delta_rule: ", a.n_v_head, " value heads are not a multiple of ", a.n_k_head,
              " key heads, or a head size / decay vector is missing");
  const int64_t n_tok = a.q.rows, kw = int64_t(a.n_k_head) * a.k_dim, vw = int64_t(a.n_v_head) * a.v_dim;
  const struct {
    const Mat& m;
    int64_t cols;
    const char* what;
  } mats[] = {{a.q, kw, "q"},           {a.k, kw, "k"},           {a.v, vw, "v"},
              {a.alpha, a.n_v_head, "alpha"}, {a.beta, a.n_v_head, "beta"}, {a.out, vw, "out"}};
  for (const auto& x : mats)
    BRISK_CHECK(x.m.data != nullptr && x.m.rows == n_tok && x.m.cols == x.cols && x.m.row_stride() >= x.cols,
                "delta_rule: ", x.what, " is [", x.m.rows, ", ", x.m.cols, "], expected [", n_tok, ", ", x.cols, "]");
}

}  // namespace brisk
