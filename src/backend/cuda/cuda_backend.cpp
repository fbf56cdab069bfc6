// The CUDA backend: device memory from cudaMalloc (never managed memory), one stream, and the
// kernels of kernels/cuda/. The op interface hands it host pointers for model constants
// (weights, norm weights, biases, rotary tables) and for the per-batch ids/pos/seq arrays:
//   - constants are uploaded once, on first use, and cached by host address (weights stay in
//     their stored format; formats without a device kernel are dequantized once to BF16);
//   - per-batch int arrays are copied to a device buffer per host address, only when their
//     contents changed since the last copy (stream order keeps earlier kernels correct).
// Pointers inside this backend's allocations are used as they are. Host constants must
// outlive the backend (model weights do: a Context holds its Model). Every CUDA call and
// launch is checked; a failure is a brisk::Error naming the op and the CUDA error.
#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/fp16.h"
#include "core/log.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/kernels.h"
#include "quant/format.h"
#include "quant/types.h"

namespace brisk {

namespace {

void cuda_check(cudaError_t e, const char* op, const char* what) {
  if (e != cudaSuccess) {
    cudaGetLastError();
    fail("cuda backend: ", op, ": ", what, " failed: ", cudaGetErrorString(e));
  }
}

void check_mat(const Mat& m, int64_t rows, int64_t cols, const char* op, const char* what) {
  BRISK_CHECK(m.data != nullptr && m.rows == rows && m.cols == cols && m.row_stride() >= cols,
              op, ": ", what, " is [", m.rows, ", ", m.cols, "], expected [", rows, ", ", cols, "]");
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) : device_(device) {
    int count = 0;
    cuda_check(cudaGetDeviceCount(&count), "init", "cudaGetDeviceCount");
    BRISK_CHECK(device >= 0 && device < count, "cuda backend: device ", device, " out of range (", count,
                " CUDA devices)");
    cuda_check(cudaSetDevice(device), "init", "cudaSetDevice");
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "init", "cudaStreamCreate");
  }

