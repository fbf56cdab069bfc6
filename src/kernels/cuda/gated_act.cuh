// The gated activation's nonlinearity, shared by the element-wise kernels (elementwise.cu) and
// the gate/up GEMV that applies it in its epilogue (matmul.cu), so both compute the same bits.
#pragma once
#include <cuda_runtime.h>

namespace brisk::cuda {

// silu(g) or the tanh approximation of gelu(g).
__device__ __forceinline__ float act_fn(float g, bool gelu) {
  // exp in double rounded to float is the correctly rounded expf the CPU's libm gives.
  if (!gelu) return __fdiv_rn(g, __fadd_rn(1.0f, float(exp(-double(g)))));
  return 0.5f * g * (1.0f + tanhf(0.7978845608028654f * (g + 0.044715f * g * g * g)));
}

}  // namespace brisk::cuda
