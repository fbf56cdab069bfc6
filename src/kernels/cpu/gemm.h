// Prefill GEMM on the CPU: Y[t, r] = dot(W[r, :], X[t, :]) for many tokens at once (n_tok > 8),
// on AVX-512 VNNI (gemm_avx512.cpp), else AVX-VNNI (gemm_avxvnni.cpp), else AVX2 (gemm_avx2.cpp),
// for Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL (activations Q8_0 / Q8_1) and Q4_K, Q5_K, Q6_K,
// IQ4_XS (activations Q8_K). The activations are the same quantized rows the GEMV path uses
// (quantized once per matmul); the stored weights are unpacked a few rows at a time into
// unsigned codes and per-block scales (gemm_pack.h), so one integer tile kernel per ISA serves
// every format and the decode GEMV keeps reading the same bytes.
//
// Results agree with the per-row dot product to float rounding (the integer block sums are
// exact; only the order of the float additions of the scaled block sums differs). Kill switch:
// BRISK_NO_GEMM (and the format's BRISK_NO_SIMD_DOT_<FORMAT>, BRISK_NO_AVX2, BRISK_NO_SIMD);
// BRISK_NO_AVX512 moves it to the AVX-VNNI or AVX2 kernel, BRISK_NO_AVX_VNNI from AVX-VNNI to AVX2.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/dot.h"
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
  const void* x_packed = nullptr;  // optional: gemm_pack_tokens output for these activations
};

// True when gemm_rows has a tile kernel for this weight format on this CPU and no kill switch
// turns it off. Callers route n_tokens > 8 here, and use gemv_rows_multi otherwise.
bool gemm_available(QuantType weight_type);
// The ISA of the kernel gemm_rows runs for this format (that of its dot product, dot_isa), or
// Isa::scalar when !gemm_available.
Isa gemm_isa(QuantType weight_type);

// Any shape (tile remainders go through gemv_rows_multi). Throws brisk::Error on bad shapes or
// when !gemm_available(weight_type).
void gemm_rows(const GemmParams& p);

// Optional two-phase use, so that threads splitting the rows share one repacking of the
// activations: size a buffer with gemm_packed_bytes, fill it with gemm_pack_tokens for every
// group of kGemmGroup tokens (any split of the groups over threads), pass it as x_packed.
constexpr int64_t kGemmGroup = 16;
size_t gemm_packed_bytes(QuantType weight_type, int64_t k, int64_t n_tokens);
void gemm_pack_tokens(const GemmParams& p, void* packed, int64_t group_begin, int64_t group_end);
// True when activations packed for weight format a serve format b as they are (same ISA packing,
// activation type and code block, offset and min handling): matmuls of one input then pack once.
bool gemm_packing_shared(QuantType a, QuantType b);

// Token count above which matmul uses the GEMM.
constexpr int64_t kGemmMinTokens = 9;

}  // namespace brisk::kernels
