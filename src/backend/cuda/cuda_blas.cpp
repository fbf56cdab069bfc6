// cuBLAS wrapper of cuda_blas.h. Row-major out [m, n] = x [m, k] . w[n, k]^T is, in cuBLAS's
// column-major terms, out^T [n, m] = op_T(w as [k, n]) . (x as [k, m]).
//
// cuBLAS is loaded with dlopen when the first CUDA backend starts, not linked: libcublasLt is
// several hundred MB, and mapping it cost every brisk process about 0.3 s at start (CPU runs
// included), and a binary linked to it would not start at all on a machine without the toolkit.
#include "backend/cuda/cuda_blas.h"

#include <climits>
#include <mutex>
#include <string>

#include "core/error.h"
#include "core/log.h"

#ifdef BRISK_HAVE_CUBLAS
#include <cublas_v2.h>
#include <dlfcn.h>
#endif

namespace brisk::cuda {

#ifdef BRISK_HAVE_CUBLAS

namespace {

// The cuBLAS entry points brisk uses, resolved from the shared library of the toolkit's major
// version (the ABI the headers describe).
struct BlasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  // the C entry point (cublas_api.h also declares a C++ overload taking cudaDataType compute)
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
  // optional (nullptr: the GEMMs of a group run one by one)
  cublasStatus_t (*gemm_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void* const[], cudaDataType, int, const void* const[], cudaDataType, int,
                                    const void*, void* const[], cudaDataType, int, int, cublasComputeType_t,
                                    cublasGemmAlgo_t) = nullptr;
};

template <typename Fn>
bool resolve(void* lib, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(lib, name));
  return out != nullptr;
}

// nullptr when the library or one of its symbols is missing (logged once).
const BlasApi* blas_api() {
  static BlasApi api;
  static const BlasApi* loaded = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
#ifdef BRISK_CUBLAS_DIR
    if (!lib) lib = dlopen((std::string(BRISK_CUBLAS_DIR) + "/" + soname).c_str(), RTLD_NOW | RTLD_LOCAL);
#endif
    if (!lib) {
      log_warn("cuda backend: ", soname, " not found (", dlerror(), "): prefill runs on the GEMV kernels");
      return;
    }
    if (!resolve(lib, "cublasCreate_v2", api.create) || !resolve(lib, "cublasDestroy_v2", api.destroy) ||
        !resolve(lib, "cublasSetStream_v2", api.set_stream) || !resolve(lib, "cublasGemmEx", api.gemm_ex) ||
        !resolve(lib, "cublasGetStatusString", api.status_string)) {
      log_warn("cuda backend: ", soname, " lacks a symbol brisk needs: prefill runs on the GEMV kernels");
      return;  // the library stays loaded: unloading a CUDA library mid-process is not safe
    }
    resolve(lib, "cublasGemmBatchedEx", api.gemm_batched_ex);
    loaded = &api;
  });
  return loaded;
}

}  // namespace

struct Blas {
  const BlasApi* api = nullptr;
  cublasHandle_t h = nullptr;
};

Blas* blas_create(cudaStream_t stream) {
  const BlasApi* api = blas_api();
  if (!api) return nullptr;
  cublasHandle_t h = nullptr;
  const cublasStatus_t st = api->create(&h);
  BRISK_CHECK(st == CUBLAS_STATUS_SUCCESS, "cuda backend: cublasCreate failed: ", api->status_string(st));
  const cublasStatus_t s2 = api->set_stream(h, stream);
  if (s2 != CUBLAS_STATUS_SUCCESS) {
    api->destroy(h);
    fail("cuda backend: cublasSetStream failed: ", api->status_string(s2));
  }
  return new Blas{api, h};
}

void blas_destroy(Blas* b) {
  if (!b) return;
  b->api->destroy(b->h);
  delete b;
}

