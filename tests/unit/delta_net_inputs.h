// Inputs of the linear-attention op tests (CPU and CUDA): a batch of two interleaved sequences
// and random delta-rule inputs with l2-normalized q / k, as the model gives them.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "random_values.h"
#include "core/op_args.h"
#include "kernels/cpu/ref.h"

namespace brisk::test {

inline float delta_max_abs(const std::vector<float>& a) {
  float m = 0.0f;
  for (float v : a) m = std::max(m, std::fabs(v));
  return m;
}

inline float delta_max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// A batch of two sequences (slots 0 and 2 of 3) whose tokens interleave: sequence 0 has n0
// tokens from position p0, sequence 2 n2 tokens from p2.
struct DeltaBatch {
  std::vector<int32_t> seq, pos;
  DeltaBatch(int32_t n0, int32_t p0, int32_t n2, int32_t p2) {
    for (int32_t i = 0; i < std::max(n0, n2); ++i) {
      if (i < n0) {
        seq.push_back(0);
        pos.push_back(p0 + i);
      }
      if (i < n2) {
        seq.push_back(2);
        pos.push_back(p2 + i);
      }
    }
  }
  int64_t n() const { return int64_t(seq.size()); }
};

struct DeltaCase {
  int32_t n_k_head, n_v_head, k_dim, v_dim;
  bool tiled;
};

// Inputs of a delta-rule call; l2-normalized q / k as the model gives them.
struct DeltaInputs {
  DeltaCase c;
  int64_t n;
  std::vector<float> q, k, v, alpha, beta, rate, dt, state;
  DeltaInputs(const DeltaCase& c_, int64_t n_tok, uint32_t seed) : c(c_), n(n_tok) {
    const int64_t kw = int64_t(c.n_k_head) * c.k_dim, vw = int64_t(c.n_v_head) * c.v_dim;
    q = gaussian(size_t(n * kw), seed);
    k = gaussian(size_t(n * kw), seed + 1);
    v = gaussian(size_t(n * vw), seed + 2);
    alpha = gaussian(size_t(n * c.n_v_head), seed + 3);
    beta = gaussian(size_t(n * c.n_v_head), seed + 4);
    rate = gaussian(size_t(c.n_v_head), seed + 5, 0.5f);
    for (float& r : rate) r = -std::exp(r);
    dt = gaussian(size_t(c.n_v_head), seed + 6, 0.5f);
    state = gaussian(size_t(3 * c.n_v_head * c.k_dim * c.v_dim), seed + 7, 0.3f);
    for (auto* m : {&q, &k}) {
      Mat x{.data = m->data(), .rows = n, .cols = kw};
      ref::l2_norm({.out = x, .x = x, .group = c.k_dim, .eps = 1e-6f});
    }
  }
  // Rows [r0, r0 + rows) of the batch.
  DeltaRuleArgs args(std::vector<float>& out, const DeltaBatch& b, int64_t r0, int64_t rows) {
    const int64_t kw = int64_t(c.n_k_head) * c.k_dim, vw = int64_t(c.n_v_head) * c.v_dim;
    return DeltaRuleArgs{.out = {.data = out.data() + r0 * vw, .rows = rows, .cols = vw},
                         .q = {.data = q.data() + r0 * kw, .rows = rows, .cols = kw},
                         .k = {.data = k.data() + r0 * kw, .rows = rows, .cols = kw},
                         .v = {.data = v.data() + r0 * vw, .rows = rows, .cols = vw},
                         .alpha = {.data = alpha.data() + r0 * c.n_v_head, .rows = rows, .cols = c.n_v_head},
                         .beta = {.data = beta.data() + r0 * c.n_v_head, .rows = rows, .cols = c.n_v_head},
                         .decay_rate = rate.data(),
                         .dt_bias = dt.data(),
                         .state = {.data = state.data(), .slot_floats = int64_t(c.n_v_head) * c.k_dim * c.v_dim,
                                   .n_slots = 3},
                         .seq = b.seq.data() + r0,
                         .pos = b.pos.data() + r0,
                         .n_k_head = c.n_k_head,
                         .n_v_head = c.n_v_head,
                         .k_dim = c.k_dim,
                         .v_dim = c.v_dim,
                         .kv_tiled = c.tiled,
                         .scale = float(1.0 / std::sqrt(double(c.k_dim)))};
  }
};

}  // namespace brisk::test
