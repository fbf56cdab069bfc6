// AVX2 + FMA build of the linear-attention kernels (delta_net_x86.inc): 8-float vectors.
#include <cmath>
#include <cstdint>

#include "kernels/cpu/ops.h"

namespace brisk::cpu::avx2 {
void silu_inplace(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + std::exp(-x[i]));
}
void mul_silu(float* y, const float* z, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] *= z[i] / (1.0f + std::exp(-z[i]));
}
}  // namespace brisk::cpu::avx2

#define BRISK_DELTA_NS avx2
#include "kernels/cpu/delta_net_x86.inc"
