// The CUDA backend's device memory: construction and teardown, allocations (zeroed, tracked
// by address so ops can tell device memory from host memory), scratch buffers that only grow,
// copies, and memory freed at the end of the step that may still read it.
#include <memory>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_backend_impl.h"

namespace brisk::cuda {

CudaBackend::CudaBackend(int device, bool graphs) : device_(device), graphs_(graphs && !flags().no_cuda_graphs) {
  int count = 0;
  cuda_check(cudaGetDeviceCount(&count), "init", "cudaGetDeviceCount");
  BRISK_CHECK(device >= 0 && device < count, "cuda backend: device ", device, " out of range (", count,
              " CUDA devices)");
  cuda_check(cudaSetDevice(device), "init", "cudaSetDevice");
  cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "init", "cudaStreamCreate");
  cuda_check(cudaEventCreateWithFlags(&step_copied_, cudaEventDisableTiming), "init", "cudaEventCreate");
  if (!flags().no_cuda_gemm) blas_ = cuda::blas_create(stream_);
}

CudaBackend::~CudaBackend() {
  cudaSetDevice(device_);
  cudaStreamSynchronize(stream_);
  print_kernel_times();
  for (cudaEvent_t e : time_events_) cudaEventDestroy(e);
  graphs_cache_.clear();
  cuda::blas_destroy(blas_);
  for (auto& [p, n] : allocs_) cudaFree(reinterpret_cast<void*>(p));
  for (void* p : retired_) cudaFree(p);
  if (step_host_) cudaFreeHost(step_host_);
  cudaEventDestroy(step_copied_);
  cudaStreamDestroy(stream_);
}

bool CudaBackend::memory_info(size_t* free_bytes, size_t* total_bytes) const {
  cudaSetDevice(device_);
  const cudaError_t e = cudaMemGetInfo(free_bytes, total_bytes);
  if (e != cudaSuccess) cudaGetLastError();
  return e == cudaSuccess;
}

void* CudaBackend::alloc(size_t bytes) {
  use_device();
  forget_quant();
  std::lock_guard<std::mutex> lock(mutex_);
  return raw_alloc(bytes, "alloc");
}

void CudaBackend::free(void* p) {
  if (!p) return;
  settle_epilogue();
  flush("free");
  forget_quant();
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = allocs_.find(reinterpret_cast<uintptr_t>(p));
  if (it == allocs_.end()) return;
  cuda_check(cudaStreamSynchronize(stream_), "free", "cudaStreamSynchronize");
  // A repacked copy of a weight that lived here goes with it.
  auto w = weights_.find(p);
  if (w != weights_.end()) {
    release(w->second.dev, "free");
    weights_.erase(w);
  }
  graphs_cache_.clear();  // graphs may point into the freed memory
  // Constant marks inside it end with it (the memory may come back as activations).
  constant_.erase(constant_.lower_bound(it->first), constant_.lower_bound(it->first + it->second));
  cuda_check(cudaFree(p), "free", "cudaFree");
  allocs_.erase(it);
}

void CudaBackend::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  use_device();
  settle_epilogue();
  flush("copy");
  forget_quant();
  cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_), "copy", "cudaMemcpyAsync");
  cuda_check(cudaStreamSynchronize(stream_), "copy", "cudaStreamSynchronize");
}

void CudaBackend::synchronize() {
  settle_epilogue();
  flush("synchronize");
  cuda_check(cudaStreamSynchronize(stream_), "synchronize", "cudaStreamSynchronize");
}

bool CudaBackend::constant_floats(const float* p) {
  std::lock_guard<std::mutex> lock(mutex_);
  return p && const_copies_.count(p) != 0;
}

void* CudaBackend::scratch(Scratch& s, size_t bytes, const char* op) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (bytes <= s.bytes) return s.p;
  if (s.p) release(s.p, op);
  s.bytes = std::max(bytes, s.bytes * 3 / 2);
  s.p = raw_alloc(s.bytes, op);
  return s.p;
}

cuda::QuantAct CudaBackend::quant_scratch(Scratch& s, size_t n, const char* op) {
  const size_t q_bytes = (n + 255) / 256 * 256;
  auto* p = static_cast<uint8_t*>(scratch(s, q_bytes + sizeof(float) * (n / 32 + 1), op));
  return cuda::QuantAct{.q = reinterpret_cast<int8_t*>(p), .d = reinterpret_cast<float*>(p + q_bytes)};
}

void CudaBackend::release(void* p, const char* op) {
  allocs_.erase(reinterpret_cast<uintptr_t>(p));
  cuda_check(cudaStreamSynchronize(stream_), op, "cudaStreamSynchronize");
  graphs_cache_.clear();  // graphs may point into it
  if (in_step_) {
    retired_.push_back(p);
    return;
  }
  cuda_check(cudaStreamSynchronize(stream_), op, "cudaStreamSynchronize");
  cuda_check(cudaFree(p), op, "cudaFree");
}

void CudaBackend::free_retired() {
  if (retired_.empty()) return;
  cuda_check(cudaStreamSynchronize(stream_), "end_step", "cudaStreamSynchronize");
  for (void* p : retired_) cuda_check(cudaFree(p), "end_step", "cudaFree");
  retired_.clear();
}

void* CudaBackend::raw_alloc(size_t bytes, const char* op) {
  void* p = nullptr;
  const size_t n = bytes == 0 ? 64 : (bytes + 255) / 256 * 256;
  const cudaError_t e = cudaMalloc(&p, n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    fail("cuda backend: ", op, ": cudaMalloc of ", bytes, " bytes failed: ", cudaGetErrorString(e));
  }
  cuda_check(cudaMemsetAsync(p, 0, n, stream_), op, "cudaMemset");
  cuda_check(cudaStreamSynchronize(stream_), op, "cudaStreamSynchronize");
  allocs_[reinterpret_cast<uintptr_t>(p)] = n;
  return p;
}

}  // namespace brisk::cuda

namespace brisk {

std::unique_ptr<Backend> make_cuda_backend(int device, bool graphs) {
  return std::make_unique<cuda::CudaBackend>(device, graphs);
}

uint64_t cuda_graph_replays(const Backend& be) {
  const auto* c = dynamic_cast<const cuda::CudaBackend*>(&be);
  return c ? c->graph_replays() : 0;
}

size_t cuda_step_launches(const Backend& be) {
  const auto* c = dynamic_cast<const cuda::CudaBackend*>(&be);
  return c ? c->last_step_launches() : 0;
}

void cuda_mark_constant(Backend& be, const void* p, size_t bytes) {
  if (auto* c = dynamic_cast<cuda::CudaBackend*>(&be)) c->mark_constant(p, bytes);
}

bool cuda_has_gemm(const Backend& be) {
  const auto* c = dynamic_cast<const cuda::CudaBackend*>(&be);
  return c && c->has_gemm();
}

void cuda_gemm_bf16(Backend& be, const uint16_t* x, const uint16_t* w, float* out, int64_t m, int64_t n, int64_t k) {
  auto* c = dynamic_cast<cuda::CudaBackend*>(&be);
  BRISK_CHECK(c && c->has_gemm(), "cuda_gemm_bf16: not a CUDA backend with cuBLAS");
  c->gemm_bf16(x, w, out, m, n, k, n);
}

}  // namespace brisk
