// AVX-512 build of the x86 dot-product kernels: the integer kernels of dot_x86.inc with VNNI
// (EVEX vpdpbusd on 256-bit vectors: one instruction per 32 byte products instead of two, and no
// i16 intermediate), plus 512-bit float kernels for F32 / F16 / BF16, whose rows stream
// 64 bytes per load.
// GCC 12's AVX-512 headers build some intrinsics from _mm*_undefined_*() values and trip its
// own (maybe-)uninitialized warnings; they are false positives inside the system header.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define BRISK_DOT_NS avx512
#define BRISK_DOT_VNNI 1
#define BRISK_DOT_WIDE 1
#include "kernels/cpu/dot_x86.inc"

namespace brisk::kernels::avx512 {
namespace {

inline __m512 load_f32x16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load_f16x16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 load_bf16x16(const uint16_t* p) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}

// dot of n elements, 64 per iteration in 4 independent accumulators
template <class T, __m512 (*Load)(const T*), float (*Scalar)(T)>
void dot_wide(int64_t n, float* out, const void* w, const void* a) {
  const auto* x = static_cast<const T*>(w);
  const auto* y = static_cast<const T*>(a);
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  int64_t i = 0;
  for (; i + 64 <= n; i += 64)
    for (int k = 0; k < 4; ++k)
      acc[k] = _mm512_fmadd_ps(Load(x + i + 16 * k), Load(y + i + 16 * k), acc[k]);
  float sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) sum += Scalar(x[i]) * Scalar(y[i]);
  *out = sum;
}

inline float f32_id(float v) { return v; }

}  // namespace

VecDotFn vec_dot_kernel(QuantType t) {
  switch (t) {
    case QuantType::F32: return dot_wide<float, load_f32x16, f32_id>;
    case QuantType::F16: return dot_wide<uint16_t, load_f16x16, fp16_to_f32>;
    case QuantType::BF16: return dot_wide<uint16_t, load_bf16x16, bf16_to_f32>;
    default: {
      if (VecDotFn f = wide_q32_kernel(t)) return f;     // dot_q32_avx512.cpp
      if (VecDotFn f = wide_kquant_kernel(t)) return f;  // dot_kquant_avx512.inc
      return kernel_256(t);
    }
  }
}

}  // namespace brisk::kernels::avx512
