// AVX-512 build of the linear-attention kernels (delta_net_x86.inc): 16-float vectors, and the
// SiLUs through the vectorized exp of simd_math_avx512.h.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/simd_math_avx512.h"

namespace brisk::cpu::avx512 {
namespace {
// z * sigmoid(z) for the 16 lanes of mask m.
inline __m512 silu16(__mmask16 m, const float* z) {
  const __m512 x = _mm512_maskz_loadu_ps(m, z);
  return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), exp512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}
inline __mmask16 tail(int64_t left) { return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1u); }
}  // namespace
void silu_inplace(float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail(n - i);
    _mm512_mask_storeu_ps(x + i, m, silu16(m, x + i));
  }
}
void mul_silu(float* y, const float* z, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + i), silu16(m, z + i)));
  }
}
}  // namespace brisk::cpu::avx512

#define BRISK_DELTA_NS avx512
#include "kernels/cpu/delta_net_x86.inc"
