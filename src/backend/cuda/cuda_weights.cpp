// The CUDA backend's weights and constants (cuda_backend_impl.h): host weights uploaded once,
// on first use, into the device layout of kernels/cuda/dequant.cuh and cached by host address;
// formats without a device kernel dequantized to BF16 at upload; float constants likewise.
#include <vector>

#include "backend/cuda/cuda_backend_impl.h"
#include "core/fp16.h"
#include "core/log.h"
#include "kernels/cpu/ops.h"
#include "quant/repack.h"

namespace brisk::cuda {

bool CudaBackend::weight_constant(const Weight& w) const {
  if (!is_device(w.data) || cuda::weight_repacked(w.type)) return true;
  const auto u = reinterpret_cast<uintptr_t>(w.data);
  const size_t n = w.row_bytes * size_t(w.n_out);
  auto it = constant_.upper_bound(u);
  if (it == constant_.begin()) return false;
  --it;
  return u + n <= it->first + it->second;
}

void CudaBackend::mark_constant(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  constant_[reinterpret_cast<uintptr_t>(p)] = bytes;
}

Weight CudaBackend::device_weight(const Weight& w, const char* op) {
  BRISK_CHECK(w.data != nullptr && w.n_in > 0 && w.n_out > 0, op, ": empty weight");
  const auto rb = quant_row_bytes(w.type, uint64_t(w.n_in));
  BRISK_CHECK(rb && *rb == w.row_bytes, op, ": weight row of ", w.n_in, " ", quant_type_info(w.type).name,
              " elements has ", w.row_bytes, " bytes");
  // Float rows of any length: the GEMV and the expert matmuls take rows the 16-byte units do not
  // fit one element per unit (FloatAnyUnit). Block formats hold whole blocks.
  BRISK_CHECK(w.n_in % 8 == 0 || w.type == QuantType::F32 || w.type == QuantType::F16 || w.type == QuantType::BF16,
              op, ": weight rows of ", w.n_in, " ", quant_type_info(w.type).name,
              " elements (need a multiple of 8 on CUDA)");
  // The weight store lays weights out for each backend (Backend::weight_layout): another
  // backend's layout here means the caller bypassed it.
  BRISK_CHECK(!quant::is_repacked(w.type), op, ": weight in the ", quant_type_info(w.type).name,
              " layout of another backend (bind the model through a Context on this backend)");
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = weights_.find(w.data);
  if (it != weights_.end()) {
    const Weight& c = it->second.w;
    BRISK_CHECK(c.n_in == w.n_in && c.n_out == w.n_out && it->second.host_type == w.type, op,
                ": weight at a cached address changed shape or format (host weights must outlive the backend)");
    return c;
  }
  const bool on_device = is_device(w.data);
  if (on_device) {
    BRISK_CHECK(cuda::weight_format_on_device(w.type), op, ": ", quant_type_info(w.type).name,
                " weights have no CUDA kernel");
    BRISK_CHECK(is_device(w.row(w.n_out - 1) + w.row_bytes - 1), op, ": device weight extends past its allocation");
    if (!cuda::weight_repacked(w.type)) return w;
  }
  Weight d = w;
  std::vector<uint16_t> converted;
  const void* src = w.data;
  if (!cuda::weight_format_on_device(d.type)) {
    if (warned_.insert(int(w.type)).second)
      log_warn("cuda backend: ", quant_type_info(w.type).name,
               " weights have no CUDA kernel; dequantizing them to BF16 at upload");
    converted.resize(size_t(w.n_in) * size_t(w.n_out));
    std::vector<float> row(static_cast<size_t>(w.n_in));
    for (int64_t r = 0; r < w.n_out; ++r) {
      cpu::row_to_f32(d.type, static_cast<const uint8_t*>(src) + size_t(r) * d.row_bytes, row.data(), w.n_in);
      for (int64_t i = 0; i < w.n_in; ++i) converted[size_t(r * w.n_in + i)] = f32_to_bf16(row[size_t(i)]);
    }
    d.type = QuantType::BF16;
    d.row_bytes = size_t(w.n_in) * 2;
    src = converted.data();
  }
  const size_t stored_bytes = d.row_bytes * size_t(d.n_out);
  const size_t bytes = cuda::device_weight_bytes(d.type, d.n_in, d.n_out);
  void* dev = raw_alloc(bytes, op);
  if (cuda::weight_repacked(d.type)) {
    void* tmp = nullptr;
    const void* stored = src;
    if (!on_device) {
      cuda_check(cudaMalloc(&tmp, stored_bytes), op, "cudaMalloc (weight staging)");
      upload(tmp, src, stored_bytes, op);
      stored = tmp;
    }
    const cudaError_t e = cuda::launch_repack_weight(d.type, stored, d.row_bytes, dev, d.n_in, d.n_out, stream_);
    const cudaError_t e2 = cudaStreamSynchronize(stream_);
    if (tmp) cudaFree(tmp);
    cuda_check(e, op, "weight repack launch");
    cuda_check(e2, op, "weight repack");
  } else {
    upload(dev, src, bytes, op);
  }
  d.data = dev;
  weights_[w.data] = Uploaded{.dev = dev, .bytes = bytes, .w = d, .host_type = w.type};
  return d;
}

// Device copy of a constant float vector (norm weights, biases, rotary frequencies).
// Host -> device copy ordered on this backend's stream, complete on return. (A plain
// cudaMemcpy runs on the legacy default stream, which a non-blocking stream does not wait
// for, and from pageable memory it may return before the data has landed: kernels on
// stream_ could then read a partly uploaded weight.)
void CudaBackend::upload(void* dst, const void* src, size_t bytes, const char* op) {
  cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), op, "upload");
  cuda_check(cudaStreamSynchronize(stream_), op, "upload (cudaStreamSynchronize)");
}

const float* CudaBackend::device_floats(const float* p, int64_t n, const char* op) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (is_device(p)) return p;
  auto it = weights_.find(p);
  if (it != weights_.end()) {
    BRISK_CHECK(it->second.bytes >= sizeof(float) * size_t(n), op, ": constant at a cached address grew");
    return static_cast<const float*>(it->second.dev);
  }
  const size_t bytes = sizeof(float) * size_t(n);
  void* dev = raw_alloc(bytes, op);
  upload(dev, p, bytes, op);
  weights_[p] = Uploaded{.dev = dev, .bytes = bytes, .w = {}, .host_type = QuantType::F32};
  const_copies_.insert(dev);
  return static_cast<const float*>(dev);
}

}  // namespace brisk::cuda
