// Launchers of kernels/cuda/gemm_prep.cu: operands of the tensor-core prefill GEMM and the
// device-side greedy pick. Pointers are device memory; each launcher enqueues on `stream` and
// returns the launch status.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/op_args.h"
#include "quant/types.h"

namespace brisk::cuda {

// dst [r1 - r0, w.n_in] BF16 (dense) = rows [r0, r1) of w (device layout, dequant.cuh);
// w.n_in a multiple of 8, dst 16-byte aligned, r1 - r0 <= 65535.
cudaError_t launch_weight_to_bf16(const Weight& w, int64_t r0, int64_t r1, uint16_t* dst, cudaStream_t stream);
// dst [x.rows, x.cols] BF16 (dense) = x rounded to nearest even; x.rows <= 65535.
cudaError_t launch_act_to_bf16(const Mat& x, uint16_t* dst, cudaStream_t stream);
// out[t, r] += bias[r]; out.rows <= 65535.
cudaError_t launch_add_bias(const Mat& out, const float* bias, cudaStream_t stream);
// ids[t] = the first index of the largest value of row t of x, NaN counting as -inf; -1 when
// the row holds only -inf / NaN.
cudaError_t launch_argmax_rows(const Mat& x, int32_t* ids, cudaStream_t stream);

}  // namespace brisk::cuda
