// cuBLAS wrapper of cuda_blas.h. Row-major out [m, n] = x [m, k] . w[n, k]^T is, in cuBLAS's
// column-major terms, out^T [n, m] = op_T(w as [k, n]) . (x as [k, m]).
#include "backend/cuda/cuda_blas.h"

#include <climits>

#include "core/error.h"

#ifdef BRISK_HAVE_CUBLAS
#include <cublas_v2.h>
#endif

namespace brisk::cuda {

#ifdef BRISK_HAVE_CUBLAS

struct Blas {
  cublasHandle_t h = nullptr;
};

Blas* blas_create(cudaStream_t stream) {
  cublasHandle_t h = nullptr;
  const cublasStatus_t st = cublasCreate(&h);
  BRISK_CHECK(st == CUBLAS_STATUS_SUCCESS, "cuda backend: cublasCreate failed: ", cublasGetStatusString(st));
  const cublasStatus_t s2 = cublasSetStream(h, stream);
  if (s2 != CUBLAS_STATUS_SUCCESS) {
    cublasDestroy(h);
    fail("cuda backend: cublasSetStream failed: ", cublasGetStatusString(s2));
  }
  return new Blas{h};
}

void blas_destroy(Blas* b) {
  if (!b) return;
  cublasDestroy(b->h);
  delete b;
}

void blas_gemm_bf16(Blas* b, const uint16_t* x, const uint16_t* w, float* out, int64_t m, int64_t n, int64_t k,
                    int64_t ldo, const char* op) {
  BRISK_CHECK(b != nullptr, op, ": no cuBLAS handle");
  BRISK_CHECK(m > 0 && n > 0 && k > 0 && ldo >= n && m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && ldo <= INT_MAX,
              op, ": GEMM shape [", m, " x ", k, "] . [", n, " x ", k, "]^T (ldo ", ldo, ") out of range");
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t st =
      cublasGemmEx(b->h, CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(m), int(k), &alpha, w, CUDA_R_16BF, int(k), x,
                   CUDA_R_16BF, int(k), &beta, out, CUDA_R_32F, int(ldo), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  BRISK_CHECK(st == CUBLAS_STATUS_SUCCESS, op, ": cublasGemmEx [", m, " x ", k, "] . [", n, " x ", k,
              "]^T failed: ", cublasGetStatusString(st));
}

#else

struct Blas {};

Blas* blas_create(cudaStream_t) { return nullptr; }
void blas_destroy(Blas*) {}
void blas_gemm_bf16(Blas*, const uint16_t*, const uint16_t*, float*, int64_t, int64_t, int64_t, int64_t, const char* op) {
  fail(op, ": this build has no cuBLAS");
}

#endif

}  // namespace brisk::cuda
