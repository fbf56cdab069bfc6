// AVX2 + FMA + F16C version of attention_rows (attention.cpp has the layout and the
// online-softmax scheme; kernels/cpu/ref.h the reference it is tested against). Same loop
// structure; the per-position work is vectorized 8 floats at a time: q·k with FMA, K/V rows
// of an F16 cache converted with F16C on the fly, and the rescaled accumulator update as one
// FMA per 8 dims. Q8_0 caches (and tiled ones) are read through kv_read_f32. Needs
// head_dim % 8 == 0 (the dispatcher falls back to the scalar kernel otherwise).
// Decode cost per (token, head) is O(positions * head_dim); at long contexts this kernel, not
// the matmuls, would dominate a scalar build.
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/ops.h"

namespace brisk::cpu {

namespace {

inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
  return _mm_cvtss_f32(lo);
}

inline __m256 load8(QuantType type, const void* base, int32_t i) {
  if (type == QuantType::F16)
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + i)));
  return _mm256_loadu_ps(static_cast<const float*>(base) + i);
}

}  // namespace

void attention_rows_avx2(const AttentionArgs& a, float* scratch, int ith, int nth) {
  const int32_t hd = a.head_dim;
  const int32_t group = a.n_head / a.n_head_kv;
  float* kbuf = scratch;
  float* vbuf = scratch + hd;
  float* acc = scratch + 2 * hd;
  // K / V rows read in place (F32 / F16 rows), else converted into kbuf / vbuf first.
  const bool k_direct = (a.k_cache.type == QuantType::F32 || a.k_cache.type == QuantType::F16) && !a.k_cache.tiled;
  const bool v_direct = (a.v_cache.type == QuantType::F32 || a.v_cache.type == QuantType::F16) && !a.v_cache.tiled;
  const QuantType kt = k_direct ? a.k_cache.type : QuantType::F32;  // type of what load8 reads
  const QuantType vt = v_direct ? a.v_cache.type : QuantType::F32;
  int64_t begin, end;
  attention_split_items(a, a.n_head, ith, nth, &begin, &end);
  for (int64_t item = begin; item < end; ++item) {
    const int64_t t = item / a.n_head;
    const int32_t h = int32_t(item % a.n_head);
    const int32_t kvh = h / group;
    const float* q = a.q.row(t) + int64_t(h) * hd;
    const int64_t s = a.seq[t], p = a.pos[t];
    const int64_t start = a.key_begin(t);
    const size_t k_off = kv_segment_offset(a.k_cache, int64_t(kvh) * hd);
    const size_t v_off = kv_segment_offset(a.v_cache, int64_t(kvh) * hd);
    float m = -std::numeric_limits<float>::infinity();
    float l = 0.0f;
    std::memset(acc, 0, sizeof(float) * size_t(hd));
    for (int64_t j = start; j <= p; ++j) {
      const void* k = kbuf;
      const void* v = vbuf;
      if (k_direct) k = a.k_cache.row(s, j) + k_off;
      else kv_read_f32(a.k_cache, s, j, int64_t(kvh) * hd, hd, kbuf);
      if (v_direct) v = a.v_cache.row(s, j) + v_off;
      else kv_read_f32(a.v_cache, s, j, int64_t(kvh) * hd, hd, vbuf);
      __m256 dot = _mm256_setzero_ps();
      for (int32_t i = 0; i < hd; i += 8) dot = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8(kt, k, i), dot);
      float score = hsum(dot) * a.scale;
      if (a.softcap > 0.0f) score = a.softcap * std::tanh(score / a.softcap);
      if (score > m) {
        const __m256 corr = _mm256_set1_ps(std::exp(m - score));
        l *= std::exp(m - score);
        for (int32_t i = 0; i < hd; i += 8) _mm256_storeu_ps(acc + i, _mm256_mul_ps(_mm256_loadu_ps(acc + i), corr));
        m = score;
      }
      const float w = std::exp(score - m);
      l += w;
      const __m256 wv = _mm256_set1_ps(w);
      for (int32_t i = 0; i < hd; i += 8)
        _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(wv, load8(vt, v, i), _mm256_loadu_ps(acc + i)));
    }
    float* out = a.out.row(t) + int64_t(h) * hd;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int32_t i = 0; i < hd; ++i) out[i] = acc[i] * inv;
  }
}

}  // namespace brisk::cpu
