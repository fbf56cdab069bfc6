// What the matmul files share (matmul.cu, matmul_legacy.cu, matmul_float.cu, matmul_kquant.cu,
// moe_gemv.cu, embedding.cu, weight_layout.cu): the device format of a QuantType, the
// multiprocessor count, the dispatch of a launcher template over the device formats, and the
// decode matmuls of each format family (one translation unit each, so that the formats'
// kernels compile in parallel).
#pragma once
#include <cuda_runtime.h>

#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/kernels.h"

namespace brisk::cuda {

// The device format of a weight format (F32 for those without one).
DevFormat dev_format(QuantType t);

#define BRISK_FMT_DISPATCH(fn, type, ...)                                  \
  switch (type) {                                                          \
    case QuantType::F32: return fn<DevFormat::f32>(__VA_ARGS__);          \
    case QuantType::F16: return fn<DevFormat::f16>(__VA_ARGS__);          \
    case QuantType::BF16: return fn<DevFormat::bf16>(__VA_ARGS__);        \
    case QuantType::Q8_0: return fn<DevFormat::q8_0>(__VA_ARGS__);        \
    case QuantType::Q4_0: return fn<DevFormat::q4_0>(__VA_ARGS__);        \
    case QuantType::Q5_0: return fn<DevFormat::q5_0>(__VA_ARGS__);        \
    case QuantType::Q4_K: return fn<DevFormat::q4_k>(__VA_ARGS__);        \
    case QuantType::Q6_K: return fn<DevFormat::q6_k>(__VA_ARGS__);        \
    case QuantType::Q5_K: return fn<DevFormat::q5_k>(__VA_ARGS__);        \
    default: return cudaErrorInvalidValue;                                 \
  }

// The decode GEMV of a[0 .. n_parts) (same x, format and row length; gemv_kernel.cuh), for the
// formats of one family; res / sum: a residual added in the epilogue (launch_matmul_add).
cudaError_t matmul_legacy_rows(const MatmulArgs* a, int n_parts, const QuantAct* xq, bool early, cudaStream_t s,
                               const Mat* res, const Mat* sum);  // Q8_0, Q4_0, Q5_0
cudaError_t matmul_float_rows(const MatmulArgs* a, int n_parts, const QuantAct* xq, bool early, cudaStream_t s,
                              const Mat* res, const Mat* sum);  // F32, F16, BF16
cudaError_t matmul_kquant_rows(const MatmulArgs* a, int n_parts, const QuantAct* xq, bool early, cudaStream_t s,
                               const Mat* res, const Mat* sum);  // Q4_K, Q5_K, Q6_K
// Q4_K and Q6_K matmuls of one token (kquant_mixes) in one launch.
cudaError_t launch_kquant_mixed(const MatmulArgs* a, int n, const QuantAct& xq, bool early, cudaStream_t s);

}  // namespace brisk::cuda
