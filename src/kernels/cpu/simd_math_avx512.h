// Vectorized math for the AVX-512 kernels (include only from *_avx512.cpp files).
#pragma once
#include <immintrin.h>

namespace brisk::cpu::avx512 {

// e^x for 16 floats, relative error about 2e-7 (below 2 ulp) for x in [-87, 88]; inputs are
// clamped to [-104, 89] (results underflow to 0 or a denormal, or overflow to +inf). Range reduction
// x = n ln2 + r with |r| <= ln2/2 (ln2 split in two for exactness), a degree-6 Taylor/Horner
// polynomial for e^r, and scalef for the 2^n factor (no integer exponent arithmetic to overflow).
inline __m512 exp512(__m512 x) {
  const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
  const __m512 ln2_hi = _mm512_set1_ps(0.693359375f);
  const __m512 ln2_lo = _mm512_set1_ps(-2.12194440e-4f);
  x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
  x = _mm512_min_ps(x, _mm512_set1_ps(89.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, ln2_hi, x);
  r = _mm512_fnmadd_ps(n, ln2_lo, r);
  __m512 p = _mm512_set1_ps(1.0f / 720.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// tanh(y) for 16 floats as 1 - 2 / (e^2y + 1): exact limits +-1 for large |y| (e^2y -> inf or
// 0); absolute error below 3e-7 (the exp's relative error, and the rounding of the difference
// from 1 near y = 0, where the relative error grows).
inline __m512 tanh512(__m512 y) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(exp512(_mm512_add_ps(y, y)), one)));
}

// Lane j of the result = the sum of the 16 lanes of v[j] (16 horizontal sums at once, by a
// transpose-and-add tree: 45 shuffles/adds instead of 16 separate reductions).
inline __m512 hsum16x16(const __m512* v) {
  __m512 a[8], b[4], c[2];
  for (int i = 0; i < 8; ++i)  // per 128-bit lane: (x0+x2, y0+y2, x1+x3, y1+y3) of v[2i], v[2i+1]
    a[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i) {  // per 128-bit lane: the 4-element sums of 4 vectors
    const __m512d x = _mm512_castps_pd(a[2 * i]), y = _mm512_castps_pd(a[2 * i + 1]);
    b[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  for (int i = 0; i < 2; ++i)  // lanes (L0+L1, L2+L3) of b[2i] then of b[2i+1]
    c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], 0x88), _mm512_shuffle_f32x4(c[0], c[1], 0xDD));
}

}  // namespace brisk::cpu::avx512
