// Kernels of the linear-attention (Gated DeltaNet) layers: the causal depthwise conv with its
// rolling window, L2 norm, the SiLU-gated RMS norm, x * sigmoid(gate), and the gated delta rule.
//
// Every op works on runs: the tokens of one sequence, in batch order (SeqRuns, built once per op
// from the step's sequence ids by a counting sort). Sequences are independent, so the parallel
// items are (run, channel block) for the conv and (run, value head) for the delta rule.
//
// Gated delta rule. Per value head the state S [k_dim, v_dim] (row i: v_dim floats) evolves per
// token t as S := exp(g_t) S + k_t (b_t (v_t - exp(g_t) S^T k_t))^T and o_t = S^T q_t.
//  - One token (decode), and runs of up to 16 tokens (a speculative verify: bit-identical to
//    decoding them one at a time): two passes over S per token, each row decayed and read for S^T k in the first,
//    updated and read for S^T q in the second; inner loops over v_dim vectorize.
//  - Longer runs (prefill) go in chunks of C = 64 tokens (the WY / UT form of the
//    DeltaNet papers): with gc the cumulative log decay inside the chunk, D[i][j] = exp(gc_i -
//    gc_j) (j <= i) and A[i][j] = b_i (k_i . k_j) D[i][j] (j < i), T = (I + A)^-1 (unit lower
//    triangular, by forward substitution over C rows), then matrix products only:
//      U = T (b v),  W = T (b exp(gc) k),  V' = U - W S
//      O = exp(gc) q S + (q k^T ⊙ D) V'
//      S := exp(gc_last) S + (exp(gc_last - gc) k)^T V'
//    which costs about as many multiply-adds per token as the recurrent form but as products of
//    [C, k_dim] x [k_dim, v_dim] blocks that stay in L1/L2 instead of streaming S per token.
//    Decays are <= 1 wherever they multiply (g <= 0), so nothing overflows. BRISK_NO_CHUNKED_DELTA
//    runs every token through the recurrent step instead (other summation order).
// The arithmetic (conv, gated norm, delta rule) is in delta_net_x86.inc, built for the baseline
// ISA here and for AVX2 / AVX-512 in delta_net_avx2.cpp / delta_net_avx512.cpp (auto-vectorized
// axpys; BRISK_NO_SIMD_DELTA keeps the baseline build). Measured on the qwen3.5-0.8b shape, Q8_0,
// 2 threads of an AVX-512 host under load (BRISK_PROFILE, brisk bench -p 512): the chunked delta
// rule took 117 ms per layer against 153 ms for the baseline build (about 12 GFLOP/s: each axpy
// loads and stores its row, so the loops are bound by L1 traffic, not by the FMAs).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/flags.h"
#include "kernels/cpu/kernel_sets.h"
#include "kernels/cpu/ops.h"

