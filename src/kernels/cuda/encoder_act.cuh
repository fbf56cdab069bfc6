// The encoders' elementwise activations on the device (UnaryOp), shared by the plain unary
// kernel (encoder_ops.cu) and the fused GEMM epilogues (encoder_fused.cu), so both give the
// same bits.
#pragma once
#include <cuda_runtime.h>

#include "core/op_args.h"

namespace brisk::cuda {

__device__ __forceinline__ float unary_apply(UnaryOp op, float v) {
  if (op == UnaryOp::gelu_erf) return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  if (op == UnaryOp::tanh) return tanhf(v);
  return 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
}

}  // namespace brisk::cuda
