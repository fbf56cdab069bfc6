// Prefill GEMM on the CPU for float weights (F32, F16, BF16): Y[t, r] = dot(W[r, :], X[t, :])
// for many tokens at once, on AVX-512 FMA. The quantized formats have the integer GEMM of
// gemm.h; float weights went through the multi-token GEMV (one dot product per token and row,
// a horizontal sum each, F16 tails element by element: ~12 GFLOP/s on two cores), which made a
// speech encoder's 3000-frame convolutions and 1500-row layers the bulk of its time.
//
// Layout (gemm_float_avx512.cpp): per block of 256 input columns, the activations are converted
// to float in groups of 8 tokens ([group, k, 8]) and each panel of 32 weight rows is converted
// and transposed ([k, 32]); the 8 x 32 tile of Y then accumulates in 16 registers, one weight
// vector pair and 8 broadcasts per k. Activations are the rows the GEMV would read (F32 in place,
// or rounded to the weight's vec_dot_type F16 / BF16), so both paths compute the same products
// and differ only in the order of the float additions. Kill switch: BRISK_NO_FLOAT_GEMM.
#pragma once
#include <cstddef>
#include <cstdint>

#include "quant/types.h"

namespace brisk::kernels {

struct FloatGemmParams {
  QuantType weight_type = QuantType::F32;  // F32, F16 or BF16
  const void* w = nullptr;                 // [n_rows, row_bytes]
  size_t row_bytes = 0;
  int64_t n_rows = 0;
  int64_t k = 0;
  const void* x = nullptr;                 // [n_tokens, x_stride] rows of x_type
  size_t x_stride = 0;                     // bytes
  QuantType x_type = QuantType::F32;       // F32, F16 or BF16
  int64_t n_tokens = 0;
  float* y = nullptr;                      // y[t * y_stride + r]
  int64_t y_stride = 0;
};

// True where the AVX-512 kernel runs for this weight format (and BRISK_NO_FLOAT_GEMM is off).
bool gemm_float_available(QuantType weight_type);
void gemm_float_rows(const FloatGemmParams& p);

namespace avx512 {
void gemm_float_rows(const FloatGemmParams& p);
}

}  // namespace brisk::kernels
