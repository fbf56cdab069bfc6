// AVX-512 gated activations (same contract as gated_act_rows in elementwise.cpp, which is the
// reference): SwiGLU out = silu(gate) * up with silu(x) = x / (1 + e^-x), and GeGLU
// out = gelu_tanh(gate) * up with tanh(y) = 1 - 2 / (e^2y + 1); 16 columns at a time with the
// vectorized exp, the tail of a row masked. Also the logit softcap cap * tanh(x / cap).
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/simd_math_avx512.h"

namespace brisk::cpu {

namespace {

inline __m512 silu16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(x, _mm512_add_ps(one, avx512::exp512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

inline __m512 gelu_tanh16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 y = _mm512_mul_ps(_mm512_set1_ps(0.7978845608028654f),
                                 _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(0.044715f), x), _mm512_mul_ps(x, x), x));
  return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), _mm512_add_ps(one, avx512::tanh512(y)));
}

}  // namespace

void gated_act_rows_avx512(const GatedActArgs& a, int ith, int nth) {
  int64_t begin, end;
  split_range(a.gate.rows, ith, nth, &begin, &end);
  if (a.act == Activation::gelu_erf) return gated_act_rows(a, ith, nth);  // std::erf per element
  const bool silu = a.act == Activation::silu;
  for (int64_t r = begin; r < end; ++r) {
    const float* g = a.gate.row(r);
    const float* u = a.up.row(r);
    float* o = a.out.row(r);
    for (int64_t i = 0; i < a.gate.cols; i += 16) {
      const int64_t left = a.gate.cols - i;
      const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1u);
      const __m512 x = _mm512_maskz_loadu_ps(m, g + i);
      const __m512 act = silu ? silu16(x) : gelu_tanh16(x);
      _mm512_mask_storeu_ps(o + i, m, _mm512_mul_ps(act, _mm512_maskz_loadu_ps(m, u + i)));
    }
  }
}

void softcap_span_avx512(float* x, int64_t n, float cap) {
  const __m512 c = _mm512_set1_ps(cap), inv = _mm512_set1_ps(1.0f / cap);
  for (int64_t i = 0; i < n; i += 16) {
    const int64_t left = n - i;
    const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1u);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(c, avx512::tanh512(_mm512_mul_ps(v, inv))));
  }
}

}  // namespace brisk::cpu