  ~CudaBackend() override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
    for (auto& [p, n] : allocs_) cudaFree(reinterpret_cast<void*>(p));
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return str_cat("cuda:", device_); }
  int n_threads() const override { return 1; }

  void* alloc(size_t bytes) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return raw_alloc(bytes, "alloc");
  }

  void free(void* p) override {
    if (!p) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = allocs_.find(reinterpret_cast<uintptr_t>(p));
    if (it == allocs_.end()) return;
    cuda_check(cudaStreamSynchronize(stream_), "free", "cudaStreamSynchronize");
    cuda_check(cudaFree(p), "free", "cudaFree");
    allocs_.erase(it);
  }

  void copy(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_), "copy", "cudaMemcpyAsync");
    cuda_check(cudaStreamSynchronize(stream_), "copy", "cudaStreamSynchronize");
  }

  void synchronize() override { cuda_check(cudaStreamSynchronize(stream_), "synchronize", "cudaStreamSynchronize"); }

  void matmul(const MatmulArgs& a) override {
    check_mat(a.x, a.x.rows, a.w.n_in, "matmul", "x");
    check_mat(a.out, a.x.rows, a.w.n_out, "matmul", "out");
    MatmulArgs d = a;
    d.w = device_weight(a.w, "matmul");
    d.bias = a.bias ? device_floats(a.bias, a.w.n_out, "matmul bias") : nullptr;
    // Activations go through the (original) weight format's vec_dot_type, as on the CPU.
    const cuda::ActRound round = cuda::act_round_for(format_traits(a.w.type).vec_dot_type);
    if (round != cuda::ActRound::none && a.x.rows > 0) {
      float* xr = act_scratch(size_t(a.x.rows) * size_t(a.w.n_in));
      cuda_check(cuda::launch_round_activations(round, xr, a.x, stream_), "matmul", "activation rounding launch");
      d.x = Mat{.data = xr, .rows = a.x.rows, .cols = a.w.n_in};
    }
    cuda_check(cuda::launch_matmul(d, stream_), "matmul", "kernel launch");
  }

  void rms_norm(const RmsNormArgs& a) override {
    const int64_t group = a.group > 0 ? a.group : a.x.cols;
    BRISK_CHECK(group > 0 && a.x.cols % group == 0, "rms_norm: ", a.x.cols, " columns are not a multiple of group ",
                group);
    check_mat(a.out, a.x.rows, a.x.cols, "rms_norm", "out");
    RmsNormArgs d = a;
    d.weight = a.weight ? device_floats(a.weight, group, "rms_norm weight") : nullptr;
    cuda_check(cuda::launch_rms_norm(d, stream_), "rms_norm", "kernel launch");
  }

  void rope(const RopeArgs& a) override {
    BRISK_CHECK(a.table && a.table->n_rot <= a.head_dim && a.table->n_rot % 2 == 0 &&
                    a.table->inv_freq.size() == size_t(a.table->n_rot / 2),
                "rope: bad rotary table for head_dim ", a.head_dim);
    check_mat(a.x, a.x.rows, int64_t(a.n_head) * a.head_dim, "rope", "x");
    const float* inv = a.table->n_rot > 0
                           ? device_floats(a.table->inv_freq.data(), a.table->n_rot / 2, "rope table")
                           : nullptr;
    RopeArgs d = a;
    d.pos = stage(a.pos, a.x.rows, "rope pos");
    cuda_check(cuda::launch_rope(d, inv, stream_), "rope", "kernel launch");
  }

  void kv_store(const KvStoreArgs& a) override {
    check_mat(a.k, a.k.rows, a.k_cache.width, "kv_store", "k");
    check_mat(a.v, a.k.rows, a.v_cache.width, "kv_store", "v");
    check_kv(a.k_cache, "kv_store");
    check_kv(a.v_cache, "kv_store");
    BRISK_CHECK(a.k_cache.type == a.v_cache.type && a.k_cache.width == a.v_cache.width &&
                    a.k_cache.capacity == a.v_cache.capacity,
                "kv_store: K and V caches differ in type or shape");
    KvStoreArgs d = a;
    d.seq = stage(a.seq, a.k.rows, "kv_store seq");
    d.pos = stage(a.pos, a.k.rows, "kv_store pos");
    cuda_check(cuda::launch_kv_store(d, stream_), "kv_store", "kernel launch");
  }

  void attention(const AttentionArgs& a) override {
    BRISK_CHECK(a.n_head_kv > 0 && a.n_head % a.n_head_kv == 0, "attention: ", a.n_head,
                " heads are not a multiple of ", a.n_head_kv, " KV heads");
    BRISK_CHECK(a.head_dim > 0 && a.head_dim <= 512, "attention: head_dim ", a.head_dim,
                " outside [1, 512] on CUDA");
    check_mat(a.q, a.q.rows, int64_t(a.n_head) * a.head_dim, "attention", "q");
    check_mat(a.out, a.q.rows, int64_t(a.n_head) * a.head_dim, "attention", "out");
    BRISK_CHECK(a.k_cache.width == int64_t(a.n_head_kv) * a.head_dim && a.v_cache.width == a.k_cache.width,
                "attention: KV cache width does not match the heads");
    check_kv(a.k_cache, "attention");
    check_kv(a.v_cache, "attention");
    AttentionArgs d = a;
    d.seq = stage(a.seq, a.q.rows, "attention seq");
    d.pos = stage(a.pos, a.q.rows, "attention pos");
    cuda_check(cuda::launch_attention(d, stream_), "attention", "kernel launch");
  }

  void gated_act(const GatedActArgs& a) override {
    check_mat(a.up, a.gate.rows, a.gate.cols, "gated_act", "up");
    check_mat(a.out, a.gate.rows, a.gate.cols, "gated_act", "out");
    cuda_check(cuda::launch_gated_act(a, stream_), "gated_act", "kernel launch");
  }

  void add(const AddArgs& a) override {
    check_mat(a.b, a.a.rows, a.a.cols, "add", "b");
    check_mat(a.out, a.a.rows, a.a.cols, "add", "out");
    cuda_check(cuda::launch_add(a, stream_), "add", "kernel launch");
  }

  void softcap(const SoftcapArgs& a) override {
    BRISK_CHECK(a.cap > 0.0f, "softcap: cap must be > 0");
    cuda_check(cuda::launch_softcap(a, stream_), "softcap", "kernel launch");
  }

  // Mixture-of-experts layers are not implemented on CUDA yet: the model loader reports it
  // at the first forward rather than computing something else.
  void moe(const MoeArgs&) override {
    fail("moe: mixture-of-experts layers are not implemented on the CUDA backend yet; use --device cpu");
  }

  void embedding(const EmbeddingArgs& a) override {
    check_mat(a.out, a.out.rows, a.table.n_in, "embedding", "out");
    EmbeddingArgs d = a;
    d.table = device_weight(a.table, "embedding");
    d.ids = stage(a.ids, a.out.rows, "embedding ids");
    cuda_check(cuda::launch_embedding(d, stream_), "embedding", "kernel launch");
  }

  void get_rows(const GetRowsArgs& a) override {
    check_mat(a.out, a.out.rows, a.x.cols, "get_rows", "out");
    GetRowsArgs d = a;
    d.rows = stage(a.rows, a.out.rows, "get_rows rows");
    cuda_check(cuda::launch_get_rows(d, stream_), "get_rows", "kernel launch");
  }

 private:
  struct Staged {
    int32_t* dev = nullptr;
    int64_t cap = 0;
    std::vector<int32_t> last;
  };
  struct Uploaded {
    void* dev = nullptr;
    size_t bytes = 0;
    Weight w;  // the device view (type may differ from the host one after conversion)
    QuantType host_type = QuantType::F32;
  };

  float* act_scratch(size_t floats) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (floats > act_floats_) {
      if (act_) {
        cuda_check(cudaStreamSynchronize(stream_), "matmul", "cudaStreamSynchronize");
        cuda_check(cudaFree(act_), "matmul", "cudaFree");
        allocs_.erase(reinterpret_cast<uintptr_t>(act_));
      }
      act_ = static_cast<float*>(raw_alloc(sizeof(float) * floats, "matmul"));
      act_floats_ = floats;
    }
    return act_;
  }

  void* raw_alloc(size_t bytes, const char* op) {
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

  bool is_device(const void* p) const {
    const auto u = reinterpret_cast<uintptr_t>(p);
    auto it = allocs_.upper_bound(u);
    if (it == allocs_.begin()) return false;
    --it;
    return u < it->first + it->second;
  }

  void check_kv(const KvView& v, const char* op) const {
    BRISK_CHECK(v.type == QuantType::F16 || v.type == QuantType::F32, op, ": KV cache type ",
                quant_type_info(v.type).name, " is not supported on CUDA (use f16 or f32)");
    BRISK_CHECK(v.data && is_device(v.data), op, ": KV cache is not device memory of this backend");
    BRISK_CHECK(v.row_bytes == size_t(v.width) * (v.type == QuantType::F16 ? 2 : 4), op,
                ": KV cache row_bytes ", v.row_bytes, " does not match width ", v.width);
  }

  // Device view of a weight: used as is when already in device memory, else uploaded once.
  Weight device_weight(const Weight& w, const char* op) {
    BRISK_CHECK(w.data != nullptr && w.n_in > 0 && w.n_out > 0, op, ": empty weight");
    const auto rb = quant_row_bytes(w.type, uint64_t(w.n_in));
    BRISK_CHECK(rb && *rb == w.row_bytes, op, ": weight row of ", w.n_in, " ", quant_type_info(w.type).name,
                " elements has ", w.row_bytes, " bytes");
    BRISK_CHECK(w.n_in % 8 == 0, op, ": weight rows of ", w.n_in, " elements (need a multiple of 8 on CUDA)");
    std::lock_guard<std::mutex> lock(mutex_);
    if (is_device(w.data)) {
      BRISK_CHECK(cuda::weight_format_on_device(w.type), op, ": ", quant_type_info(w.type).name,
                  " weights have no CUDA kernel");
      return w;
    }
    auto it = weights_.find(w.data);
    if (it != weights_.end()) {
      const Weight& c = it->second.w;
      BRISK_CHECK(c.n_in == w.n_in && c.n_out == w.n_out && it->second.host_type == w.type, op,
                  ": weight at a cached host address changed shape or format (host weights must outlive the backend)");
      return c;
    }
    Weight d = w;
    std::vector<uint16_t> converted;
    const void* src = w.data;
    if (!cuda::weight_format_on_device(w.type)) {
      if (warned_.insert(int(w.type)).second)
        log_warn("cuda backend: ", quant_type_info(w.type).name,
                 " weights have no CUDA kernel; dequantizing them to BF16 at upload");
      converted.resize(size_t(w.n_in) * size_t(w.n_out));
      std::vector<float> row(static_cast<size_t>(w.n_in));
      for (int64_t r = 0; r < w.n_out; ++r) {
        cpu::row_to_f32(w.type, w.row(r), row.data(), w.n_in);
        for (int64_t i = 0; i < w.n_in; ++i) converted[size_t(r * w.n_in + i)] = f32_to_bf16(row[size_t(i)]);
      }
      d.type = QuantType::BF16;
      d.row_bytes = size_t(w.n_in) * 2;
      src = converted.data();
    }
    const size_t bytes = d.row_bytes * size_t(d.n_out);
    void* dev = raw_alloc(bytes, op);
    cuda_check(cudaMemcpy(dev, src, bytes, cudaMemcpyHostToDevice), op, "weight upload");
    d.data = dev;
    weights_[w.data] = Uploaded{.dev = dev, .bytes = bytes, .w = d, .host_type = w.type};
    return d;
  }

  // Device copy of a constant float vector (norm weights, biases, rotary frequencies).
  const float* device_floats(const float* p, int64_t n, const char* op) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (is_device(p)) return p;
    auto it = weights_.find(p);
    if (it != weights_.end()) {
      BRISK_CHECK(it->second.bytes >= sizeof(float) * size_t(n), op, ": constant at a cached address grew");
      return static_cast<const float*>(it->second.dev);
    }
    const size_t bytes = sizeof(float) * size_t(n);
    void* dev = raw_alloc(bytes, op);
    cuda_check(cudaMemcpy(dev, p, bytes, cudaMemcpyHostToDevice), op, "upload");
    weights_[p] = Uploaded{.dev = dev, .bytes = bytes, .w = {}, .host_type = QuantType::F32};
    return static_cast<const float*>(dev);
  }

  // Device copy of a per-batch int array (copied only when its contents changed).
  const int32_t* stage(const int32_t* p, int64_t n, const char* op) {
    BRISK_CHECK(p != nullptr || n == 0, op, ": missing array");
    if (n == 0) return p;
    std::lock_guard<std::mutex> lock(mutex_);
    if (is_device(p)) return p;
    Staged& s = staged_[p];
    if (s.cap < n) {
      if (s.dev) {
        cuda_check(cudaStreamSynchronize(stream_), op, "cudaStreamSynchronize");
        cuda_check(cudaFree(s.dev), op, "cudaFree");
        allocs_.erase(reinterpret_cast<uintptr_t>(s.dev));
      }
      const int64_t cap = n < 64 ? 64 : n;
      s.dev = static_cast<int32_t*>(raw_alloc(sizeof(int32_t) * size_t(cap), op));
      s.cap = cap;
      s.last.clear();
    }
    if (int64_t(s.last.size()) == n && std::memcmp(s.last.data(), p, sizeof(int32_t) * size_t(n)) == 0) return s.dev;
    s.last.assign(p, p + n);
    cuda_check(cudaMemcpyAsync(s.dev, s.last.data(), sizeof(int32_t) * size_t(n), cudaMemcpyHostToDevice, stream_),
               op, "cudaMemcpyAsync");
    // The source (s.last) may be reassigned by a later call before this copy runs.
    cuda_check(cudaStreamSynchronize(stream_), op, "cudaStreamSynchronize");
    return s.dev;
  }

  int device_;
  cudaStream_t stream_ = nullptr;
  std::mutex mutex_;
  std::map<uintptr_t, size_t> allocs_;  // device base -> bytes
  std::unordered_map<const void*, Uploaded> weights_;
  std::unordered_map<const void*, Staged> staged_;
  std::set<int> warned_;
  float* act_ = nullptr;  // rounded activations [rows, n_in] of the matmul in flight
  size_t act_floats_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int device) { return std::make_unique<CudaBackend>(device); }

}  // namespace brisk
