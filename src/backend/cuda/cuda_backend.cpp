// The CUDA backend: device memory from cudaMalloc (never managed memory), one stream, and the
// kernels of kernels/cuda/. The op interface hands it host pointers for model constants
// (weights, norm weights, biases, rotary tables) and for the per-batch ids/pos/seq arrays:
//   - constants are uploaded once, on first use, and cached by host address (weights in the
//     device layout of kernels/cuda/dequant.cuh, repacked on the device; formats without a
//     device kernel are dequantized once to BF16); a weight already in device memory in a
//     repacked format gets a repacked copy, cached by its address until it is freed;
//   - between begin_step and end_step the step's ids / pos / seq / output rows live in fixed
//     device buffers (copied once at begin_step); ops resolve those host arrays to them;
//   - other per-batch int arrays are copied to a device buffer per host address, only when
//     their contents changed since the last copy.
// Within a step, ops run their host checks and uploads at once and queue their launches; at
// end_step the queue runs as a CUDA graph (cuda_graphs.h: captured the second time the same
// launch sequence, the same pointers and shapes, is seen; replayed after), or launch by
// launch with BRISK_NO_CUDA_GRAPHS, for batches over kGraphMaxTokens tokens, or once a copy()
// or synchronize() inside the step forced the queue out.
// Pointers inside this backend's allocations are used as they are. Host constants must
// outlive the backend (model weights do: a Context holds its Model). Every CUDA call and
// launch is checked; a failure is a brisk::Error naming the op and the CUDA error.
#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "backend/cuda/cuda_blas.h"
#include "backend/cuda/cuda_graphs.h"
#include "core/error.h"
#include "core/flags.h"
#include "core/fp16.h"
#include "core/log.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/attention_prefill.h"
#include "kernels/cuda/gemm_prep.h"
#include "kernels/cuda/sample.h"
#include "kernels/cuda/kernels.h"
#include "quant/format.h"
#include "quant/repack.h"
#include "quant/types.h"

namespace brisk {

namespace {

constexpr int32_t kGraphMaxTokens = 64;  // steps of at most this many tokens run as graphs
constexpr int32_t kGemvMaxTokens = 8;    // matmuls of more rows take the tensor-core GEMM
constexpr int32_t kDenseGemmMinTokens = 2;  // BF16 weights: matmuls of this many rows on the tensor cores
constexpr size_t kMaxGraphs = 16;
// Matmuls of more than kGemvMaxTokens rows (and BF16 weights from kDenseGemmMinTokens rows) run
// on the tensor cores (cuBLAS BF16 GEMM); weights
// not stored as BF16 are dequantized per matmul into a reused BF16 scratch of at most this many
// elements (128 MiB), in chunks of rows when a matrix is larger.
constexpr int64_t kGemmScratchElems = int64_t(64) << 20;

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

// The launch key of a step: every op appends its kind and every argument a kernel sees.
struct Key {
  std::vector<uint64_t> w;
  void add(uint64_t v) { w.push_back(v); }
  void add(const void* p) { w.push_back(uint64_t(reinterpret_cast<uintptr_t>(p))); }
  void add(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    w.push_back(b);
  }
  void add(const Mat& m) {
    add(m.data);
    add(uint64_t(m.rows));
    add(uint64_t(m.cols));
    add(uint64_t(m.row_stride()));
  }
  void add(const Weight& x) {
    add(uint64_t(x.type));
    add(uint64_t(x.n_in));
    add(uint64_t(x.n_out));
    add(uint64_t(x.row_bytes));
    add(x.data);
  }
  void add(const KvView& v) {
    add(uint64_t(v.type));
    add(v.data);
    add(uint64_t(v.width));
    add(uint64_t(v.row_bytes));
    add(uint64_t(v.capacity));
    add(uint64_t(v.n_seq));
    add(uint64_t(v.block_size));
    add(uint64_t(v.n_blocks));
    add(v.device_table);
    add(uint64_t(v.table_stride));
  }
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, bool graphs) : device_(device), graphs_(graphs && !flags().no_cuda_graphs) {
    int count = 0;
    cuda_check(cudaGetDeviceCount(&count), "init", "cudaGetDeviceCount");
    BRISK_CHECK(device >= 0 && device < count, "cuda backend: device ", device, " out of range (", count,
                " CUDA devices)");
    cuda_check(cudaSetDevice(device), "init", "cudaSetDevice");
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "init", "cudaStreamCreate");
    cuda_check(cudaEventCreateWithFlags(&step_copied_, cudaEventDisableTiming), "init", "cudaEventCreate");
    if (!flags().no_cuda_gemm) blas_ = cuda::blas_create(stream_);
  }

  ~CudaBackend() override {
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

  std::string name() const override { return str_cat("cuda:", device_); }
  int n_threads() const override { return 1; }

  uint64_t graph_replays() const { return graphs_cache_.replays(); }
  bool has_gemm() const { return blas_ != nullptr; }

  // out [m, n] (row stride ldo) = x [m, k] . w [n, k]^T, BF16 operands in device memory.
  void gemm_bf16(const uint16_t* x, const uint16_t* w, float* out, int64_t m, int64_t n, int64_t k, int64_t ldo) {
    flush("gemm");
    cuda::blas_gemm_bf16(blas_, x, w, out, m, n, k, ldo, "gemm");
  }

  bool argmax_rows(const Mat& x, int32_t* ids) override {
    BRISK_CHECK(x.data != nullptr && x.rows >= 0 && x.cols > 0 && x.row_stride() >= x.cols && ids != nullptr,
                "argmax_rows: bad logits [", x.rows, ", ", x.cols, "]");
    if (x.rows == 0) return true;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      BRISK_CHECK(is_device(x.data) && is_device(x.row(x.rows - 1) + x.cols - 1), "argmax_rows: logits are not ",
                  "device memory of this backend");
    }
    auto* dev = static_cast<int32_t*>(scratch(argmax_, sizeof(int32_t) * size_t(x.rows), "argmax_rows"));
    enqueue("argmax_rows", [x, dev](cudaStream_t s) { return cuda::launch_argmax_rows(x, dev, s); });
    copy(ids, dev, sizeof(int32_t) * size_t(x.rows));
    return true;
  }

  bool sample_rows(const Mat& x, const DeviceSampleSpec* specs, const DeviceSampleEdit* edits, int32_t n_edits,
                   int32_t* ids) override {
    BRISK_CHECK(x.data != nullptr && x.rows >= 0 && x.cols > 0 && x.row_stride() >= x.cols && x.cols < INT32_MAX,
                "sample_rows: bad logits [", x.rows, ", ", x.cols, "]");
    if (flags().no_device_sampling) return false;
    if (x.rows == 0) return true;
    BRISK_CHECK(specs != nullptr && ids != nullptr && n_edits >= 0 && (n_edits == 0 || edits != nullptr),
                "sample_rows: missing specs, edits or ids");
    for (int64_t r = 0; r < x.rows; ++r) {
      const DeviceSampleSpec& sp = specs[r];
      const bool greedy = !(sp.temperature > 0.0f) || !std::isfinite(1.0f / sp.temperature);
      BRISK_CHECK(greedy || (sp.top_k >= 1 && sp.top_k <= kDeviceSampleMaxTopK), "sample_rows: top_k ", sp.top_k,
                  " outside 1..", kDeviceSampleMaxTopK);
      BRISK_CHECK(sp.edit_offset >= 0 && sp.n_edits >= 0 && int64_t(sp.edit_offset) + sp.n_edits <= n_edits,
                  "sample_rows: row ", r, " edits outside the ", n_edits, " given");
      BRISK_CHECK(sp.u >= 0.0 && sp.u < 1.0, "sample_rows: draw ", sp.u, " outside [0, 1)");
      for (int32_t e = 0; e < sp.n_edits; ++e)
        BRISK_CHECK(edits[sp.edit_offset + e].token >= 0 && edits[sp.edit_offset + e].token < x.cols,
                    "sample_rows: edit token ", edits[sp.edit_offset + e].token, " outside the vocabulary");
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      BRISK_CHECK(is_device(x.data) && is_device(x.row(x.rows - 1) + x.cols - 1), "sample_rows: logits are not ",
                  "device memory of this backend");
    }
    // One buffer: ids, specs, edits, then the working rows.
    const size_t ids_bytes = align_up(sizeof(int32_t) * size_t(x.rows));
    const size_t spec_bytes = align_up(sizeof(DeviceSampleSpec) * size_t(x.rows));
    const size_t edit_bytes = align_up(sizeof(DeviceSampleEdit) * size_t(n_edits));
    const size_t work_bytes = sizeof(float) * size_t(x.rows) * size_t(x.cols);
    auto* base = static_cast<uint8_t*>(scratch(sample_, ids_bytes + spec_bytes + edit_bytes + work_bytes, "sample_rows"));
    auto* dev_ids = reinterpret_cast<int32_t*>(base);
    auto* dev_specs = reinterpret_cast<DeviceSampleSpec*>(base + ids_bytes);
    auto* dev_edits = reinterpret_cast<DeviceSampleEdit*>(base + ids_bytes + spec_bytes);
    auto* work = reinterpret_cast<float*>(base + ids_bytes + spec_bytes + edit_bytes);
    copy(dev_specs, specs, sizeof(DeviceSampleSpec) * size_t(x.rows));
    if (n_edits > 0) copy(dev_edits, edits, sizeof(DeviceSampleEdit) * size_t(n_edits));
    enqueue("sample_rows", [x, dev_specs, dev_edits, work, dev_ids](cudaStream_t s) {
      return cuda::launch_sample_rows(x, dev_specs, dev_edits, work, dev_ids, s);
    });
    copy(ids, dev_ids, sizeof(int32_t) * size_t(x.rows));
    return true;
  }

  static size_t align_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

  bool memory_info(size_t* free_bytes, size_t* total_bytes) const override {
    cudaSetDevice(device_);
    const cudaError_t e = cudaMemGetInfo(free_bytes, total_bytes);
    if (e != cudaSuccess) cudaGetLastError();
    return e == cudaSuccess;
  }

  void* alloc(size_t bytes) override {
    use_device();
    forget_quant();
    std::lock_guard<std::mutex> lock(mutex_);
    return raw_alloc(bytes, "alloc");
  }

