// Prefill GEMM on the CPU: Y[t, r] = dot(W[r, :], X[t, :]) for many tokens at once (n_tok > 8),
// for the weight formats with an integer tile kernel (Q8_0 and Q4_0 with Q8_0 activations, Q4_K, Q5_K and Q6_K with Q8_K, on
// AVX-512 VNNI). The activations are the same quantized rows the GEMV path uses (quantized once
// per matmul); the weights are read in place in their stored block layout, so nothing is
// repacked and the GEMV path keeps using the same bytes.
//
// Tiles of 4 rows x 4 tokens are accumulated in 16 zmm registers (two 32-element blocks per
// vpdpbusd), rows and tokens are swept in cache blocks of 64 x 64. Rows and tokens left over
// from the tiles run through gemv_rows_multi. Results agree with the per-row dot product to
// float rounding (the integer block sums are exact; only the order of the float additions of
// the scaled block sums differs). Kill switch: BRISK_NO_GEMM (and the format's
// BRISK_NO_SIMD_DOT_<FORMAT>, BRISK_NO_AVX512, BRISK_NO_SIMD).
#pragma once
#include <cstddef>
#include <cstdint>

#include "quant/types.h"

namespace brisk::kernels {

struct GemmParams {
  QuantType weight_type;
  const void* w;        // (n_rows, row_bytes) raw blocks of weight_type
  size_t row_bytes;
  int64_t n_rows;
  int64_t k;
  const void* x_quant;  // (n_tokens, x_stride) bytes: rows quantized to activation_type(weight_type)
  size_t x_stride;
  int64_t n_tokens;
  float* y;             // (n_tokens, y_stride) floats; y[t * y_stride + r]
  int64_t y_stride;
};

// True when gemm_rows has a tile kernel for this weight format on this CPU and no kill switch
// turns it off. Callers route n_tokens > 8 here, and use gemv_rows_multi otherwise.
bool gemm_available(QuantType weight_type);

// Any shape (tile remainders go through gemv_rows_multi). Throws brisk::Error on bad shapes or
// when !gemm_available(weight_type).
void gemm_rows(const GemmParams& p);

// Token count above which matmul uses the GEMM.
constexpr int64_t kGemmMinTokens = 9;

}  // namespace brisk::kernels
