// Internal: the per-ISA GEMM tile kernels (gemm_avx512.cpp). A tile kernel covers rows
// [0, n_rows - n_rows % kGemmTileRows) x tokens [0, n_tokens - n_tokens % kGemmTileTokens); the
// caller (gemm.cpp) handles the rest. Only call when cpu_features() reports the ISA.
#pragma once
#include "kernels/cpu/gemm.h"

namespace brisk::kernels {
constexpr int64_t kGemmTileRows = 4;
constexpr int64_t kGemmTileTokens = 4;
using GemmTileFn = void (*)(const GemmParams& p);
}  // namespace brisk::kernels

namespace brisk::kernels::avx512 {
GemmTileFn gemm_kernel(QuantType weight_type);  // nullptr: no kernel for this format
}  // namespace brisk::kernels::avx512
