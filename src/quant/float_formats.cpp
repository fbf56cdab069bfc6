// Plain scalar element types: F32, F16 (IEEE half), BF16. Conversions round to nearest even
// (core/fp16.h), as numpy's astype(float16) and ggml's fp32->bf16 do. The scalar reference dot
// products accumulate in double, in element order (F16/BF16 operands widened first).
#include <cstring>

#include "core/fp16.h"
#include "quant/quant_impl.h"

namespace brisk::quant {

void dequantize_row_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, size_t(n) * sizeof(float));
}
void dequantize_row_f16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(h[i]);
}
void dequantize_row_bf16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
}

void quantize_row_f32_ref(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, size_t(n) * sizeof(float));
}
void quantize_row_f16_ref(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = f32_to_fp16(src[i]);
}
void quantize_row_bf16_ref(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(src[i]);
}

void vec_dot_f32_f32(int64_t n, float* out, const void* w, const void* a) {
  const auto* x = static_cast<const float*>(w);
  const auto* y = static_cast<const float*>(a);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += double(x[i]) * double(y[i]);
  *out = float(sum);
}
void vec_dot_f16_f16(int64_t n, float* out, const void* w, const void* a) {
  const auto* x = static_cast<const uint16_t*>(w);
  const auto* y = static_cast<const uint16_t*>(a);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += double(fp16_to_f32(x[i])) * double(fp16_to_f32(y[i]));
  *out = float(sum);
}
void vec_dot_bf16_bf16(int64_t n, float* out, const void* w, const void* a) {
  const auto* x = static_cast<const uint16_t*>(w);
  const auto* y = static_cast<const uint16_t*>(a);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += double(bf16_to_f32(x[i])) * double(bf16_to_f32(y[i]));
  *out = float(sum);
}

}  // namespace brisk::quant
