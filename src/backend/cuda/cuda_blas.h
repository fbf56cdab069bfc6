// The tensor-core GEMM of the CUDA backend's prefill: cuBLAS (cublasGemmEx), BF16 operands,
// FP32 accumulation and output; and the F32 GEMM of F32 weights. Builds without cuBLAS (BRISK_HAVE_CUBLAS unset) keep the
// GEMV path: blas_create returns nullptr there.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace brisk::cuda {

struct Blas;  // a cuBLAS handle bound to one stream

// nullptr when the build has no cuBLAS; throws brisk::Error when cuBLAS fails to start.
Blas* blas_create(cudaStream_t stream);
void blas_destroy(Blas* b);

// out [m, n] F32 (row stride ldo floats, ldo >= n) = x [m, k] BF16 (dense) . w [n, k]^T BF16
// (dense), FP32 accumulation; queued on the handle's stream. Throws brisk::Error naming `op`.
void blas_gemm_bf16(Blas* b, const uint16_t* x, const uint16_t* w, float* out, int64_t m, int64_t n, int64_t k,
                    int64_t ldo, const char* op);

// Several GEMMs of one shape in one launch (cublasGemmBatchedEx): out_i [m, n] F32 (row stride
// ldo) = x_i [m, k] BF16 . w_i [n, k]^T BF16, i < count. x, w, out: device arrays of count device
// pointers each. False when the loaded cuBLAS lacks the entry point (nothing queued).
bool blas_has_batched(const Blas* b);
void blas_gemm_bf16_batched(Blas* b, const void* const* x, const void* const* w, void* const* out, int64_t m, int64_t n,
                            int64_t k, int64_t ldo, int count, const char* op);

// out [m, n] F32 (row stride ldo) = x [m, k] F32 (row stride ldx) . w [n, k]^T F32 (dense), in
// full F32 (no TF32): the matmuls of F32 weights with many rows (a MoE router in a prefill).
void blas_gemm_f32(Blas* b, const float* x, int64_t ldx, const float* w, float* out, int64_t m, int64_t n, int64_t k,
                   int64_t ldo, const char* op);

}  // namespace brisk::cuda
