// AVX-512 kernels of the encoder ops: GELU and dense (bidirectional) attention.
//
// GELU (erf form), 16 columns at a time: gelu(x) = x / 2 * (1 + erf(x / sqrt(2))) with
// erf(z) = sign(z) * (1 - poly(t) * e^(-z^2)), t = 1 / (1 + p |z|) (Abramowitz & Stegun 7.1.26,
// |error| <= 1.5e-7) and the vectorized exp. std::erf per element (unary_rows, the reference)
// cost about 20 ns: 0.4 s per 30 s window of a base-sized speech encoder on one core.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/encoder_ops.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/simd_math_avx512.h"

namespace brisk::cpu {

namespace {

inline __m512 gelu_erf16(__m512 x) {
  const __m512 z = _mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f));
  const __m512 az = _mm512_abs_ps(z);
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(_mm512_set1_ps(0.3275911f), az, one));
  __m512 p = _mm512_set1_ps(1.061405429f);
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.453152027f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.421413741f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.284496736f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.254829592f));
  p = _mm512_mul_ps(p, t);
  const __m512 e = avx512::exp512(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(az, az)));
  const __m512 erf_abs = _mm512_fnmadd_ps(p, e, one);  // 1 - p * e
  // erf(z) carries the sign of z: 1 + erf(z) = 1 +- erf(|z|).
  const __mmask16 neg = _mm512_cmp_ps_mask(z, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __m512 one_plus = _mm512_mask_sub_ps(_mm512_add_ps(one, erf_abs), neg, one, erf_abs);
  return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), one_plus);
}

}  // namespace

void unary_rows_avx512(const UnaryArgs& a, int ith, int nth) {
  int64_t begin, end;
  split_range(a.x.rows, ith, nth, &begin, &end);
  for (int64_t r = begin; r < end; ++r) {
    const float* x = a.x.row(r);
    float* o = a.out.row(r);
    for (int64_t i = 0; i < a.x.cols; i += 16) {
      const int64_t left = a.x.cols - i;
      const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1u);
      _mm512_mask_storeu_ps(o + i, m, gelu_erf16(_mm512_maskz_loadu_ps(m, x + i)));
    }
  }
}

}  // namespace brisk::cpu

