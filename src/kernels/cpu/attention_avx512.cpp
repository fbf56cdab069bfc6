// AVX-512 attention (same contract as attention_rows in attention.cpp: causal, GQA, sliding
// window, soft-capping; the scalar kernel in kernels/cpu/ref.h is the reference).
//
// Work items are (token, KV head) pairs: the query heads of one GQA group share every K/V row,
// which is loaded (and converted from F16 / dequantized from Q8_0) once per tile for all of
// them. Positions are taken in tiles of 16, flash-attention style:
//   kt, vt:  (16, head_dim) floats of the tile's K and V rows
//   scores:  16 lanes = q_h · k_j for the tile's positions j (one partial vector per position,
//            reduced 16 at a time by a transpose-and-add tree), times scale, soft-capped
//   m, l:    running max and sum per head; acc (head_dim) rescaled by exp(m_old - m_new) once
//            per tile, then acc += p_j * v_j for the tile's positions (p = exp(scores - m_new))
// exp is vectorized (simd_math_avx512.h). Needs head_dim % 16 == 0 (the caller checks).
// GCC 12's AVX-512 headers trip its own (maybe-)uninitialized warnings (false positives).
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/simd_math_avx512.h"

namespace brisk::cpu {

namespace {

constexpr int kTile = 16;

size_t segment_offset(const KvView& v, int64_t offset) {
  const QuantTypeInfo& info = quant_type_info(v.type);
  return size_t(offset / info.block_size) * info.type_size;
}

// Rows j0..j0+n-1 of one KV head as floats into out (kTile, hd); rows n..15 zero.
void load_tile(const KvView& v, int64_t seq, int64_t j0, int n, size_t byte_off, int32_t hd, float* out) {
  for (int j = 0; j < n; ++j) {
    const uint8_t* src = v.row(seq, j0 + j) + byte_off;
    float* dst = out + size_t(j) * size_t(hd);
    if (v.type == QuantType::F16) {
      for (int32_t i = 0; i < hd; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(
                                      reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(src) + i))));
    } else if (v.type == QuantType::F32) {
      std::memcpy(dst, src, sizeof(float) * size_t(hd));
    } else {
      row_to_f32(v.type, src, dst, hd);
    }
  }
  if (n < kTile) std::memset(out + size_t(n) * size_t(hd), 0, sizeof(float) * size_t(kTile - n) * size_t(hd));
}

}  // namespace

int64_t attention_avx512_scratch_floats(int32_t group, int32_t head_dim) {
  return int64_t(2 * kTile + group) * head_dim + 2 * group;
}

void attention_rows_avx512(const AttentionArgs& a, float* scratch, int ith, int nth) {
  const int32_t hd = a.head_dim;
  const int32_t group = a.n_head / a.n_head_kv;
  const int32_t nc = hd / 16;  // zmm chunks per head
  float* kt = scratch;
  float* vt = kt + kTile * hd;
  float* acc = vt + kTile * hd;  // (group, hd)
  float* m = acc + group * hd;   // (group)
  float* l = m + group;          // (group)
  int64_t begin, end;
  split_range(a.q.rows * a.n_head_kv, ith, nth, &begin, &end);
  for (int64_t item = begin; item < end; ++item) {
    const int64_t t = item / a.n_head_kv;
    const int32_t kvh = int32_t(item % a.n_head_kv);
    const int64_t s = a.seq[t], p = a.pos[t];
    const int64_t start = a.window > 0 && p - a.window + 1 > 0 ? p - a.window + 1 : 0;
    const size_t k_off = segment_offset(a.k_cache, int64_t(kvh) * hd);
    const size_t v_off = segment_offset(a.v_cache, int64_t(kvh) * hd);
    for (int32_t g = 0; g < group; ++g) {
      m[g] = -std::numeric_limits<float>::infinity();
      l[g] = 0.0f;
    }
    std::memset(acc, 0, sizeof(float) * size_t(group) * size_t(hd));
    for (int64_t j0 = start; j0 <= p; j0 += kTile) {
      const int n = int(std::min<int64_t>(kTile, p + 1 - j0));
      const __mmask16 valid = __mmask16((1u << n) - 1u);
      load_tile(a.k_cache, s, j0, n, k_off, hd, kt);
      load_tile(a.v_cache, s, j0, n, v_off, hd, vt);
      for (int32_t g = 0; g < group; ++g) {
        const float* q = a.q.row(t) + int64_t(kvh * group + g) * hd;
        __m512 part[kTile];
        for (int j = 0; j < kTile; ++j) {
          __m512 d = _mm512_setzero_ps();
          for (int32_t c = 0; c < nc; ++c)
            d = _mm512_fmadd_ps(_mm512_loadu_ps(q + 16 * c), _mm512_loadu_ps(kt + j * hd + 16 * c), d);
          part[j] = d;
        }
        __m512 sc = _mm512_mul_ps(avx512::hsum16x16(part), _mm512_set1_ps(a.scale));
        if (a.softcap > 0.0f) {
          alignas(64) float tmp[kTile];
          _mm512_store_ps(tmp, sc);
          for (int j = 0; j < kTile; ++j) tmp[j] = a.softcap * std::tanh(tmp[j] / a.softcap);
          sc = _mm512_load_ps(tmp);
        }
        const float tile_max = _mm512_mask_reduce_max_ps(valid, sc);
        const float m_new = std::max(m[g], tile_max);
        const __m512 pw = _mm512_maskz_mov_ps(valid, avx512::exp512(_mm512_sub_ps(sc, _mm512_set1_ps(m_new))));
        const float corr = std::exp(m[g] - m_new);  // 0 on the first tile (m = -inf)
        l[g] = l[g] * corr + _mm512_reduce_add_ps(pw);
        m[g] = m_new;
        alignas(64) float w[kTile];
        _mm512_store_ps(w, pw);
        float* ag = acc + g * hd;
        const __m512 cv = _mm512_set1_ps(corr);
        for (int32_t c = 0; c < nc; ++c) {
          __m512 x = _mm512_mul_ps(_mm512_loadu_ps(ag + 16 * c), cv);
          for (int j = 0; j < n; ++j) x = _mm512_fmadd_ps(_mm512_set1_ps(w[j]), _mm512_loadu_ps(vt + j * hd + 16 * c), x);
          _mm512_storeu_ps(ag + 16 * c, x);
        }
      }
    }
    for (int32_t g = 0; g < group; ++g) {
      float* out = a.out.row(t) + int64_t(kvh * group + g) * hd;
      const float inv = l[g] > 0.0f ? 1.0f / l[g] : 0.0f;
      for (int32_t i = 0; i < hd; ++i) out[i] = acc[g * hd + i] * inv;
    }
  }
}

}  // namespace brisk::cpu