namespace brisk::cpu {

namespace {
constexpr int64_t kDeltaChunk = 64;  // as in delta_net_x86.inc
}  // namespace

void seq_runs_build(const int32_t* seq, int64_t n_tok, int32_t n_slots, SeqRuns& runs) {
  runs.count.assign(size_t(n_slots) + 1, 0);
  for (int64_t t = 0; t < n_tok; ++t) {
    BRISK_CHECK(seq[t] >= 0 && seq[t] < n_slots, "recurrent state: token ", t, " names sequence ", seq[t],
                ", the state holds ", n_slots);
    ++runs.count[size_t(seq[t]) + 1];
  }
  runs.seq.clear();
  runs.offset.assign(1, 0);
  for (int32_t s = 0; s < n_slots; ++s) {
    if (runs.count[size_t(s) + 1] == 0) continue;
    runs.seq.push_back(s);
    runs.offset.push_back(runs.offset.back() + runs.count[size_t(s) + 1]);
  }
  // Start of each sequence's tokens, then a stable fill in batch order.
  for (int32_t s = 0; s < n_slots; ++s) runs.count[size_t(s) + 1] += runs.count[size_t(s)];
  runs.tokens.resize(size_t(n_tok));
  for (int64_t t = 0; t < n_tok; ++t) runs.tokens[size_t(runs.count[size_t(seq[t])]++)] = int32_t(t);
}

void l2_norm_rows(const L2NormArgs& a, int ith, int nth) {
  const int64_t group = a.group > 0 ? a.group : a.x.cols;
  for_each_group(a.x, group, ith, nth, [&](int64_t r, int64_t c0) {
    const float* x = a.x.row(r) + c0;
    float* y = a.out.row(r) + c0;
    const float inv = float(1.0 / std::sqrt(sum_squares(x, group) + double(a.eps)));
    for (int64_t i = 0; i < group; ++i) y[i] = x[i] * inv;
  });
}

void sigmoid_mul_rows(const SigmoidMulArgs& a, int ith, int nth) {
  int64_t begin, end;
  split_range(a.x.rows, ith, nth, &begin, &end);
  const bool per_row = a.gate.cols == 1 && a.x.cols != 1;
  for (int64_t r = begin; r < end; ++r) {
    const float* x = a.x.row(r);
    const float* g = a.gate.row(r);
    float* y = a.out.row(r);
    if (per_row) {
      const float s = 1.0f / (1.0f + std::exp(-g[0]));
      for (int64_t i = 0; i < a.x.cols; ++i) y[i] = x[i] * s;
    } else {
      for (int64_t i = 0; i < a.x.cols; ++i) y[i] = x[i] / (1.0f + std::exp(-g[i]));
    }
  }
}

int64_t delta_rule_scratch_floats(const DeltaRuleArgs& a) {
  const int64_t dk = a.k_dim, dv = a.v_dim;
  // Q, K, K^T, W [C, dk]; V, U, O [C, dv]; T, QK [C, C]; g, b, exp(gc), a row [C]; kv [dv].
  return kDeltaChunk * (4 * dk + 3 * dv + 2 * kDeltaChunk + 4) + dv + 16;
}

// The arithmetic kernels for this file's (baseline) ISA, and the dispatch to the AVX2 / AVX-512
// builds of the same source (delta_net_avx2.cpp, delta_net_avx512.cpp) by the CPU's features and
// the kill switches (BRISK_NO_SIMD_DELTA, and BRISK_NO_SIMD / BRISK_NO_AVX512 / BRISK_NO_AVX2 through
// the ops level).
#define BRISK_DELTA_NS base
namespace base {
void silu_inplace(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + std::exp(-x[i]));
}
void mul_silu(float* y, const float* z, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] *= z[i] / (1.0f + std::exp(-z[i]));
}
}  // namespace base
}  // namespace brisk::cpu

#include "kernels/cpu/delta_net_x86.inc"

namespace brisk::cpu {

// The AVX2 and AVX-512 builds (delta_net_avx2.cpp, delta_net_avx512.cpp).
#define BRISK_DELTA_DECLARE(ns)                                                                              \
  namespace ns {                                                                                              \
  void conv_state_rows(const ConvStateArgs& a, const SeqRuns& runs, int ith, int nth);                        \
  void gated_rms_norm_rows(const GatedRmsNormArgs& a, int ith, int nth);                                      \
  void delta_rule_rows(const DeltaRuleArgs& a, const SeqRuns& runs, float* scratch, bool chunked, int ith,    \
                       int nth);                                                                              \
  }
BRISK_DELTA_DECLARE(avx2)
BRISK_DELTA_DECLARE(avx512)
#undef BRISK_DELTA_DECLARE

namespace {
// The build that runs: the CPU's ops level (kernel_sets.h: its features after BRISK_CPU_MASK and
// the kill switches), or the baseline build under BRISK_NO_SIMD_DELTA.
IsaLevel level() { return flags().no_simd_delta ? IsaLevel::scalar : kernels::cpu_ops_level(); }
}  // namespace

void conv_state_rows(const ConvStateArgs& a, const SeqRuns& runs, int ith, int nth) {
  switch (level()) {
    case IsaLevel::avx512: return avx512::conv_state_rows(a, runs, ith, nth);
    case IsaLevel::avx2: return avx2::conv_state_rows(a, runs, ith, nth);
    default: return base::conv_state_rows(a, runs, ith, nth);
  }
}

void gated_rms_norm_rows(const GatedRmsNormArgs& a, int ith, int nth) {
  switch (level()) {
    case IsaLevel::avx512: return avx512::gated_rms_norm_rows(a, ith, nth);
    case IsaLevel::avx2: return avx2::gated_rms_norm_rows(a, ith, nth);
    default: return base::gated_rms_norm_rows(a, ith, nth);
  }
}

void delta_rule_rows(const DeltaRuleArgs& a, const SeqRuns& runs, float* scratch, bool chunked, int ith, int nth) {
  switch (level()) {
    case IsaLevel::avx512: return avx512::delta_rule_rows(a, runs, scratch, chunked, ith, nth);
    case IsaLevel::avx2: return avx2::delta_rule_rows(a, runs, scratch, chunked, ith, nth);
    default: return base::delta_rule_rows(a, runs, scratch, chunked, ith, nth);
  }
}

}  // namespace brisk::cpu
