// The AVX-512 float GEMM of gemm_float.h (layout and blocking described there).
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "core/fp16.h"
#include "kernels/cpu/gemm_float.h"

namespace brisk::kernels::avx512 {

namespace {

constexpr int64_t kKc = 256;  // input columns per block
constexpr int64_t kNr = 32;   // weight rows per panel (two vectors)
constexpr int64_t kMr = 8;    // tokens per tile

// n elements of a row in `type` from element k0 into floats.
void to_float(QuantType type, const void* row, int64_t k0, int64_t n, float* out) {
  if (type == QuantType::F32) {
    std::copy(static_cast<const float*>(row) + k0, static_cast<const float*>(row) + k0 + n, out);
    return;
  }
  const uint16_t* h = static_cast<const uint16_t*>(row) + k0;
  int64_t i = 0;
  if (type == QuantType::F16) {
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_ps(out + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i))));
    for (; i < n; ++i) out[i] = fp16_to_f32(h[i]);
  } else {
    for (; i + 16 <= n; i += 16) {
      const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i)));
      _mm512_storeu_ps(out + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
    }
    for (; i < n; ++i) out[i] = bf16_to_f32(h[i]);
  }
}

}  // namespace

void gemm_float_rows(const FloatGemmParams& p) {
  thread_local std::vector<float> xs, wp, tmp;
  const int64_t n_groups = (p.n_tokens + kMr - 1) / kMr;
  xs.resize(size_t(n_groups * kKc * kMr));
  wp.resize(size_t(kKc * kNr));
  tmp.resize(size_t(kKc));
  for (int64_t k0 = 0; k0 < p.k; k0 += kKc) {
    const int64_t kc = std::min(kKc, p.k - k0);
    // Activations of this block: [group][k][8], the last group padded with its last token.
    for (int64_t t = 0; t < n_groups * kMr; ++t) {
      const int64_t src = std::min(t, p.n_tokens - 1);
      to_float(p.x_type, static_cast<const uint8_t*>(p.x) + size_t(src) * p.x_stride, k0, kc, tmp.data());
      float* g = xs.data() + (t / kMr) * kKc * kMr + t % kMr;
      for (int64_t k = 0; k < kc; ++k) g[k * kMr] = tmp[size_t(k)];
    }
    for (int64_t r0 = 0; r0 < p.n_rows; r0 += kNr) {
      const int64_t nr = std::min(kNr, p.n_rows - r0);
      // The weight panel, transposed: [k][32], rows past n_rows zero.
      for (int64_t r = 0; r < kNr; ++r) {
        if (r < nr) to_float(p.weight_type, static_cast<const uint8_t*>(p.w) + size_t(r0 + r) * p.row_bytes, k0, kc, tmp.data());
        for (int64_t k = 0; k < kc; ++k) wp[size_t(k * kNr + r)] = r < nr ? tmp[size_t(k)] : 0.0f;
      }
      const __mmask16 m0 = nr >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << nr) - 1u);
      const __mmask16 m1 = nr >= 32 ? __mmask16(0xFFFF) : nr > 16 ? __mmask16((1u << (nr - 16)) - 1u) : __mmask16(0);
      for (int64_t g = 0; g < n_groups; ++g) {
        const int64_t t0 = g * kMr, mt = std::min(kMr, p.n_tokens - t0);
        __m512 acc[kMr][2];
        for (int64_t i = 0; i < kMr; ++i) {
          float* y = p.y + (t0 + std::min(i, mt - 1)) * p.y_stride + r0;
          acc[i][0] = k0 == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m0, y);
          acc[i][1] = k0 == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m1, y + 16);
        }
        const float* xg = xs.data() + g * kKc * kMr;
        const float* wk = wp.data();
        for (int64_t k = 0; k < kc; ++k, xg += kMr, wk += kNr) {
          const __m512 w0 = _mm512_loadu_ps(wk), w1 = _mm512_loadu_ps(wk + 16);
          for (int64_t i = 0; i < kMr; ++i) {
            const __m512 xb = _mm512_set1_ps(xg[i]);
            acc[i][0] = _mm512_fmadd_ps(xb, w0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(xb, w1, acc[i][1]);
          }
        }
        for (int64_t i = 0; i < mt; ++i) {
          float* y = p.y + (t0 + i) * p.y_stride + r0;
          _mm512_mask_storeu_ps(y, m0, acc[i][0]);
          _mm512_mask_storeu_ps(y + 16, m1, acc[i][1]);
        }
      }
    }
  }
}

}  // namespace brisk::kernels::avx512