  void free(void* p) override {
    if (!p) return;
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

  void copy(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    use_device();
    flush("copy");
    forget_quant();
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_), "copy", "cudaMemcpyAsync");
    cuda_check(cudaStreamSynchronize(stream_), "copy", "cudaStreamSynchronize");
  }

  void synchronize() override {
    flush("synchronize");
    cuda_check(cudaStreamSynchronize(stream_), "synchronize", "cudaStreamSynchronize");
  }

  // The calling thread's current device := this backend's (a server runs steps on its own
  // thread; launches and allocations go to the current device).
  void use_device() const { cuda_check(cudaSetDevice(device_), "use_device", "cudaSetDevice"); }

  void begin_step(const StepInputs& in) override {
    use_device();
    if (in_step_) {  // the previous step ended in an error: drop what it queued
      launches_.clear();
      names_.clear();
      in_step_ = false;
      free_retired();
    }
    BRISK_CHECK(in.n_tok >= 0 && in.n_out >= 0 && in.n_out <= in.n_tok, "cuda backend: bad step inputs");
    replay_ok_ = false;
    staged_other_ = false;
    std::lock_guard<std::mutex> lock(mutex_);
    const int64_t n = std::max<int64_t>(in.n_tok, 1);
    if (n > step_cap_) {
      cuda_check(cudaStreamSynchronize(stream_), "begin_step", "cudaStreamSynchronize");
      if (step_dev_) {
        cuda_check(cudaFree(step_dev_), "begin_step", "cudaFree");
        allocs_.erase(reinterpret_cast<uintptr_t>(step_dev_));
      }
      if (step_host_) cuda_check(cudaFreeHost(step_host_), "begin_step", "cudaFreeHost");
      step_cap_ = std::max<int64_t>(n, 64);
      step_dev_ = static_cast<int32_t*>(raw_alloc(sizeof(int32_t) * 4 * size_t(step_cap_), "begin_step"));
      cuda_check(cudaMallocHost(reinterpret_cast<void**>(&step_host_), sizeof(int32_t) * 4 * size_t(step_cap_)),
                 "begin_step", "cudaMallocHost");
    }
    upload_step_inputs(in, "begin_step");
    in_step_ = true;
    step_eager_ = !graphs_ || in.n_tok > kGraphMaxTokens;
    forget_quant();
    key_.w.clear();
    key_.add(uint64_t(in.n_tok));
    key_.add(uint64_t(in.n_out));
  }

  // The step's ids, positions, sequences and output rows into the fixed device buffers (one
  // copy through the pinned buffer); step_map_ maps the host arrays to them.
  void upload_step_inputs(const StepInputs& in, const char* op) {
    // The pinned buffer is reused: wait for the previous step's copy out of it.
    cuda_check(cudaEventSynchronize(step_copied_), op, "cudaEventSynchronize");
    const int32_t* src[4] = {in.ids, in.pos, in.seq, in.out_rows};
    const int64_t cnt[4] = {in.n_tok, in.n_tok, in.n_tok, in.n_out};
    step_map_.clear();
    for (int k = 0; k < 4; ++k) {
      int32_t* h = step_host_ + k * step_cap_;
      if (src[k] && cnt[k] > 0) {
        std::memcpy(h, src[k], sizeof(int32_t) * size_t(cnt[k]));
        step_map_.push_back({src[k], step_dev_ + k * step_cap_, cnt[k]});
      }
    }
    cuda_check(cudaMemcpyAsync(step_dev_, step_host_, sizeof(int32_t) * 4 * size_t(step_cap_), cudaMemcpyHostToDevice,
                               stream_),
               op, "cudaMemcpyAsync");
    cuda_check(cudaEventRecord(step_copied_, stream_), op, "cudaEventRecord");
  }

  bool replay_step(const StepInputs& in) override {
    if (flags().no_cuda_step_replay || !replay_ok_ || in_step_ || in.n_tok != replay_n_tok_ ||
        in.n_out != replay_n_out_ || std::max<int64_t>(in.n_tok, 1) > step_cap_ || !graphs_cache_.last())
      return false;
    use_device();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      upload_step_inputs(in, "replay_step");
      step_map_.clear();
    }
    cuda_check(graphs_cache_.replay_last(stream_), "replay_step", "cudaGraphLaunch");
    return true;
  }

  void end_step() override {
    BRISK_CHECK(in_step_, "cuda backend: end_step without begin_step");
    in_step_ = false;
    step_map_.clear();
    forget_quant();
    if (!launches_.empty() && flags().cuda_kernel_times) {
      time_launches();
    } else if (!launches_.empty()) {
      const char* what = "launch";
      const cudaError_t e = graphs_cache_.run(key_.w, launches_, names_, stream_, &what);
      launches_.clear();
      names_.clear();
      cuda_check(e, "end_step", what);
      // The next step may be this graph again (replay_step) when it ran as one graph and no op
      // read a host array other than the step's (such an array could change under it).
      replay_ok_ = !step_eager_ && !staged_other_ && graphs_cache_.last() != nullptr;
      replay_n_tok_ = key_.w.size() >= 2 ? int64_t(key_.w[0]) : -1;
      replay_n_out_ = key_.w.size() >= 2 ? int64_t(key_.w[1]) : -1;
    }
    free_retired();
  }

  void matmul(const MatmulArgs& a) override {
    check_mat(a.x, a.x.rows, a.w.n_in, "matmul", "x");
    check_mat(a.out, a.x.rows, a.w.n_out, "matmul", "out");
    MatmulArgs d = a;
    d.w = device_weight(a.w, "matmul");
    d.bias = a.bias ? device_floats(a.bias, a.w.n_out, "matmul bias") : nullptr;
    const bool wc = weight_constant(a.w);
    if (a.x.rows == 0) return;
    if (overlaps(a.out, bstate_x_)) bstate_valid_ = false;  // the output rewrites a converted input
    if (use_gemm(a)) {
      gemm(a, d);
      return;
    }
    // Activations go through the (original) weight format's vec_dot_type, as on the CPU:
    // quantized to int8 for the dp4a kernels, else rounded to floats.
    const cuda::ActRound round = cuda::act_round_for(format_traits(a.w.type).vec_dot_type);
    const size_t n = size_t(a.x.rows) * size_t(a.w.n_in);
    Key& k = key_;
    k.add(uint64_t(1));
    k.add(d.out);
    k.add(d.x);
    k.add(d.w);
    k.add(d.bias);
    k.add(uint64_t(wc));
    k.add(uint64_t(round));
    if (cuda::weight_takes_quantized_act(d.w.type)) {
      BRISK_CHECK(round == cuda::ActRound::q8_0 || round == cuda::ActRound::q8_k, "matmul: ",
                  quant_type_info(a.w.type).name, " weights need Q8 activations");
      cuda::QuantAct xq;
      if (qstate_.valid && qstate_.kind == round && same_mat(qstate_.x, a.x)) {
        xq = qstate_.q;  // the previous matmul's input, unchanged since
        k.add(uint64_t(100));
      } else {
        xq = quant_scratch(qact_, n, "matmul");
        k.add(xq.q);
        // Quantize inside the producer of x when it is the launch queued last.
        if (!fuse_into_producer(a.x, round, xq)) {
          enqueue("matmul (activation quantization)", [d, xq, round](cudaStream_t s) {
            return cuda::launch_quantize_activations(round, xq, d.x, s);
          });
          k.add(uint64_t(103));
        }
        qstate_ = QuantState{.x = a.x, .kind = round, .q = xq, .valid = true};
      }
      producer_.kind = 0;
      enqueue_gemv(d, &xq, wc);
      if (overlaps(a.out, qstate_.x)) qstate_.valid = false;
      if (overlaps(a.out, fstate_.x)) fstate_.valid = false;
      return;
    }
    if (round != cuda::ActRound::none) {
      MatmulArgs dr = d;
      if (fstate_.valid && fstate_.kind == round && same_mat(fstate_.x, a.x)) {
        dr.x = fstate_.xr;  // the previous matmul's rounded input, unchanged since
        k.add(uint64_t(104));
      } else {
        auto* xr = static_cast<float*>(scratch(act_, sizeof(float) * n, "matmul"));
        dr.x = Mat{.data = xr, .rows = a.x.rows, .cols = a.w.n_in};
        k.add(xr);
        // Round inside the producer of x when it is the launch queued last (F16 / BF16).
        const bool fused = (round == cuda::ActRound::f16 || round == cuda::ActRound::bf16) &&
                           fuse_into_producer(a.x, round, cuda::QuantAct{.q = nullptr, .d = xr});
        if (!fused)
          enqueue("matmul (activation rounding)", [d, dr, round](cudaStream_t s) {
            return cuda::launch_round_activations(round, dr.x.data, d.x, s);
          });
        fstate_ = RoundState{.x = a.x, .kind = round, .xr = dr.x, .valid = true};
      }
      enqueue_gemv(dr, nullptr, wc);
    } else if (reinterpret_cast<uintptr_t>(a.x.data) % 16 != 0 || a.x.row_stride() % 4 != 0) {
      // The float kernel loads activations 16 bytes at a time: make them a dense copy.
      fstate_.valid = false;  // act_ is overwritten
      auto* xc = static_cast<float*>(scratch(act_, sizeof(float) * n, "matmul"));
      MatmulArgs dc = d;
      dc.x = Mat{.data = xc, .rows = a.x.rows, .cols = a.w.n_in};
      k.add(xc);
      enqueue("matmul", [d, dc, wc](cudaStream_t s) {
        const cudaError_t e =
            cudaMemcpy2DAsync(dc.x.data, sizeof(float) * size_t(dc.x.cols), d.x.data, sizeof(float) * size_t(d.x.row_stride()),
                              sizeof(float) * size_t(dc.x.cols), size_t(dc.x.rows), cudaMemcpyDeviceToDevice, s);
        return e != cudaSuccess ? e : cuda::launch_matmul(dc, nullptr, s, wc);
      });
    } else {
      enqueue_gemv(d, nullptr, wc);
    }
    producer_.kind = 0;
    if (overlaps(a.out, qstate_.x)) qstate_.valid = false;
    if (overlaps(a.out, fstate_.x)) fstate_.valid = false;
  }

  void rms_norm(const RmsNormArgs& a) override {
    const int64_t group = a.group > 0 ? a.group : a.x.cols;
    BRISK_CHECK(group > 0 && a.x.cols % group == 0, "rms_norm: ", a.x.cols, " columns are not a multiple of group ",
                group);
    check_mat(a.out, a.x.rows, a.x.cols, "rms_norm", "out");
    RmsNormArgs d = a;
    d.weight = a.weight ? device_floats(a.weight, group, "rms_norm weight") : nullptr;
    key_.add(uint64_t(2));
    key_.add(d.out);
    key_.add(d.x);
    key_.add(d.weight);
    key_.add(uint64_t(d.group));
    key_.add(d.eps);
    const bool deferred = in_step_ && !step_eager_;
    // The residual add queued just before, producing x: one launch for both.
    const bool after_add = deferred && group == a.x.cols && producer_.kind == 4 &&
                           producer_.index + 1 == launches_.size() && same_mat(producer_.add.out, a.x);
    const Producer prev = producer_;
    forget_quant();
    if (after_add) {
      const AddArgs pa = prev.add;
      unsigned* bar = norm_barrier();
      const bool wc = constant_floats(d.weight);
      launches_[prev.index] = [pa, d, bar, wc](cudaStream_t s) {
        return cuda::launch_add_rms_norm(&pa, d, cuda::ActRound::none, nullptr, s, bar, wc);
      };
      key_.add(uint64_t(105));
      producer_ = Producer{.kind = 3, .norm = d, .gated = {}, .add = pa, .index = prev.index, .out = d.out};
      return;
    }
    unsigned* bar = norm_barrier();
    const bool wc = constant_floats(d.weight);
    enqueue("rms_norm", [d, bar, wc](cudaStream_t s) { return cuda::launch_rms_norm(d, s, bar, wc); });
    if (deferred && group == a.x.cols)
      producer_ = Producer{.kind = 1, .norm = d, .gated = {}, .add = {}, .index = launches_.size() - 1, .out = d.out};
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
    key_.add(uint64_t(3));
    key_.add(d.x);
    key_.add(d.pos);
    key_.add(uint64_t(d.n_head));
    key_.add(uint64_t(d.head_dim));
    key_.add(inv);
    key_.add(uint64_t(a.table->n_rot));
    key_.add(a.table->attn_factor);
    key_.add(uint64_t(a.table->neox));
    // The table is read on the host at launch: keep a copy of its scalars.
    const RopeTable table{.n_rot = a.table->n_rot, .inv_freq = {}, .attn_factor = a.table->attn_factor,
                          .neox = a.table->neox};
    const bool deferred = in_step_ && !step_eager_;
    const Producer prev = producer_;
    forget_quant();
    // The rope of q queued just before with the same positions and table: one launch for both.
    if (deferred && prev.kind == 5 && prev.index + 1 == launches_.size() && prev.rope.pos == d.pos &&
        prev.rope_inv == inv && prev.rope.head_dim == d.head_dim && prev.rope.x.rows == d.x.rows &&
        prev.rope_table.n_rot == table.n_rot && prev.rope_table.attn_factor == table.attn_factor &&
        prev.rope_table.neox == table.neox && !overlaps(prev.rope.x, d.x)) {
      const RopeArgs rq = prev.rope;
      launches_[prev.index] = [rq, d, inv, table](cudaStream_t s) {
        RopeArgs q2 = rq, k2 = d;
        q2.table = &table;
        k2.table = &table;
        return cuda::launch_rope_qk_store(&q2, k2, nullptr, inv, s);
      };
      key_.add(uint64_t(107));
      producer_ = Producer{.kind = 6, .norm = {}, .gated = {}, .add = {}, .index = prev.index, .out = d.x,
                           .rope = d, .rope_q = rq, .rope_inv = inv, .rope_table = table};
      return;
    }
    enqueue("rope", [d, inv, table](cudaStream_t s) {
      RopeArgs r = d;
      r.table = &table;
      return cuda::launch_rope(r, inv, s);
    });
    if (deferred)
      producer_ = Producer{.kind = 5, .norm = {}, .gated = {}, .add = {}, .index = launches_.size() - 1, .out = d.x,
                           .rope = d, .rope_q = {}, .rope_inv = inv, .rope_table = table};
  }

  void kv_store(const KvStoreArgs& a) override {
    check_mat(a.k, a.k.rows, a.k_cache.width, "kv_store", "k");
    check_mat(a.v, a.k.rows, a.v_cache.width, "kv_store", "v");
    check_kv(a.k_cache, "kv_store");
    check_kv(a.v_cache, "kv_store");
    check_kv_pair(a.k_cache, a.v_cache, "kv_store");
    KvStoreArgs d = a;
    d.seq = stage(a.seq, a.k.rows, "kv_store seq");
    d.pos = stage(a.pos, a.k.rows, "kv_store pos");
    key_.add(uint64_t(4));
    key_.add(d.k);
    key_.add(d.v);
    key_.add(d.k_cache);
    key_.add(d.v_cache);
    key_.add(d.seq);
    key_.add(d.pos);
    const Producer prev = producer_;
    forget_quant();
    // The rope of k (and q) queued just before, on these positions: one launch for all.
    if (in_step_ && !step_eager_ && (prev.kind == 5 || prev.kind == 6) && prev.index + 1 == launches_.size() &&
        d.k_cache.type != QuantType::Q8_0 &&  // Q8_0 blocks are written whole, by launch_kv_store
        same_mat(prev.rope.x, d.k) && prev.rope.pos == d.pos &&
        int64_t(prev.rope.n_head) * prev.rope.head_dim == d.k_cache.width && !overlaps(d.v, d.k)) {
      const bool has_q = prev.kind == 6;
      const RopeArgs rq = prev.rope_q, rk = prev.rope;
      const float* inv = prev.rope_inv;
      const RopeTable table = prev.rope_table;
      launches_[prev.index] = [has_q, rq, rk, inv, table, d](cudaStream_t s) {
        RopeArgs q2 = rq, k2 = rk;
        q2.table = &table;
        k2.table = &table;
        return cuda::launch_rope_qk_store(has_q ? &q2 : nullptr, k2, &d, inv, s);
      };
      key_.add(uint64_t(108));
      if (has_q)
        producer_ = Producer{.kind = 7, .norm = {}, .gated = {}, .add = {}, .index = prev.index, .out = d.k,
                             .rope = rk, .rope_q = rq, .rope_inv = inv, .rope_table = table, .store = d};
      return;
    }
    enqueue("kv_store", [d](cudaStream_t s) { return cuda::launch_kv_store(d, s); });
  }

  void attention(const AttentionArgs& a) override {
    BRISK_CHECK(a.n_head_kv > 0 && a.n_head % a.n_head_kv == 0, "attention: ", a.n_head,
                " heads are not a multiple of ", a.n_head_kv, " KV heads");
    BRISK_CHECK(a.head_dim > 0 && a.head_dim <= 512, "attention: head_dim ", a.head_dim,
                " outside [1, 512] on CUDA");
    BRISK_CHECK(a.q.rows <= 65535, "attention: ", a.q.rows, " tokens in one call (at most 65535 on CUDA)");
    check_mat(a.q, a.q.rows, int64_t(a.n_head) * a.head_dim, "attention", "q");
    check_mat(a.out, a.q.rows, int64_t(a.n_head) * a.head_dim, "attention", "out");
    BRISK_CHECK(a.k_cache.width == int64_t(a.n_head_kv) * a.head_dim && a.v_cache.width == a.k_cache.width,
                "attention: KV cache width does not match the heads");
    check_kv(a.k_cache, "attention");
    check_kv(a.v_cache, "attention");
    check_kv_pair(a.k_cache, a.v_cache, "attention");
    BRISK_CHECK(a.k_cache.type != QuantType::Q8_0 || a.head_dim % 32 == 0, "attention: head_dim ", a.head_dim,
                " with a q8_0 KV cache (CUDA needs a multiple of 32: heads start on whole blocks)");
    AttentionArgs d = a;
    const bool flash = use_flash_prefill(a);
    d.seq = stage(a.seq, a.q.rows, "attention seq");
    d.pos = stage(a.pos, a.q.rows, "attention pos");
    if (flash) {
      forget_quant();
      enqueue("attention (prefill)", [d](cudaStream_t s) { return cuda::launch_prefill_attention(d, s); });
      return;
    }
    const size_t sf = cuda::attention_scratch_floats(d);
    float* part = sf ? static_cast<float*>(scratch(attn_, sizeof(float) * sf, "attention")) : nullptr;
    const size_t nc = cuda::attention_counter_ints(d);
    int* cnt = nc ? static_cast<int*>(scratch(attn_cnt_, sizeof(int) * nc, "attention")) : nullptr;
    key_.add(uint64_t(5));
    key_.add(d.out);
    key_.add(d.q);
    key_.add(d.k_cache);
    key_.add(d.v_cache);
    key_.add(d.seq);
    key_.add(d.pos);
    key_.add(uint64_t(d.n_head));
    key_.add(uint64_t(d.n_head_kv));
    key_.add(uint64_t(d.head_dim));
    key_.add(d.scale);
    key_.add(uint64_t(d.window));
    key_.add(d.softcap);
    key_.add(part);
    key_.add(cnt);
    const Producer prev = producer_;
    forget_quant();
    // The ropes of q and k and the KV store queued just before: inside the attention launch.
    if (in_step_ && !step_eager_ && !flags().no_cuda_attn_rope && prev.kind == 7 &&
        prev.index + 1 == launches_.size() && (part == nullptr || cnt != nullptr) &&
        same_mat(prev.rope_q.x, d.q) && prev.rope_q.n_head == d.n_head && prev.rope.n_head == d.n_head_kv &&
        prev.rope.head_dim == d.head_dim && prev.rope_q.head_dim == d.head_dim && prev.store.pos == d.pos &&
        prev.store.seq == d.seq && same_kv(prev.store.k_cache, d.k_cache) && same_kv(prev.store.v_cache, d.v_cache) &&
        prev.store.k.cols == d.k_cache.width && prev.store.v.cols == d.v_cache.width &&
        !overlaps(d.out, d.q) && !overlaps(d.out, prev.store.k) && !overlaps(d.out, prev.store.v) &&
        !overlaps(d.q, prev.store.k) && !overlaps(d.q, prev.store.v) && !overlaps(prev.store.k, prev.store.v) &&
        cuda::attention_rope_supported(d, prev.rope_table.n_rot)) {
      const cuda::AttentionRope rp{.k = prev.store.k.data, .k_stride = prev.store.k.row_stride(),
                                   .v = prev.store.v.data, .v_stride = prev.store.v.row_stride(),
                                   .inv_freq = prev.rope_inv, .n_rot = prev.rope_table.n_rot,
                                   .attn_factor = prev.rope_table.attn_factor, .neox = prev.rope_table.neox};
      launches_[prev.index] = [d, rp, part, cnt](cudaStream_t s) {
        return cuda::launch_attention_rope(d, &rp, part, cnt, s);
      };
      names_[prev.index] = "attention (+ rope, KV store)";
      key_.add(uint64_t(110));
      attention_producer(d, &rp, prev.index);
      return;
    }
    enqueue("attention", [d, part, cnt](cudaStream_t s) { return cuda::launch_attention(d, part, cnt, s); });
    attention_producer(d, nullptr, launches_.size() - 1);
  }

  // A one-token attention launch whose output the next matmul may quantize inside it
  // (fuse_into_producer, cuda::AttentionQuant).
  void attention_producer(const AttentionArgs& d, const cuda::AttentionRope* rp, size_t index) {
    if (!in_step_ || step_eager_ || d.q.rows != 1 || !cuda::attention_quant_supported(d, cuda::ActRound::q8_0)) return;
    Producer pr;
    pr.kind = 8;
    pr.index = index;
    pr.out = d.out;
    pr.attn = d;
    if (rp) pr.attn_rope = *rp;
    pr.attn_has_rope = rp != nullptr;
    producer_ = pr;
  }

  void gated_act(const GatedActArgs& a) override {
    check_mat(a.up, a.gate.rows, a.gate.cols, "gated_act", "up");
    check_mat(a.out, a.gate.rows, a.gate.cols, "gated_act", "out");
    key_.add(uint64_t(6));
    key_.add(a.out);
    key_.add(a.gate);
    key_.add(a.up);
    key_.add(uint64_t(a.act));
    forget_quant();
    enqueue("gated_act", [a](cudaStream_t s) { return cuda::launch_gated_act(a, s); });
    if (in_step_ && !step_eager_)
      producer_ = Producer{.kind = 2, .norm = {}, .gated = a, .add = {}, .index = launches_.size() - 1, .out = a.out};
  }

  void add(const AddArgs& a) override {
    check_mat(a.b, a.a.rows, a.a.cols, "add", "b");
    check_mat(a.out, a.a.rows, a.a.cols, "add", "out");
    key_.add(uint64_t(7));
    key_.add(a.out);
    key_.add(a.a);
    key_.add(a.b);
    const GemvGroup g = gemv_;
    forget_quant();
    // The residual add of a decode matmul's output queued just before: in its epilogue.
    if (in_step_ && !step_eager_ && !flags().no_cuda_gemv_add && g.valid && g.n == 1 &&
        g.index + 1 == launches_.size()) {
      const MatmulArgs m = g.a[0];
      const bool is_a = same_mat(a.a, m.out), is_b = same_mat(a.b, m.out);
      const Mat res = is_b ? a.a : a.b;
      if ((is_a || is_b) && !overlaps(res, m.out) && !overlaps(a.out, m.x) && !overlaps(res, m.x) &&
          (same_mat(a.out, res) || !overlaps(a.out, res)) && (same_mat(a.out, m.out) || !overlaps(a.out, m.out))) {
        const cuda::QuantAct q = g.xq;
        const bool has_xq = g.has_xq, wc = g.wc;
        const Mat sum = a.out;
        launches_[g.index] = [m, q, has_xq, wc, res, sum](cudaStream_t s) {
          return cuda::launch_matmul_add(m, has_xq ? &q : nullptr, res, sum, s, wc);
        };
        names_[g.index] = "matmul (+ residual add)";
        key_.add(uint64_t(109));
        return;
      }
    }
    enqueue("add", [a](cudaStream_t s) { return cuda::launch_add(a, s); });
    if (in_step_ && !step_eager_)
      producer_ = Producer{.kind = 4, .norm = {}, .gated = {}, .add = a, .index = launches_.size() - 1, .out = a.out};
  }

  void softcap(const SoftcapArgs& a) override {
    BRISK_CHECK(a.cap > 0.0f, "softcap: cap must be > 0");
    key_.add(uint64_t(8));
    key_.add(a.x);
    key_.add(a.cap);
    forget_quant();
    enqueue("softcap", [a](cudaStream_t s) { return cuda::launch_softcap(a, s); });
  }

  // Mixture of experts: routing, the expert matmuls of each (token, slot) pair, the gated
  // activation and the weighted sum all run on the device (cuda::launch_moe_*), so a step
  // never waits on the host for the experts a token chose. Activations go through each
  // weight format's vec_dot_type as in matmul(); the CPU backend's roundings throughout.
  void moe(const MoeArgs& a) override {
    const int64_t n_tok = a.x.rows, n_embd = a.x.cols;
    BRISK_CHECK(a.gate && a.up && a.down && a.n_expert > 0 && a.n_used > 0 && a.n_used <= a.n_expert, "moe: ",
                a.n_used, " of ", a.n_expert, " experts, or expert weights missing");
    BRISK_CHECK(a.n_expert <= cuda::kMoeMaxExperts && a.n_used <= cuda::kMoeMaxUsed, "moe: ", a.n_used, " of ",
                a.n_expert, " experts (CUDA takes at most ", cuda::kMoeMaxUsed, " of ", cuda::kMoeMaxExperts, ")");
    check_mat(a.x, n_tok, n_embd, "moe", "x");
    check_mat(a.logits, n_tok, a.n_expert, "moe", "logits");
    check_mat(a.out, n_tok, n_embd, "moe", "out");
    BRISK_CHECK(a.out.data != a.x.data, "moe: out must not alias x");
    const MoeTables& tb = moe_tables(a);
    if (n_tok == 0) return;
    if (n_tok > kGemvMaxTokens && !flags().no_cuda_moe_grouped) {
      if (flags().no_cuda_moe_items || n_tok * int64_t(a.n_used) > 65535) return moe_grouped(a);
      // Up to a graph step's tokens no expert gets more than 64 rows: grouped on the device.
      if (n_tok <= kGraphMaxTokens && !flags().no_cuda_moe_device_group) return moe_grouped_device(a);
      return moe_grouped_items(a);
    }
    forget_quant();
    const int64_t n_ff = tb.n_ff, nk = n_tok * int64_t(a.n_used);
    BRISK_CHECK(n_tok <= 65535, "moe: ", n_tok, " tokens in one step (CUDA takes at most 65535)");
    auto* route = static_cast<uint8_t*>(scratch(moe_route_, size_t(nk) * 8, "moe"));
    auto* ids = reinterpret_cast<int32_t*>(route);
    auto* wts = reinterpret_cast<float*>(route + size_t(nk) * 4);
    auto* gu = static_cast<float*>(scratch(moe_gu_, sizeof(float) * size_t(nk) * size_t(2 * n_ff), "moe"));
    auto* dn = static_cast<float*>(scratch(moe_down_, sizeof(float) * size_t(nk) * size_t(n_embd), "moe"));
    const Mat g{.data = gu, .rows = nk, .cols = n_ff};
    const Mat u{.data = gu + size_t(nk) * size_t(n_ff), .rows = nk, .cols = n_ff};
    const Mat d{.data = dn, .rows = nk, .cols = n_embd};
    Key& k = key_;
    k.add(uint64_t(12));
    k.add(a.out);
    k.add(a.x);
    k.add(a.logits);
    k.add(tb.gate);
    k.add(route);
    k.add(gu);
    k.add(dn);
    k.add(uint64_t(a.n_used) << 32 | uint64_t(a.n_expert) << 1 | uint64_t(a.norm_topk));
    k.add(uint64_t(a.act));
    const bool fused = !flags().no_cuda_moe_fused;
    // The routing, with the gate's quantized input in the same launch where it can.
    const cuda::ActRound x_round = cuda::act_round_for(format_traits(tb.gate_host_type).vec_dot_type);
    MoeInput xin;
    if (fused && cuda::weight_takes_quantized_act(tb.gate_type) && quant_fits(x_round, n_embd)) {
      xin.xq = quant_scratch(moe_xq_, size_t(n_tok) * size_t(n_embd), "moe");
      k.add(xin.xq.q);
      const Mat logits = a.logits, x = a.x;
      const int ne = a.n_expert, nu = a.n_used;
      const bool norm = a.norm_topk;
      const cuda::QuantAct q = xin.xq;
      enqueue("moe (route + activation quantization)", [=](cudaStream_t s) {
        return cuda::launch_moe_route(logits, ne, nu, norm, ids, wts, s, x_round, &q, &x);
      });
    } else {
      enqueue_moe_route(a, ids, wts);
      xin = moe_input(a.x, tb.gate_host_type, tb.gate_type, moe_xq_, "moe");
    }
    // gate / up of every pair on its token's row of x (one launch when they share the input),
    // then the activation, then down.
    const bool same_input = tb.up_type == tb.gate_type && tb.up_host_type == tb.gate_host_type;
    if (fused && same_input) {
      moe_matmul(tb.gate, tb.gate_type, n_embd, n_ff, a, ids, nk, false, xin, g, tb.up, &u);
    } else {
      moe_matmul(tb.gate, tb.gate_type, n_embd, n_ff, a, ids, nk, false, xin, g);
      const MoeInput xup = same_input ? xin : moe_input(a.x, tb.up_host_type, tb.up_type, moe_xq2_, "moe");
      moe_matmul(tb.up, tb.up_type, n_embd, n_ff, a, ids, nk, false, xup, u);
    }
    const MoeInput hin = moe_act_input(g, u, a.act, tb, fused);
    const Mat out = a.out;
    if (fused) {  // down and the weighted sum in one launch
      const cuda::MoeMatmulArgs m = moe_matmul_args(tb.down, tb.down_type, n_ff, n_embd, a, ids, nk, true, hin, d);
      enqueue("moe (expert matmul + combine)",
              [m, wts, out](cudaStream_t s) { return cuda::launch_moe_matmul_combine(m, wts, out, s); });
    } else {
      moe_matmul(tb.down, tb.down_type, n_ff, n_embd, a, ids, nk, true, hin, d);
      const int nu = a.n_used;
      enqueue("moe (combine)", [=](cudaStream_t s) { return cuda::launch_moe_combine(out, dn, ids, wts, nu, s); });
    }
    forget_quant();
  }

  void embedding(const EmbeddingArgs& a) override {
    check_mat(a.out, a.out.rows, a.table.n_in, "embedding", "out");
    EmbeddingArgs d = a;
    d.table = device_weight(a.table, "embedding");
    d.ids = stage(a.ids, a.out.rows, "embedding ids");
    key_.add(uint64_t(9));
    key_.add(d.out);
    key_.add(d.table);
    key_.add(d.ids);
    key_.add(d.scale);
    forget_quant();
    enqueue("embedding", [d](cudaStream_t s) { return cuda::launch_embedding(d, s); });
  }

  void get_rows(const GetRowsArgs& a) override {
    check_mat(a.out, a.out.rows, a.x.cols, "get_rows", "out");
    GetRowsArgs d = a;
    d.rows = stage(a.rows, a.out.rows, "get_rows rows");
    key_.add(uint64_t(10));
    key_.add(d.out);
    key_.add(d.x);
    key_.add(d.rows);
    forget_quant();
    enqueue("get_rows", [d](cudaStream_t s) { return cuda::launch_get_rows(d, s); });
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
  struct StepArray {
    const int32_t* host;
    int32_t* dev;
    int64_t n;
  };
  struct Scratch {
    void* p = nullptr;
    size_t bytes = 0;
  };

  // Routing of every token: expert ids and weights [n_tok, n_used] into ids / wts (device).
  void enqueue_moe_route(const MoeArgs& a, int32_t* ids, float* wts) {
    const Mat logits = a.logits;
    const int ne = a.n_expert, nu = a.n_used;
    const bool norm = a.norm_topk;
    enqueue("moe (route)", [=](cudaStream_t s) { return cuda::launch_moe_route(logits, ne, nu, norm, ids, wts, s); });
  }

  // A MoE layer of more than kGemvMaxTokens tokens (prefill, never a graph step): the routing
  // runs on the device and is read back (which runs the step launch by launch); then, as the
  // CPU backend does, each chosen expert in id order takes its tokens' rows of x as one matmul
  // input (the GEMM), and its weighted outputs are added to those tokens' rows.
  // Prefill (more than 8 tokens), one launch per stage: the routing is read back, the pairs'
  // rows are gathered in expert order, then experts with at most kMoeItemMaxRows rows run
  // together in grouped GEMV launches (cuda::launch_moe_items: each weight unit loaded once
  // per run of up to 8 rows, activations quantized as in decode), experts with more rows take
  // the tensor-core GEMM on their run of rows; one gated activation over all rows, and one
  // weighted sum per token in expert id order (cuda::launch_moe_combine over the sorted rows).
  static constexpr int64_t kMoeItemMaxRows = 64;
  void moe_grouped_items(const MoeArgs& a) {
    const auto& tb = moe_tables(a);
    const int64_t n_tok = a.x.rows, n_embd = a.x.cols, n_ff = tb.n_ff;
    const int64_t nk = n_tok * int64_t(a.n_used);
    const int32_t ne = a.n_expert;
    forget_quant();
    auto* route = static_cast<uint8_t*>(scratch(moe_route_, size_t(nk) * 8, "moe"));
    auto* ids = reinterpret_cast<int32_t*>(route);
    auto* wts = reinterpret_cast<float*>(route + size_t(nk) * 4);
    enqueue_moe_route(a, ids, wts);
    std::vector<int32_t> host_ids(static_cast<size_t>(nk));
    copy(host_ids.data(), ids, sizeof(int32_t) * host_ids.size());
    // Rows in expert order: start[e] .. start[e + 1]; a pair without an expert (routing of NaN
    // logits) has no row and adds nothing.
    std::vector<int64_t> start(size_t(ne) + 1, 0);
    for (const int32_t e : host_ids)
      if (e >= 0 && e < ne) ++start[size_t(e) + 1];
    for (int32_t e = 0; e < ne; ++e) start[size_t(e) + 1] += start[size_t(e)];
    const int64_t n_rows = start[size_t(ne)];
    // Device tables: [row -> token | pair -> row | items (expert, first row, rows)].
    std::vector<int32_t> tab(size_t(n_rows) + size_t(nk));
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    for (int64_t i = 0; i < nk; ++i) {
      const int32_t e = host_ids[size_t(i)];
      int32_t row = -1;
      if (e >= 0 && e < ne) {
        row = int32_t(fill[size_t(e)]++);
        tab[size_t(row)] = int32_t(i / a.n_used);
      }
      tab[size_t(n_rows + i)] = row;
    }
    int64_t n_items = 0;
    std::vector<int32_t> large;  // experts for the GEMM
    for (int32_t e = 0; e < ne; ++e) {
      const int64_t m = start[size_t(e) + 1] - start[size_t(e)];
      if (m > kMoeItemMaxRows) {
        large.push_back(e);
        continue;
      }
      for (int64_t r = 0; r < m; r += cuda::kMoeItemRows) {
        tab.push_back(e);
        tab.push_back(int32_t(start[size_t(e)] + r));
        tab.push_back(int32_t(std::min<int64_t>(cuda::kMoeItemRows, m - r)));
        ++n_items;
      }
    }
    auto* dtab = static_cast<int32_t*>(scratch(moe_items_, sizeof(int32_t) * tab.size(), "moe"));
    copy(dtab, tab.data(), sizeof(int32_t) * tab.size());
    const int32_t* row_tok = dtab;
    const int32_t* pair_row = dtab + n_rows;
    const int32_t* items = dtab + n_rows + nk;
    const Mat out = a.out;
    if (n_rows == 0) {
      enqueue("moe (zero)", [out](cudaStream_t s) {
        return cudaMemset2DAsync(out.data, sizeof(float) * size_t(out.row_stride()), 0,
                                 sizeof(float) * size_t(out.cols), size_t(out.rows), s);
      });
      return;
    }
    // [n_rows, n_embd] gathered inputs and down outputs, [n_rows, n_ff] gate / up outputs.
    auto* xd = static_cast<float*>(scratch(moe_down_, sizeof(float) * size_t(n_rows) * size_t(2 * n_embd), "moe"));
    auto* gu = static_cast<float*>(scratch(moe_gu_, sizeof(float) * size_t(n_rows) * size_t(2 * n_ff), "moe"));
    const Mat xs{.data = xd, .rows = n_rows, .cols = n_embd};
    const Mat dm{.data = xd + size_t(n_rows) * size_t(n_embd), .rows = n_rows, .cols = n_embd};
    const Mat g{.data = gu, .rows = n_rows, .cols = n_ff};
    const Mat u{.data = gu + size_t(n_rows) * size_t(n_ff), .rows = n_rows, .cols = n_ff};
    auto rows_of = [](const Mat& m, int64_t r0, int64_t n) {
      return Mat{.data = m.data + size_t(r0) * size_t(m.row_stride()), .rows = n, .cols = m.cols};
    };
    get_rows({.out = xs, .x = a.x, .rows = row_tok});
    forget_quant();
    // gate / up: the grouped launch, then the GEMMs of the large experts.
    if (n_items > 0) {
      moe_items_gate_up(a, tb, xs, g, u, items, n_items, nullptr);
      // The large experts' gate / up on the tensor cores, on their runs of rows.
      for (const int32_t e : large) {
        const int64_t r0 = start[size_t(e)], m = start[size_t(e) + 1] - r0;
        matmul({.out = rows_of(g, r0, m), .x = rows_of(xs, r0, m), .w = a.gate[e]});
        matmul({.out = rows_of(u, r0, m), .x = rows_of(xs, r0, m), .w = a.up[e]});
      }
      forget_quant();
      const MoeInput hin = moe_act_input(g, u, a.act, tb, true);
      moe_items_launch(a, tb.down, tb.down_type, hin, dm, nullptr, nullptr, n_ff, n_embd, items, n_items, nullptr);
    } else {
      for (const int32_t e : large) {
        const int64_t r0 = start[size_t(e)], m = start[size_t(e) + 1] - r0;
        matmul({.out = rows_of(g, r0, m), .x = rows_of(xs, r0, m), .w = a.gate[e]});
        matmul({.out = rows_of(u, r0, m), .x = rows_of(xs, r0, m), .w = a.up[e]});
      }
      gated_act({.out = g, .gate = g, .up = u, .act = a.act});
    }
    forget_quant();
    for (const int32_t e : large) {
      const int64_t r0 = start[size_t(e)], m = start[size_t(e) + 1] - r0;
      matmul({.out = rows_of(dm, r0, m), .x = rows_of(g, r0, m), .w = a.down[e]});
    }
    forget_quant();
    const int nu = a.n_used;
    const float* dd = dm.data;
    enqueue("moe (combine)",
            [=](cudaStream_t s) { return cuda::launch_moe_combine(out, dd, ids, wts, nu, s, pair_row); });
  }

  // Steps of 9..64 tokens (graph steps, e.g. a server's batched decode): moe_grouped_items'
  // launches with the grouping done on the device (cuda::launch_moe_group), so the step needs
  // no routing read back and runs as one graph. Every expert has at most 64 rows here, so all
  // take the grouped launches, as on the host path; each row gets the same bits.
  void moe_grouped_device(const MoeArgs& a) {
    const auto& tb = moe_tables(a);
    const int64_t n_tok = a.x.rows, n_embd = a.x.cols, n_ff = tb.n_ff;
    const int64_t nk = n_tok * int64_t(a.n_used);
    const int32_t ne = a.n_expert;
    forget_quant();
    auto* route = static_cast<uint8_t*>(scratch(moe_route_, size_t(nk) * 8, "moe"));
    auto* ids = reinterpret_cast<int32_t*>(route);
    auto* wts = reinterpret_cast<float*>(route + size_t(nk) * 4);
    const int64_t max_items = cuda::moe_group_max_items(nk, ne);
    auto* dtab = static_cast<int32_t*>(scratch(moe_items_, sizeof(int32_t) * size_t(2 * nk + 3 * max_items + 1), "moe"));
    int32_t* row_tok = dtab;
    int32_t* pair_row = dtab + nk;
    int32_t* items = dtab + 2 * nk;
    int32_t* n_items = items + 3 * max_items;
    auto* xd = static_cast<float*>(scratch(moe_down_, sizeof(float) * size_t(nk) * size_t(2 * n_embd), "moe"));
    auto* gu = static_cast<float*>(scratch(moe_gu_, sizeof(float) * size_t(nk) * size_t(2 * n_ff), "moe"));
    const Mat xs{.data = xd, .rows = nk, .cols = n_embd};
    const Mat dm{.data = xd + size_t(nk) * size_t(n_embd), .rows = nk, .cols = n_embd};
    const Mat g{.data = gu, .rows = nk, .cols = n_ff};
    const Mat u{.data = gu + size_t(nk) * size_t(n_ff), .rows = nk, .cols = n_ff};
    Key& k = key_;
    k.add(uint64_t(13));
    k.add(a.out);
    k.add(a.x);
    k.add(a.logits);
    k.add(tb.gate);
    k.add(route);
    k.add(dtab);
    k.add(xd);
    k.add(gu);
    k.add(uint64_t(a.n_used) << 32 | uint64_t(a.n_expert) << 1 | uint64_t(a.norm_topk));
    k.add(uint64_t(a.act));
    enqueue_moe_route(a, ids, wts);
    const int nu = a.n_used;
    enqueue("moe (grouping)", [=](cudaStream_t s) {
      return cuda::launch_moe_group(ids, nk, nu, ne, row_tok, pair_row, items, n_items, s);
    });
    const Mat x = a.x;
    enqueue("moe (gather)", [=](cudaStream_t s) {
      return cuda::launch_get_rows(GetRowsArgs{.out = xs, .x = x, .rows = row_tok}, s);
    });
    moe_items_gate_up(a, tb, xs, g, u, items, max_items, n_items);
    const MoeInput hin = moe_act_input(g, u, a.act, tb, true);
    moe_items_launch(a, tb.down, tb.down_type, hin, dm, nullptr, nullptr, n_ff, n_embd, items, max_items, n_items);
    const Mat out = a.out;
    const float* dd = dm.data;
    enqueue("moe (combine)",
            [=](cudaStream_t s) { return cuda::launch_moe_combine(out, dd, ids, wts, nu, s, pair_row); });
    forget_quant();
  }

  void moe_grouped(const MoeArgs& a) {
    const int64_t n_tok = a.x.rows, n_embd = a.x.cols, n_ff = a.gate[0].n_out;
    const int64_t nk = n_tok * int64_t(a.n_used);
    forget_quant();
    auto* route = static_cast<uint8_t*>(scratch(moe_route_, size_t(nk) * 16, "moe"));
    auto* ids = reinterpret_cast<int32_t*>(route);
    auto* wts = reinterpret_cast<float*>(route + size_t(nk) * 4);
    auto* sorted_tok = reinterpret_cast<int32_t*>(route + size_t(nk) * 8);   // pairs grouped by expert: token
    auto* sorted_pair = reinterpret_cast<int32_t*>(route + size_t(nk) * 12); // and pair index
    enqueue_moe_route(a, ids, wts);
    const int32_t ne = a.n_expert;
    std::vector<int32_t> host_ids(static_cast<size_t>(nk));
    copy(host_ids.data(), ids, sizeof(int32_t) * host_ids.size());
    // A pair without an expert (routing of NaN logits) adds nothing, as on the per-pair path.
    std::vector<int64_t> start(size_t(ne) + 1, 0);
    for (const int32_t e : host_ids)
      if (e >= 0 && e < ne) ++start[size_t(e) + 1];
    for (int32_t e = 0; e < ne; ++e) start[size_t(e) + 1] += start[size_t(e)];
    std::vector<int32_t> order(size_t(nk) * 2);  // [tokens | pairs], grouped by expert, pairs in order
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    for (int64_t i = 0; i < nk; ++i) {
      const int32_t e = host_ids[size_t(i)];
      if (e < 0 || e >= ne) continue;
      const int64_t at = fill[size_t(e)]++;
      order[size_t(at)] = int32_t(i / a.n_used);
      order[size_t(nk + at)] = int32_t(i);
    }
    copy(sorted_tok, order.data(), sizeof(int32_t) * order.size());
    auto* xs = static_cast<float*>(scratch(moe_down_, sizeof(float) * size_t(n_tok) * size_t(2 * n_embd), "moe"));
    auto* gu = static_cast<float*>(scratch(moe_gu_, sizeof(float) * size_t(n_tok) * size_t(2 * n_ff), "moe"));
    const Mat out = a.out;
    enqueue("moe (zero)", [out](cudaStream_t s) {
      return cudaMemset2DAsync(out.data, sizeof(float) * size_t(out.row_stride()), 0, sizeof(float) * size_t(out.cols),
                               size_t(out.rows), s);
    });
    for (int32_t e = 0; e < ne; ++e) {
      const int64_t m = start[size_t(e) + 1] - start[size_t(e)];
      if (m == 0) continue;
      const Mat xm{.data = xs, .rows = m, .cols = n_embd};
      const Mat dm{.data = xs + size_t(n_tok) * size_t(n_embd), .rows = m, .cols = n_embd};
      const Mat gm{.data = gu, .rows = m, .cols = n_ff};
      const Mat um{.data = gu + size_t(n_tok) * size_t(n_ff), .rows = m, .cols = n_ff};
      get_rows({.out = xm, .x = a.x, .rows = sorted_tok + start[size_t(e)]});
      matmul({.out = gm, .x = xm, .w = a.gate[e]});
      matmul({.out = um, .x = xm, .w = a.up[e]});
      gated_act({.out = gm, .gate = gm, .up = um, .act = a.act});
      matmul({.out = dm, .x = gm, .w = a.down[e]});
      const int32_t* tok = sorted_tok + start[size_t(e)];
      const int32_t* pair = sorted_pair + start[size_t(e)];
      const float* dd = dm.data;
      enqueue("moe (scatter-add)",
              [=](cudaStream_t s) { return cuda::launch_moe_scatter_add(out, dd, m, tok, pair, wts, s); });
      forget_quant();
    }
  }

  // The device copies of one MoE layer's expert weights and a device array of their
  // addresses per matrix, made at the layer's first forward (keyed by its host Weight array).
  struct MoeTables {
    const void* const* gate = nullptr;  // device [n_expert]
    const void* const* up = nullptr;
    const void* const* down = nullptr;
    QuantType gate_type{}, up_type{}, down_type{};                 // device formats
    QuantType gate_host_type{}, up_host_type{}, down_host_type{};  // stored formats (vec_dot_type)
    int64_t n_ff = 0;
  };
  const MoeTables& moe_tables(const MoeArgs& a) {
    auto it = moe_tables_.find(a.gate);
    if (it != moe_tables_.end()) return it->second;
    const int64_t n_embd = a.x.cols, n_ff = a.gate[0].n_out;
    MoeTables t;
    t.n_ff = n_ff;
    auto table = [&](const Weight* ws, int64_t n_in, int64_t n_out, QuantType& dev_type, QuantType& host_type,
                     const char* what) {
      std::vector<const void*> ptrs(size_t(a.n_expert));
      for (int32_t e = 0; e < a.n_expert; ++e) {
        BRISK_CHECK(ws[e].n_in == n_in && ws[e].n_out == n_out && ws[e].type == ws[0].type, "moe: expert ", e, " ",
                    what, " weight is not [", n_out, ", ", n_in, "] ", quant_type_info(ws[0].type).name);
        const Weight d = device_weight(ws[e], "moe");
        if (e == 0) dev_type = d.type;
        BRISK_CHECK(d.type == dev_type, "moe: expert ", e, " ", what, " weight changed format on upload");
        ptrs[size_t(e)] = d.data;
      }
      host_type = ws[0].type;
      const size_t bytes = sizeof(void*) * ptrs.size();
      void* dev = raw_alloc(bytes, "moe");
      upload(dev, ptrs.data(), bytes, "moe");
      return static_cast<const void* const*>(dev);
    };
    t.gate = table(a.gate, n_embd, n_ff, t.gate_type, t.gate_host_type, "gate");
    t.up = table(a.up, n_embd, n_ff, t.up_type, t.up_host_type, "up");
    t.down = table(a.down, n_ff, n_embd, t.down_type, t.down_host_type, "down");
    return moe_tables_.emplace(a.gate, t).first->second;
  }
  // A matmul input for weights stored as `host` and held as `dev` on the device: quantized
  // (dp4a formats), rounded through the stored format's vec_dot_type, or a dense float copy.
  struct MoeInput {
    cuda::QuantAct xq;
    const float* x = nullptr;
    int64_t x_stride = 0;
  };
  // The gated activation of the experts' gate / up rows g, u and the down projection's input:
  // one launch that also quantizes (fused, Q8_0 / Q8_K that fit) or the activation, then its
  // rounding / quantization.
  MoeInput moe_act_input(const Mat& g, const Mat& u, Activation act, const MoeTables& tb, bool fused) {
    const GatedActArgs ga{.out = g, .gate = g, .up = u, .act = act};
    const cuda::ActRound h_round = cuda::act_round_for(format_traits(tb.down_host_type).vec_dot_type);
    if (!(fused && cuda::weight_takes_quantized_act(tb.down_type) && quant_fits(h_round, g.cols))) {
      enqueue("moe (gated activation)", [ga](cudaStream_t s) { return cuda::launch_gated_act(ga, s); });
      return moe_input(g, tb.down_host_type, tb.down_type, moe_hq_, "moe");
    }
    MoeInput hin;
    hin.xq = quant_scratch(moe_hq_, size_t(g.rows) * size_t(g.cols), "moe");
    key_.add(hin.xq.q);
    const cuda::QuantAct q = hin.xq;
    enqueue("moe (gated activation + quantization)",
            [=](cudaStream_t s) { return cuda::launch_gated_act_quant(ga, h_round, q, s); });
    return hin;
  }
  // A grouped expert matmul over the runs `items` (n_items of them; with n_items_dev, at most
  // n_items, the count in device memory).
  void moe_items_launch(const MoeArgs& a, const void* const* w, QuantType type, const MoeInput& in, const Mat& o,
                        const void* const* w2, const Mat* o2, int64_t n_in, int64_t n_out, const int32_t* items,
                        int64_t n_items, const int32_t* n_items_dev) {
    const cuda::MoeMatmulArgs m = moe_matmul_args(w, type, n_in, n_out, a, nullptr, 0, true, in, o, w2, o2);
    enqueue("moe (grouped expert matmul)", [m, items, n_items, n_items_dev](cudaStream_t s) {
      return cuda::launch_moe_items(m, items, n_items, s, n_items_dev);
    });
  }
  // Gate and up of the gathered rows xs over the runs (one launch when they share the input).
  void moe_items_gate_up(const MoeArgs& a, const MoeTables& tb, const Mat& xs, const Mat& g, const Mat& u,
                         const int32_t* items, int64_t n_items, const int32_t* n_items_dev) {
    const int64_t n_embd = xs.cols, n_ff = g.cols;
    const MoeInput xin = moe_input(xs, tb.gate_host_type, tb.gate_type, moe_xq_, "moe");
    if (tb.up_type == tb.gate_type && tb.up_host_type == tb.gate_host_type) {
      moe_items_launch(a, tb.gate, tb.gate_type, xin, g, tb.up, &u, n_embd, n_ff, items, n_items, n_items_dev);
      return;
    }
    moe_items_launch(a, tb.gate, tb.gate_type, xin, g, nullptr, nullptr, n_embd, n_ff, items, n_items, n_items_dev);
    const MoeInput xup = moe_input(xs, tb.up_host_type, tb.up_type, moe_xq2_, "moe");
    moe_items_launch(a, tb.up, tb.up_type, xup, u, nullptr, nullptr, n_embd, n_ff, items, n_items, n_items_dev);
  }

  MoeInput moe_input(const Mat& x, QuantType host, QuantType dev, Scratch& buf, const char* op) {
    const cuda::ActRound round = cuda::act_round_for(format_traits(host).vec_dot_type);
    const size_t n = size_t(x.rows) * size_t(x.cols);
    MoeInput in;
    if (cuda::weight_takes_quantized_act(dev)) {
      BRISK_CHECK(round == cuda::ActRound::q8_0 || round == cuda::ActRound::q8_k, op, ": ",
                  quant_type_info(host).name, " weights need Q8 activations");
      in.xq = quant_scratch(buf, n, op);
      key_.add(in.xq.q);
      const cuda::QuantAct q = in.xq;
      enqueue("moe (activation quantization)",
              [round, q, x](cudaStream_t s) { return cuda::launch_quantize_activations(round, q, x, s); });
      return in;
    }
    auto* f = static_cast<float*>(scratch(buf, sizeof(float) * n, op));
    key_.add(f);
    const Mat dst{.data = f, .rows = x.rows, .cols = x.cols};
    if (round != cuda::ActRound::none)
      enqueue("moe (activation rounding)",
              [round, f, x](cudaStream_t s) { return cuda::launch_round_activations(round, f, x, s); });
    else
      enqueue("moe (activation copy)", [dst, x](cudaStream_t s) {
        return cudaMemcpy2DAsync(dst.data, sizeof(float) * size_t(dst.cols), x.data, sizeof(float) * size_t(x.row_stride()),
                                 sizeof(float) * size_t(dst.cols), size_t(dst.rows), cudaMemcpyDeviceToDevice, s);
      });
    in.x = f;
    in.x_stride = x.cols;
    return in;
  }
  // w2 / out2: a second matrix of the same format and shape on the same input, same launch.
  void moe_matmul(const void* const* w, QuantType type, int64_t n_in, int64_t n_out, const MoeArgs& a,
                  const int32_t* ids, int64_t n_pairs, bool x_per_pair, const MoeInput& in, const Mat& out,
                  const void* const* w2 = nullptr, const Mat* out2 = nullptr) {
    const cuda::MoeMatmulArgs m = moe_matmul_args(w, type, n_in, n_out, a, ids, n_pairs, x_per_pair, in, out, w2, out2);
    enqueue(w2 ? "moe (expert matmuls x2)" : "moe (expert matmul)",
            [m](cudaStream_t s) { return cuda::launch_moe_matmul(m, s); });
  }
  cuda::MoeMatmulArgs moe_matmul_args(const void* const* w, QuantType type, int64_t n_in, int64_t n_out,
                                      const MoeArgs& a, const int32_t* ids, int64_t n_pairs, bool x_per_pair,
                                      const MoeInput& in, const Mat& out, const void* const* w2 = nullptr,
                                      const Mat* out2 = nullptr) {
    const int lanes = flags().no_cuda_moe_lanes ? (type == QuantType::Q4_0 ? 16 : 32) : 0;
    return cuda::MoeMatmulArgs{.w = w, .type = type, .n_in = n_in, .n_out = n_out, .n_expert = a.n_expert,
                               .ids = ids, .n_pairs = n_pairs, .n_used = a.n_used, .x_per_pair = x_per_pair,
                               .xq = in.xq, .x = in.x, .x_stride = in.x_stride, .out = out.data, .w2 = w2,
                               .out2 = out2 ? out2->data : nullptr, .row_lanes = lanes};
  }
  // Whether rows of `cols` quantize through `kind` in whole blocks (Q8_0 / Q8_K only).
  static bool quant_fits(cuda::ActRound kind, int64_t cols) {
    return (kind == cuda::ActRound::q8_0 && cols % 32 == 0) || (kind == cuda::ActRound::q8_k && cols % 256 == 0);
  }
  // The latest quantized matmul input, valid while nothing may have written x since (any op
  // but a matmul not writing x, copies, allocations end it): a following matmul on the same
  // x reuses it (q / k / v, gate / up).
  struct QuantState {
    Mat x;
    cuda::ActRound kind = cuda::ActRound::none;
    cuda::QuantAct q;
    bool valid = false;
  };
  // The same for activations rounded to floats (F16 / BF16 / other formats' weights in BF16).
  struct RoundState {
    Mat x;
    cuda::ActRound kind = cuda::ActRound::none;
    Mat xr;
    bool valid = false;
  };
  // The launch queued last when it is an RMS norm over whole rows (1), a gated activation (2)
  // or a residual add + whole-row RMS norm (3): a matmul on its output replaces it by the fused
  // op + quantization launch. A residual add (4) queued last is fused with a following
  // whole-row RMS norm of its output (giving 3).
  // A rope queued last (5), or the ropes of q and k in one launch (6), is fused with a
  // following KV store of its k; the ropes of q and k + the store (7) with a following
  // one-token attention on them.
  struct Producer {
    int kind = 0;
    RmsNormArgs norm;
    GatedActArgs gated;
    AddArgs add;
    size_t index = 0;
    Mat out;
    RopeArgs rope;    // kinds 5, 6: the (k) rope, device positions
    RopeArgs rope_q;  // kinds 6, 7: the q rope
    const float* rope_inv = nullptr;
    RopeTable rope_table;
    KvStoreArgs store;  // kind 7: ropes of q and k + this KV store in one launch
    AttentionArgs attn;  // kind 8: one-token cluster attention (+ rope and KV store with attn_has_rope)
    cuda::AttentionRope attn_rope;
    bool attn_has_rope = false;
  };

  // Matmuls on the tensor cores (queued like the kernels, so graphs capture them): more than
  // kGemvMaxTokens rows for every weight format but F32 (kept exact on the GEMV; F32 weights are
  // test fixtures); and BF16 weights from kDenseGemmMinTokens rows (several sequences decoded
  // together): the float GEMV would do every token's FMAs on the CUDA cores, while the GEMM
  // reads the weights once and needs no conversion of them.
  bool use_gemm(const MatmulArgs& a) const {
    if (blas_ == nullptr || a.x.rows > 65535 || a.w.type == QuantType::F32) return false;
    if (a.x.rows > kGemvMaxTokens) return true;
    return a.w.type == QuantType::BF16 && a.x.rows >= kDenseGemmMinTokens;
  }

  // out = x . W^T (+ bias): x rounded to BF16 once, W (device layout `d.w`) used as is when
  // BF16, else dequantized to BF16 in chunks of rows into the reused scratch.
  void gemm(const MatmulArgs& a, const MatmulArgs& d) {
    const int64_t m = a.x.rows, k = d.w.n_in, n = d.w.n_out;
    auto* xb = static_cast<uint16_t*>(scratch(gemm_x_, sizeof(uint16_t) * size_t(m) * size_t(k), "matmul"));
    const bool direct = d.w.type == QuantType::BF16;
    const int64_t chunk = direct ? n : std::min<int64_t>(n, std::max<int64_t>(1, std::min<int64_t>(65535, kGemmScratchElems / k)));
    uint16_t* wb = direct ? nullptr
                          : static_cast<uint16_t*>(scratch(gemm_w_, sizeof(uint16_t) * size_t(chunk) * size_t(k), "matmul"));
    const Mat x = d.x;
    // Consecutive matmuls of one input (q / k / v, gate / up) convert it once.
    if (!(bstate_valid_ && same_mat(bstate_x_, a.x) && bstate_buf_ == xb)) {
      enqueue("matmul (BF16 activations)", [x, xb](cudaStream_t s) { return cuda::launch_act_to_bf16(x, xb, s); });
      bstate_x_ = a.x;
      bstate_buf_ = xb;
      bstate_valid_ = true;
    }
    for (int64_t r0 = 0; r0 < n; r0 += chunk) {
      const int64_t r1 = std::min(n, r0 + chunk);
      const uint16_t* w = static_cast<const uint16_t*>(d.w.data) + (direct ? size_t(r0) * size_t(k) : 0);
      if (!direct) {
        const Weight dw = d.w;
        enqueue("matmul (BF16 weights)", [dw, r0, r1, wb](cudaStream_t s) {
          return cuda::launch_weight_to_bf16(dw, r0, r1, wb, s);
        });
        w = wb;
      }
      float* out = d.out.data + r0;
      const int64_t ldo = d.out.row_stride();
      cuda::Blas* blas = blas_;
      key_.add(uint64_t(7));
      key_.add(out);
      key_.add(w);
      key_.add(xb);
      key_.add(uint64_t(m));
      key_.add(uint64_t(r1 - r0));
      // Queued like the kernels (a step's graph captures it); throws on a cuBLAS error.
      enqueue("matmul (GEMM)", [blas, xb, w, out, m, rows = r1 - r0, k, ldo](cudaStream_t) {
        cuda::blas_gemm_bf16(blas, xb, w, out, m, rows, k, ldo, "matmul");
        return cudaGetLastError();
      });
    }
    if (d.bias) {
      const Mat out = d.out;
      const float* bias = d.bias;
      enqueue("matmul (bias)", [out, bias](cudaStream_t s) { return cuda::launch_add_bias(out, bias, s); });
    }
    producer_.kind = 0;
    if (overlaps(a.out, qstate_.x)) qstate_.valid = false;
    if (overlaps(a.out, fstate_.x)) fstate_.valid = false;
  }

  // Prefill attention on the tensor cores: more than kGraphMaxTokens tokens launch by launch, one
  // sequence at consecutive positions inside the cache (host arrays), a shape the kernel takes.
  bool use_flash_prefill(const AttentionArgs& a) {
    if (flags().no_cuda_flash_prefill || a.q.rows <= kGemvMaxTokens || (in_step_ && !step_eager_) ||
        !cuda::prefill_attention_supported(a) || a.seq == nullptr || a.pos == nullptr)
      return false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (is_device(a.seq) || is_device(a.pos)) return false;
    }
    const int32_t s0 = a.seq[0], p0 = a.pos[0];
    const int64_t n = a.q.rows;
    if (s0 < 0 || s0 >= a.k_cache.n_seq || s0 >= a.v_cache.n_seq || p0 < 0 || p0 + n > a.k_cache.capacity ||
        p0 + n > a.v_cache.capacity)
      return false;
    for (int64_t i = 0; i < n; ++i)
      if (a.seq[i] != s0 || a.pos[i] != p0 + i) return false;
    return true;
  }

  // Runs the launch now, or queues it when a step is being collected for a graph.
  void enqueue(const char* op, cuda::Launch fn) {
    if (in_step_ && !step_eager_) {
      launches_.push_back(std::move(fn));
      names_.push_back(op);
      return;
    }
    key_.w.clear();
    cuda_check(fn(stream_), op, "kernel launch");
  }

  // Runs the queued launches of the step now (the rest of the step runs launch by launch).
  void flush(const char* op) {
    if (!in_step_ || step_eager_) return;
    step_eager_ = true;
    for (size_t i = 0; i < launches_.size(); ++i) cuda_check(launches_[i](stream_), op, names_[i]);
    launches_.clear();
    names_.clear();
    producer_.kind = 0;
  }

  static bool same_kv(const KvView& a, const KvView& b) {
    return a.type == b.type && a.data == b.data && a.width == b.width && a.row_bytes == b.row_bytes &&
           a.capacity == b.capacity && a.n_seq == b.n_seq && a.block_size == b.block_size && a.n_blocks == b.n_blocks &&
           a.device_table == b.device_table && a.table_stride == b.table_stride;
  }
  static bool same_mat(const Mat& a, const Mat& b) {
    return a.data == b.data && a.rows == b.rows && a.cols == b.cols && a.row_stride() == b.row_stride();
  }
  // In a graph step, when the launch queued last is an RMS norm over whole rows, a residual add
  // + norm or a gated activation producing x: replaces it by the same op that also writes x's
  // quantized (q8_0 / q8_k) or rounded (f16 / bf16: into xq.d) activations. False otherwise.
  bool fuse_into_producer(const Mat& x, cuda::ActRound round, const cuda::QuantAct& xq) {
    const bool fuse = in_step_ && !step_eager_ &&
                      ((producer_.kind >= 1 && producer_.kind <= 3) ||
                       (producer_.kind == 8 && cuda::attention_quant_supported(producer_.attn, round))) &&
                      producer_.index + 1 == launches_.size() && same_mat(producer_.out, x);
    if (!fuse) return false;
    if (producer_.kind == 1) {
      const RmsNormArgs pn = producer_.norm;
      unsigned* bar = norm_barrier();
      const bool wc = constant_floats(pn.weight);
      launches_[producer_.index] = [pn, round, xq, bar, wc](cudaStream_t s) {
        return cuda::launch_rms_norm_quant(pn, round, xq, s, bar, wc);
      };
      key_.add(uint64_t(101));
    } else if (producer_.kind == 3) {
      const RmsNormArgs pn = producer_.norm;
      const AddArgs pa = producer_.add;
      unsigned* bar = norm_barrier();
      const bool wc = constant_floats(pn.weight);
      launches_[producer_.index] = [pa, pn, round, xq, bar, wc](cudaStream_t s) {
        return cuda::launch_add_rms_norm(&pa, pn, round, &xq, s, bar, wc);
      };
      key_.add(uint64_t(106));
    } else if (producer_.kind == 8) {
      const AttentionArgs pd = producer_.attn;
      const cuda::AttentionRope rp = producer_.attn_rope;
      const bool has_rope = producer_.attn_has_rope;
      const cuda::AttentionQuant aq{.kind = round, .q = xq};
      launches_[producer_.index] = [pd, rp, has_rope, aq](cudaStream_t s) {
        return cuda::launch_attention_rope(pd, has_rope ? &rp : nullptr, nullptr, nullptr, s, &aq);
      };
      names_[producer_.index] = has_rope ? "attention (+ rope, KV store, activation rounding)"
                                         : "attention (+ activation rounding)";
      key_.add(uint64_t(111));
    } else {
      const GatedActArgs pg = producer_.gated;
      launches_[producer_.index] = [pg, round, xq](cudaStream_t s) {
        return cuda::launch_gated_act_quant(pg, round, xq, s);
      };
      key_.add(uint64_t(102));
    }
    key_.add(uint64_t(round));
    return true;
  }

  // Queues a decode matmul; in a graph step, one on the same input as the matmul launch queued
  // last (q / k / v, gate / up) joins that launch instead (cuda::launch_matmuls: same results).
  void enqueue_gemv(const MatmulArgs& d, const cuda::QuantAct* xq, bool wc) {
    GemvGroup& g = gemv_;
    const bool deferred = in_step_ && !step_eager_;
    if (deferred && g.valid && g.index + 1 == launches_.size() && g.n < cuda::kMaxMatmulParts && g.wc == wc &&
        g.has_xq == (xq != nullptr) && (!xq || (g.xq.q == xq->q && g.xq.d == xq->d)) &&
        cuda::matmuls_share_launch(g.a[0], d) && !flags().no_cuda_gemv_merge) {
      bool clash = overlaps(d.out, d.x);
      for (int i = 0; i < g.n; ++i) clash = clash || overlaps(g.a[i].out, d.out);
      if (!clash) {
        g.a[g.n++] = d;
        const GemvGroup gc = g;
        launches_[g.index] = [gc](cudaStream_t s) {
          return cuda::launch_matmuls(gc.a, gc.n, gc.has_xq ? &gc.xq : nullptr, s, gc.wc);
        };
        key_.add(uint64_t(107));
        return;
      }
    }
    const cuda::QuantAct q = xq ? *xq : cuda::QuantAct{};
    const bool has_xq = xq != nullptr;
    enqueue("matmul", [d, q, has_xq, wc](cudaStream_t s) { return cuda::launch_matmul(d, has_xq ? &q : nullptr, s, wc); });
    g = GemvGroup{};
    g.a[0] = d;
    g.n = 1;
    g.xq = q;
    g.has_xq = has_xq;
    g.wc = wc;
    g.index = launches_.size() - 1;
    g.valid = deferred;
  }

  static bool overlaps(const Mat& a, const Mat& b) {
    if (!a.data || !b.data || a.rows == 0 || b.rows == 0) return false;
    const float* a_end = a.data + (a.rows - 1) * a.row_stride() + a.cols;
    const float* b_end = b.data + (b.rows - 1) * b.row_stride() + b.cols;
    return a.data < b_end && b.data < a_end;
  }
  void forget_quant() {
    gemv_.valid = false;
    qstate_.valid = false;
    fstate_.valid = false;
    bstate_valid_ = false;
    producer_.kind = 0;
  }

  unsigned* norm_barrier() { return static_cast<unsigned*>(scratch(norm_bar_, 2 * sizeof(unsigned), "rms_norm")); }

  // BRISK_CUDA_KERNEL_TIMES: the step's launches (as a graph would hold them) run one by one
  // between CUDA events; the time of launch i is summed per step length (number of launches)
  // and printed when the backend is destroyed.
  void time_launches() {
    const size_t n = launches_.size();
    while (time_events_.size() < n + 1) {
      cudaEvent_t e = nullptr;
      cuda_check(cudaEventCreate(&e), "end_step", "cudaEventCreate");
      time_events_.push_back(e);
    }
    cuda_check(cudaEventRecord(time_events_[0], stream_), "end_step", "cudaEventRecord");
    for (size_t i = 0; i < n; ++i) {
      cuda_check(launches_[i](stream_), "end_step", names_[i]);
      cuda_check(cudaEventRecord(time_events_[i + 1], stream_), "end_step", "cudaEventRecord");
    }
    launches_.clear();
    cuda_check(cudaStreamSynchronize(stream_), "end_step", "cudaStreamSynchronize");
    KernelTimes& kt = kernel_times_[n];
    kt.names.resize(n);
    kt.ms.resize(n, 0.0);
    ++kt.steps;
    for (size_t i = 0; i < n; ++i) {
      float ms = 0.0f;
      cuda_check(cudaEventElapsedTime(&ms, time_events_[i], time_events_[i + 1]), "end_step", "cudaEventElapsedTime");
      kt.names[i] = names_[i];
      kt.ms[i] += ms;
    }
    names_.clear();
  }

  void print_kernel_times() const {
    for (const auto& [n, kt] : kernel_times_) {
      std::fprintf(stderr, "cuda kernel times: steps of %zu launches, mean of %d steps (us)\n", n, kt.steps);
      double total = 0.0;
      for (size_t i = 0; i < n; ++i) {
        const double us = 1000.0 * kt.ms[i] / kt.steps;
        total += us;
        std::fprintf(stderr, "%4zu %-40s %9.2f\n", i, kt.names[i], us);
      }
      std::fprintf(stderr, "     total %9.2f\n", total);
    }
  }

  // Whether device floats `p` are a copy of a host constant (no kernel writes them).
  bool constant_floats(const float* p) {
    std::lock_guard<std::mutex> lock(mutex_);
    return p && const_copies_.count(p) != 0;
  }

  // A device buffer that only grows; an outgrown one is freed once the launches queued with
  // it have run (end of step).
  void* scratch(Scratch& s, size_t bytes, const char* op) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (bytes <= s.bytes) return s.p;
    if (s.p) release(s.p, op);
    s.bytes = std::max(bytes, s.bytes * 3 / 2);
    s.p = raw_alloc(s.bytes, op);
    return s.p;
  }

  // Room in `s` for n activations quantized to int8 and their scales (one per block of 32 at
  // most), as launch_quantize_activations writes them.
  cuda::QuantAct quant_scratch(Scratch& s, size_t n, const char* op) {
    const size_t q_bytes = (n + 255) / 256 * 256;
    auto* p = static_cast<uint8_t*>(scratch(s, q_bytes + sizeof(float) * (n / 32 + 1), op));
    return cuda::QuantAct{.q = reinterpret_cast<int8_t*>(p), .d = reinterpret_cast<float*>(p + q_bytes)};
  }

  // Frees device memory of this backend now, or at the end of the step when launches are queued.
  void release(void* p, const char* op) {
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

  void free_retired() {
    if (retired_.empty()) return;
    cuda_check(cudaStreamSynchronize(stream_), "end_step", "cudaStreamSynchronize");
    for (void* p : retired_) cuda_check(cudaFree(p), "end_step", "cudaFree");
    retired_.clear();
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
    BRISK_CHECK(v.type == QuantType::F16 || v.type == QuantType::BF16 || v.type == QuantType::F32 ||
                    v.type == QuantType::Q8_0,
                op, ": KV cache type ", quant_type_info(v.type).name,
                " is not supported on CUDA (use f16, bf16, f32 or q8_0)");
    BRISK_CHECK(v.data && is_device(v.data), op, ": KV cache is not device memory of this backend");
    BRISK_CHECK(v.row_bytes == size_t(quant_row_bytes(v.type, uint64_t(v.width)).value_or(0)), op,
                ": KV cache row_bytes ", v.row_bytes, " does not match width ", v.width);
    BRISK_CHECK(v.block_size >= 16 && (v.block_size & (v.block_size - 1)) == 0 && v.n_blocks > 0 &&
                    v.table_stride * int64_t(v.block_size) >= v.capacity,
                op, ": KV cache block size ", v.block_size, " or block table does not fit its capacity");
    BRISK_CHECK(is_device(static_cast<const uint8_t*>(v.data) + size_t(v.n_blocks) * size_t(v.block_size) * v.row_bytes - 1),
                op, ": KV cache pool of ", v.n_blocks, " blocks extends past its allocation");
    BRISK_CHECK(v.device_table && is_device(v.device_table) &&
                    is_device(v.device_table + v.n_seq * v.table_stride - 1),
                op, ": KV block table is not device memory of this backend");
  }

  // The kernels address K and V rows through one table (the same slots).
  static void check_kv_pair(const KvView& k, const KvView& v, const char* op) {
    BRISK_CHECK(k.type == v.type && k.width == v.width && k.capacity == v.capacity && k.block_size == v.block_size &&
                    k.device_table == v.device_table && k.table_stride == v.table_stride && k.n_seq == v.n_seq,
                op, ": K and V caches differ in type, shape or block table");
  }

  // Whether no kernel writes the device copy of weight `w` (as given to an op) while steps run:
  // weights uploaded from the host or repacked into a copy here (both complete before use), and
  // device memory declared constant (cuda_mark_constant).
  bool weight_constant(const Weight& w) const {
    if (!is_device(w.data) || cuda::weight_repacked(w.type)) return true;
    const auto u = reinterpret_cast<uintptr_t>(w.data);
    const size_t n = w.row_bytes * size_t(w.n_out);
    auto it = constant_.upper_bound(u);
    if (it == constant_.begin()) return false;
    --it;
    return u + n <= it->first + it->second;
  }

 public:
  void mark_constant(const void* p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    constant_[reinterpret_cast<uintptr_t>(p)] = bytes;
  }

 private:
  // Device view of a weight in the device layout: used as is when already in device memory in
  // a layout that is the stored one, else uploaded / repacked once and cached by address.
  Weight device_weight(const Weight& w, const char* op) {
    BRISK_CHECK(w.data != nullptr && w.n_in > 0 && w.n_out > 0, op, ": empty weight");
    const auto rb = quant_row_bytes(w.type, uint64_t(w.n_in));
    BRISK_CHECK(rb && *rb == w.row_bytes, op, ": weight row of ", w.n_in, " ", quant_type_info(w.type).name,
                " elements has ", w.row_bytes, " bytes");
    BRISK_CHECK(w.n_in % 8 == 0, op, ": weight rows of ", w.n_in, " elements (need a multiple of 8 on CUDA)");
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
    std::vector<uint8_t> unrepacked;
    const void* src = w.data;
    if (quant::is_repacked(w.type) && !on_device) {  // a CPU layout (quant/repack.h): back to the stored one
      const QuantType stored = quant::stored_type(w.type);
      unrepacked.resize(w.row_bytes * size_t(w.n_out));
      for (int64_t r = 0; r < w.n_out; ++r)
        quant::unrepack_row(w.type, w.row(r), unrepacked.data() + size_t(r) * w.row_bytes,
                            w.n_in / int64_t(quant_type_info(stored).block_size));
      d.type = stored;
      src = unrepacked.data();
    }
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
  void upload(void* dst, const void* src, size_t bytes, const char* op) {
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), op, "upload");
    cuda_check(cudaStreamSynchronize(stream_), op, "upload (cudaStreamSynchronize)");
  }

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
    upload(dev, p, bytes, op);
    weights_[p] = Uploaded{.dev = dev, .bytes = bytes, .w = {}, .host_type = QuantType::F32};
    const_copies_.insert(dev);
    return static_cast<const float*>(dev);
  }

  // Device copy of a per-batch int array: the step's fixed buffer when it is one of the
  // step's arrays, else a buffer per host address copied only when its contents changed.
  const int32_t* stage(const int32_t* p, int64_t n, const char* op) {
    BRISK_CHECK(p != nullptr || n == 0, op, ": missing array");
    if (n == 0) return p;
    for (const StepArray& s : step_map_) {
      if (s.host != p) continue;
      BRISK_CHECK(n <= s.n, op, ": ", n, " entries asked of a step array of ", s.n);
      return s.dev;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (is_device(p)) return p;
    staged_other_ = true;
    Staged& s = staged_[p];
    if (s.cap >= n && int64_t(s.last.size()) == n &&
        std::memcmp(s.last.data(), p, sizeof(int32_t) * size_t(n)) == 0)
      return s.dev;
    // The buffer changes: queued launches that read it must run first.
    mutex_.unlock();
    flush(op);
    mutex_.lock();
    if (s.cap < n) {
      if (s.dev) release(s.dev, op);
      const int64_t cap = n < 64 ? 64 : n;
      s.dev = static_cast<int32_t*>(raw_alloc(sizeof(int32_t) * size_t(cap), op));
      s.cap = cap;
    }
    s.last.assign(p, p + n);
    cuda_check(cudaMemcpyAsync(s.dev, s.last.data(), sizeof(int32_t) * size_t(n), cudaMemcpyHostToDevice, stream_),
               op, "cudaMemcpyAsync");
    // The source (s.last) may be reassigned by a later call before this copy runs.
    cuda_check(cudaStreamSynchronize(stream_), op, "cudaStreamSynchronize");
    return s.dev;
  }

  int device_;
  bool graphs_;
  cudaStream_t stream_ = nullptr;
  std::mutex mutex_;
  std::map<uintptr_t, size_t> allocs_;  // device base -> bytes
  std::unordered_map<const void*, Uploaded> weights_;
  std::unordered_map<const void*, Staged> staged_;
  std::set<int> warned_;
  Scratch act_;   // rounded / copied float activations of the matmul in flight
  Scratch qact_;  // quantized activations (qstate_)
  Scratch attn_;  // split partial results of attention
  Scratch norm_bar_;  // the RMS norm's block barrier (two zeroed unsigned ints)
  Scratch attn_cnt_;  // attention's per-(token, head group) split counters (zero between launches)
  Scratch gemm_x_;  // BF16 activations of the GEMM in flight
  Scratch gemm_w_;  // BF16 weight rows of the GEMM in flight
  Scratch argmax_;  // token ids of argmax_rows
  Scratch sample_;  // ids, specs, edits and working rows of sample_rows
  Scratch moe_route_;  // MoE: expert ids and weights of every (token, slot) pair
  Scratch moe_gu_;     // MoE: gate and up outputs of every pair
  Scratch moe_down_;   // MoE: down outputs of every pair
  Scratch moe_xq_, moe_xq2_, moe_hq_;  // MoE: quantized / rounded inputs of gate, up, down
  Scratch moe_items_;  // MoE prefill: row / pair maps and grouped-matmul items
  std::unordered_map<const Weight*, MoeTables> moe_tables_;
  // The GEMM input last converted into gemm_x_ (valid like qstate_).
  Mat bstate_x_;
  uint16_t* bstate_buf_ = nullptr;
  bool bstate_valid_ = false;
  cuda::Blas* blas_ = nullptr;  // cuBLAS handle on stream_ (nullptr: no GEMM)
  std::vector<void*> retired_;

  QuantState qstate_;
  RoundState fstate_;
  Producer producer_;

  // The step being collected.
  bool in_step_ = false;
  bool replay_ok_ = false;     // the last step ran as one graph that replay_step may launch again
  bool staged_other_ = false;  // an op of this step staged a host array that is not the step's
  int64_t replay_n_tok_ = -1, replay_n_out_ = -1;
  bool step_eager_ = true;
  Key key_;
  std::vector<cuda::Launch> launches_;
  std::vector<const char*> names_;
  struct KernelTimes {
    std::vector<const char*> names;
    std::vector<double> ms;
    int steps = 0;
  };
  std::map<size_t, KernelTimes> kernel_times_;  // BRISK_CUDA_KERNEL_TIMES, by launches per step
  std::vector<cudaEvent_t> time_events_;
  std::map<uintptr_t, size_t> constant_;
  std::set<const void*> const_copies_;  // device copies of host float constants (device_floats)
  struct GemvGroup {  // the matmul launch queued last in a graph step (enqueue_gemv)
    MatmulArgs a[cuda::kMaxMatmulParts];
    int n = 0;
    cuda::QuantAct xq{};
    bool has_xq = false;
    bool wc = false;
    size_t index = 0;
    bool valid = false;
  };
  GemvGroup gemv_;  // device ranges declared constant (start -> bytes)
  std::vector<StepArray> step_map_;
  int32_t* step_dev_ = nullptr;   // [4, step_cap_]: ids, pos, seq, output rows
  int32_t* step_host_ = nullptr;  // pinned staging of the same
  int64_t step_cap_ = 0;
  cudaEvent_t step_copied_ = nullptr;
  cuda::GraphCache graphs_cache_{kMaxGraphs};
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int device, bool graphs) {
  return std::make_unique<CudaBackend>(device, graphs);
}

uint64_t cuda_graph_replays(const Backend& be) {
  const auto* c = dynamic_cast<const CudaBackend*>(&be);
  return c ? c->graph_replays() : 0;
}

void cuda_mark_constant(Backend& be, const void* p, size_t bytes) {
  if (auto* c = dynamic_cast<CudaBackend*>(&be)) c->mark_constant(p, bytes);
}

bool cuda_has_gemm(const Backend& be) {
  const auto* c = dynamic_cast<const CudaBackend*>(&be);
  return c && c->has_gemm();
}

void cuda_gemm_bf16(Backend& be, const uint16_t* x, const uint16_t* w, float* out, int64_t m, int64_t n, int64_t k) {
  auto* c = dynamic_cast<CudaBackend*>(&be);
  BRISK_CHECK(c && c->has_gemm(), "cuda_gemm_bf16: not a CUDA backend with cuBLAS");
  c->gemm_bf16(x, w, out, m, n, k, n);
}

}  // namespace brisk