namespace brisk::cpu {

// See encoder_ops.h. Items are (sequence, KV head, query head of the group, block of 8 queries),
// in that order, so a part rebuilds the transposed keys only when it moves to another KV head.
void attention_dense_rows_avx512(const AttentionDenseArgs& a, float* scratch, int ith, int nth) {
  constexpr int64_t kQ = 8;  // queries per item
  const int64_t hd = a.head_dim, n_max = a.max_seq_len(), n_pad_max = (n_max + 15) / 16 * 16;
  const int32_t group = a.n_head / a.n_head_kv;
  // Items of sequence s start at item_start[s]: n_head_kv * group * ceil(len / kQ) each (the
  // scratch rows are laid out for the longest sequence).
  const int64_t per_block = int64_t(a.n_head_kv) * group;
  std::vector<int64_t> item_start(size_t(a.n_seq) + 1, 0);
  for (int64_t s = 0; s < a.n_seq; ++s) {
    const int64_t len = a.seq_begin(s + 1) - a.seq_begin(s);
    item_start[size_t(s) + 1] = item_start[size_t(s)] + per_block * ((len + kQ - 1) / kQ);
  }
  int64_t begin, end;
  split_range(item_start.back(), ith, nth, &begin, &end);
  float* kt = scratch;                     // [hd, n_pad]: keys of the current (sequence, KV head), transposed
  float* sc = scratch + hd * n_pad_max;    // [kQ, n_pad]: scores, then probabilities
  const __m512 scale = _mm512_set1_ps(a.scale);
  int64_t loaded = -1;
  int64_t s = 0;
  for (int64_t item = begin; item < end; ++item) {
    while (item >= item_start[size_t(s) + 1]) ++s;
    const int64_t b = a.seq_begin(s), n = a.seq_begin(s + 1) - b, n_pad = (n + 15) / 16 * 16;
    const int64_t q_blocks = (n + kQ - 1) / kQ, local = item - item_start[size_t(s)];
    const int64_t qb = local % q_blocks, g = local / q_blocks % group, kvh = local / q_blocks / group;
    const int64_t sk = s * a.n_head_kv + kvh, h = kvh * group + g;
    if (sk != loaded) {
      for (int64_t j = 0; j < n_pad; ++j) {
        const float* kr = j < n ? a.k.row(b + j) + kvh * hd : nullptr;
        for (int64_t c = 0; c < hd; ++c) kt[c * n_pad + j] = kr ? kr[c] : 0.0f;
      }
      loaded = sk;
    }
    const int64_t q0 = qb * kQ, nq = std::min(kQ, n - q0);
    const float* q[kQ];
    for (int64_t i = 0; i < kQ; ++i) q[i] = a.q.row(b + q0 + std::min(i, nq - 1)) + h * hd;
    // The keys of query i: [lo[i], hi[i]) of the sequence (all of it without a window); the
    // passes below cover the blocks of 16 keys that meet [lo[0], hi[nq - 1]).
    int64_t lo[kQ], hi[kQ];
    for (int64_t i = 0; i < nq; ++i) {
      a.key_range(b + q0 + i, b, b + n, &lo[i], &hi[i]);
      lo[i] -= b;
      hi[i] -= b;
    }
    const int64_t j_first = lo[0] / 16 * 16, j_last = hi[nq - 1];
    // Scores of 8 queries for 16 keys per pass over the transposed key columns.
    for (int64_t j0 = j_first; j0 < j_last; j0 += 16) {
      __m512 acc[kQ];
      for (int64_t i = 0; i < kQ; ++i) acc[i] = _mm512_setzero_ps();
      for (int64_t c = 0; c < hd; ++c) {
        const __m512 kv = _mm512_loadu_ps(kt + c * n_pad + j0);
        for (int64_t i = 0; i < kQ; ++i) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(q[i][c]), kv, acc[i]);
      }
      for (int64_t i = 0; i < kQ; ++i) _mm512_storeu_ps(sc + i * n_pad + j0, _mm512_mul_ps(acc[i], scale));
    }
    // Softmax of each row over its keys [lo, hi) (0 elsewhere in the blocks covered).
    float inv[kQ];
    auto in_range = [](int64_t j, int64_t l, int64_t h) {  // bit t: l <= j + t < h
      const int64_t first = std::max<int64_t>(l - j, 0), last = std::min<int64_t>(h - j, 16);
      return first >= last ? __mmask16(0) : __mmask16(((1u << last) - 1u) & ~((1u << first) - 1u));
    };
    for (int64_t i = 0; i < nq; ++i) {
      float* row = sc + i * n_pad;
      __m512 mx = _mm512_set1_ps(-INFINITY);
      for (int64_t j = lo[i] / 16 * 16; j < hi[i]; j += 16)
        mx = _mm512_mask_max_ps(mx, in_range(j, lo[i], hi[i]), mx, _mm512_loadu_ps(row + j));
      const __m512 vmax = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
      __m512 sum = _mm512_setzero_ps();
      for (int64_t j = j_first; j < j_last; j += 16) {
        const __mmask16 m = in_range(j, lo[i], hi[i]);
        const __m512 p = _mm512_maskz_mov_ps(m, avx512::exp512(_mm512_sub_ps(_mm512_loadu_ps(row + j), vmax)));
        _mm512_storeu_ps(row + j, p);
        sum = _mm512_add_ps(sum, p);
      }
      inv[i] = 1.0f / _mm512_reduce_add_ps(sum);
    }
    // Weighted sums of the value rows, 4 queries x 64 dims at a time.
    for (int64_t i0 = 0; i0 < nq; i0 += 4) {
      const int64_t ni = std::min<int64_t>(4, nq - i0);
      for (int64_t d0 = 0; d0 < hd; d0 += 64) {
        const int64_t nd = std::min<int64_t>(4, (hd - d0) / 16);
        __m512 acc[4][4];
        for (int64_t ii = 0; ii < 4; ++ii)
          for (int64_t dd = 0; dd < 4; ++dd) acc[ii][dd] = _mm512_setzero_ps();
        for (int64_t j = lo[i0]; j < hi[i0 + ni - 1]; ++j) {
          const float* vr = a.v.row(b + j) + kvh * hd + d0;
          __m512 v[4];
          for (int64_t dd = 0; dd < nd; ++dd) v[dd] = _mm512_loadu_ps(vr + 16 * dd);
          for (int64_t ii = 0; ii < ni; ++ii) {
            const __m512 p = _mm512_set1_ps(sc[(i0 + ii) * n_pad + j]);
            for (int64_t dd = 0; dd < nd; ++dd) acc[ii][dd] = _mm512_fmadd_ps(p, v[dd], acc[ii][dd]);
          }
        }
        for (int64_t ii = 0; ii < ni; ++ii) {
          float* o = a.out.row(b + q0 + i0 + ii) + h * hd + d0;
          const __m512 w = _mm512_set1_ps(inv[i0 + ii]);
          for (int64_t dd = 0; dd < nd; ++dd) _mm512_storeu_ps(o + 16 * dd, _mm512_mul_ps(acc[ii][dd], w));
        }
      }
    }
  }
}

}  // namespace brisk::cpu