void blas_gemm_bf16(Blas* b, const uint16_t* x, const uint16_t* w, float* out, int64_t m, int64_t n, int64_t k,
                    int64_t ldo, const char* op) {
  BRISK_CHECK(b != nullptr, op, ": no cuBLAS handle");
  BRISK_CHECK(m > 0 && n > 0 && k > 0 && ldo >= n && m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && ldo <= INT_MAX,
              op, ": GEMM shape [", m, " x ", k, "] . [", n, " x ", k, "]^T (ldo ", ldo, ") out of range");
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t st =
      b->api->gemm_ex(b->h, CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(m), int(k), &alpha, w, CUDA_R_16BF, int(k), x,
                      CUDA_R_16BF, int(k), &beta, out, CUDA_R_32F, int(ldo), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  BRISK_CHECK(st == CUBLAS_STATUS_SUCCESS, op, ": cublasGemmEx [", m, " x ", k, "] . [", n, " x ", k,
              "]^T failed: ", b->api->status_string(st));
}

bool blas_has_batched(const Blas* b) { return b != nullptr && b->api->gemm_batched_ex != nullptr; }

void blas_gemm_bf16_batched(Blas* b, const void* const* x, const void* const* w, void* const* out, int64_t m, int64_t n,
                            int64_t k, int64_t ldo, int count, const char* op) {
  BRISK_CHECK(blas_has_batched(b), op, ": no batched cuBLAS GEMM");
  BRISK_CHECK(m > 0 && n > 0 && k > 0 && ldo >= n && count > 0 && m <= INT_MAX && n <= INT_MAX && k <= INT_MAX &&
                  ldo <= INT_MAX,
              op, ": batched GEMM shape [", m, " x ", k, "] . [", n, " x ", k, "]^T x ", count, " (ldo ", ldo,
              ") out of range");
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t st = b->api->gemm_batched_ex(b->h, CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(m), int(k), &alpha, w,
                                                    CUDA_R_16BF, int(k), x, CUDA_R_16BF, int(k), &beta, out, CUDA_R_32F,
                                                    int(ldo), count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  BRISK_CHECK(st == CUBLAS_STATUS_SUCCESS, op, ": cublasGemmBatchedEx [", m, " x ", k, "] . [", n, " x ", k, "]^T x ",
              count, " failed: ", b->api->status_string(st));
}

void blas_gemm_f32(Blas* b, const float* x, int64_t ldx, const float* w, float* out, int64_t m, int64_t n, int64_t k,
                   int64_t ldo, const char* op) {
  BRISK_CHECK(b != nullptr, op, ": no cuBLAS handle");
  BRISK_CHECK(m > 0 && n > 0 && k > 0 && ldo >= n && ldx >= k && m <= INT_MAX && n <= INT_MAX && k <= INT_MAX &&
                  ldo <= INT_MAX && ldx <= INT_MAX,
              op, ": F32 GEMM shape [", m, " x ", k, "] . [", n, " x ", k, "]^T (ldx ", ldx, ", ldo ", ldo, ") out of range");
  const float alpha = 1.0f, beta = 0.0f;
  // CUBLAS_COMPUTE_32F under the default math mode: F32 products and sums, no TF32.
  const cublasStatus_t st =
      b->api->gemm_ex(b->h, CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(m), int(k), &alpha, w, CUDA_R_32F, int(k), x,
                      CUDA_R_32F, int(ldx), &beta, out, CUDA_R_32F, int(ldo), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  BRISK_CHECK(st == CUBLAS_STATUS_SUCCESS, op, ": cublasGemmEx F32 [", m, " x ", k, "] . [", n, " x ", k,
              "]^T failed: ", b->api->status_string(st));
}

#else

struct Blas {};

Blas* blas_create(cudaStream_t) { return nullptr; }
void blas_destroy(Blas*) {}
void blas_gemm_bf16(Blas*, const uint16_t*, const uint16_t*, float*, int64_t, int64_t, int64_t, int64_t, const char* op) {
  fail(op, ": this build has no cuBLAS");
}
bool blas_has_batched(const Blas*) { return false; }
void blas_gemm_bf16_batched(Blas*, const void* const*, const void* const*, void* const*, int64_t, int64_t, int64_t,
                            int64_t, int, const char* op) {
  fail(op, ": this build has no cuBLAS");
}
void blas_gemm_f32(Blas*, const float*, int64_t, const float*, float*, int64_t, int64_t, int64_t, int64_t, const char* op) {
  fail(op, ": this build has no cuBLAS");
}

#endif

}  // namespace brisk::cuda
