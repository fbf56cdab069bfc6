// Internal: the per-ISA GEMM kernels (gemm_avx512.cpp). A kernel covers the whole GemmParams
// (every row and token). Only call when cpu_features() reports the ISA.
#pragma once
#include "kernels/cpu/gemm.h"

namespace brisk::kernels {
using GemmTileFn = void (*)(const GemmParams& p);
}  // namespace brisk::kernels

namespace brisk::kernels::avx512 {
GemmTileFn gemm_kernel(QuantType weight_type);  // nullptr: no kernel for this format
size_t packed_bytes(QuantType weight_type, int64_t k, int64_t n_tokens);
void pack_tokens(const GemmParams& p, void* packed, int64_t group_begin, int64_t group_end);
}  // namespace brisk::kernels::avx512
