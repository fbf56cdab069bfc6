// Which build of each CPU kernel family runs here, as the dispatch decides it (the CPU's features
// after BRISK_CPU_MASK, then the kill switches): `brisk info` prints it, and the dispatch tests
// check that masking a level away really moves every family to the build below.
#pragma once
#include <string>

#include "core/cpu_features.h"
#include "kernels/cpu/dot.h"

namespace brisk::kernels {

struct CpuKernelSets {
  IsaLevel level;      // the highest level of the CPU (cpu_best_level of cpu_features())
  Isa dot;             // decode dot products and GEMVs (for Q4_K; dot_isa has every format's)
  bool dot_vbmi;       // the Q4_0 / Q5_0 dot products take the avx512-vbmi nibble kernels
  Isa gemm;            // the prefill GEMM (for Q4_K; scalar: none, the GEMV runs)
  IsaLevel attention;  // attention and the elementwise ops: avx512, avx2 or scalar
};
CpuKernelSets cpu_kernel_sets();
// e.g. "avx512-vbmi (dot avx512 + vbmi, gemm avx512, attention avx512)"
std::string cpu_kernel_sets_string();

// The level of the attention and elementwise kernels the CPU backend runs: avx512 where the CPU
// has that level, else avx2 (attention only), else scalar.
IsaLevel cpu_ops_level();

}  // namespace brisk::kernels
