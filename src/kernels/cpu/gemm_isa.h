// Internal: the per-ISA GEMM kernels (gemm_avx512.cpp, gemm_avxvnni.cpp, gemm_avx2.cpp). A kernel
// covers the whole GemmParams (every row and token). Only call where cpu_has_level() reports the
// ISA's level (core/isa_levels.def).
#pragma once
#include "kernels/cpu/dot.h"
#include "kernels/cpu/gemm.h"

namespace brisk::kernels {
using GemmTileFn = void (*)(const GemmParams& p);

// One ISA's GEMM for a weight format: the kernel and the activation packing it reads as
// x_packed (gemm_packed_bytes / gemm_pack_tokens dispatch to the same ISA as gemm_rows).
struct GemmIsaKernels {
  GemmTileFn kernel = nullptr;  // nullptr: no kernel for this format
  size_t (*packed_bytes)(QuantType weight_type, int64_t k, int64_t n_tokens) = nullptr;
  void (*pack_tokens)(const GemmParams& p, void* packed, int64_t group_begin, int64_t group_end) = nullptr;
  explicit operator bool() const { return kernel != nullptr; }
};

// One ISA's kernels (tests and benchmarks; ignores the kill switches): empty when the CPU, as
// BRISK_CPU_MASK leaves it, lacks the ISA's level or the ISA has no GEMM for the format.
GemmIsaKernels gemm_kernels_variant(QuantType weight_type, Isa isa);
}  // namespace brisk::kernels

namespace brisk::kernels::avx512 {  // AVX-512 VNNI
GemmIsaKernels gemm_kernels(QuantType weight_type);
}  // namespace brisk::kernels::avx512

namespace brisk::kernels::avx2_vnni {  // AVX2 + AVX-VNNI: vpdpbusd tiles
GemmIsaKernels gemm_kernels(QuantType weight_type);
}  // namespace brisk::kernels::avx2_vnni

namespace brisk::kernels::avx2 {  // AVX2 + FMA + F16C + BMI2: vpmaddubsw tiles
GemmIsaKernels gemm_kernels(QuantType weight_type);
}  // namespace brisk::kernels::avx2
