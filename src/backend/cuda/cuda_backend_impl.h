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
//
// This header holds the class; its members live in one file per purpose:
//   cuda_backend.cpp  device memory: allocations, scratch buffers, copies, lifetime
//   cuda_step.cpp     steps: per-step inputs, the launch queue, graphs, replay, kernel times
//   cuda_ops.cpp      op entry points: norms, rope, KV store, attention, elementwise, sampling
//   cuda_matmul.cpp   matmuls: decode GEMVs and their fusions with producers, tensor-core GEMM
//   cuda_moe.cpp      mixture of experts: routing, per-pair and grouped expert matmuls
//   cuda_delta_net.cpp linear-attention ops: conv with its window, norms, the gated delta rule
//   cuda_encoder.cpp  encoder ops: LayerNorm, GELU, im2col, attention probabilities, dense attention
//   cuda_weights.cpp  weights and constants: uploaded once into the device layout, by address
//   cuda_tp.cpp       tensor parallelism: the all-reduce of the ranks' partial sums (NCCL)
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_blas.h"
#include "backend/cuda/cuda_graphs.h"
#include "core/error.h"
#include "core/flags.h"
#include "kernels/cuda/attention_prefill.h"
#include "kernels/cuda/gemm_prep.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/sample.h"
#include "quant/format.h"
#include "quant/types.h"

namespace brisk::cuda {

constexpr int32_t kGraphMaxTokens = 64;  // steps of at most this many tokens run as graphs
constexpr int32_t kGemvMaxTokens = 8;    // matmuls of more rows take the tensor-core GEMM
constexpr int32_t kDenseGemmMinTokens = 2;  // BF16 weights: matmuls of this many rows on the tensor cores
constexpr size_t kMaxGraphs = 16;
// Matmuls of more than kGemvMaxTokens rows (BF16 weights from kDenseGemmMinTokens rows with
// BRISK_NO_CUDA_GEMV_FEW) run
// on the tensor cores (cuBLAS BF16 GEMM); weights
// not stored as BF16 are dequantized per matmul into a reused BF16 scratch of at most this many
// elements (128 MiB), in chunks of rows when a matrix is larger.
constexpr int64_t kGemmScratchElems = int64_t(64) << 20;

inline void cuda_check(cudaError_t e, const char* op, const char* what) {
  if (e != cudaSuccess) {
    cudaGetLastError();
    fail("cuda backend: ", op, ": ", what, " failed: ", cudaGetErrorString(e));
  }
}

inline void check_mat(const Mat& m, int64_t rows, int64_t cols, const char* op, const char* what) {
  BRISK_CHECK(m.data != nullptr && m.rows == rows && m.cols == cols && m.row_stride() >= cols,
              op, ": ", what, " is [", m.rows, ", ", m.cols, "], expected [", rows, ", ", cols, "]");
}

// The launch key of a step: every op appends its kind and every argument a kernel sees.
struct LaunchKey {
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
  CudaBackend(int device, bool graphs);
  ~CudaBackend() override;

  std::string name() const override { return str_cat("cuda:", device_); }
  int n_threads() const override { return 1; }

  uint64_t graph_replays() const { return graphs_cache_.replays(); }
  size_t last_step_launches() const { return last_step_launches_; }
  bool has_gemm() const { return blas_ != nullptr; }

  // out [m, n] (row stride ldo) = x [m, k] . w [n, k]^T, BF16 operands in device memory.
  void gemm_bf16(const uint16_t* x, const uint16_t* w, float* out, int64_t m, int64_t n, int64_t k, int64_t ldo);
  bool argmax_rows(const Mat& x, int32_t* ids) override;
  bool sample_rows(const Mat& x, const DeviceSampleSpec* specs, const DeviceSampleEdit* edits, int32_t n_edits,
                   int32_t* ids) override;

  static size_t align_up(size_t bytes) { return (bytes + 255) / 256 * 256; }
  bool memory_info(size_t* free_bytes, size_t* total_bytes) const override;
  void* alloc(size_t bytes) override;
  void free(void* p) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void synchronize() override;

  // The calling thread's current device := this backend's (a server runs steps on its own
  // thread; launches and allocations go to the current device).
  void use_device() const { cuda_check(cudaSetDevice(device_), "use_device", "cudaSetDevice"); }
  void begin_step(const StepInputs& in) override;

  // The step's ids, positions, sequences and output rows into the fixed device buffers (one
  // copy through the pinned buffer); step_map_ maps the host arrays to them.
  void upload_step_inputs(const StepInputs& in, const char* op);
  bool replay_step(const StepInputs& in) override;
  void end_step() override;
  void matmul(const MatmulArgs& a) override;
  void matmuls(const MatmulArgs* list, int n) override;
  void rms_norm(const RmsNormArgs& a) override;
  void rope(const RopeArgs& a) override;
  void kv_store(const KvStoreArgs& a) override;
  void attention(const AttentionArgs& a) override;

  // A one-token attention launch whose output the next matmul may quantize inside it
  // (fuse_into_producer, cuda::AttentionQuant).
  void attention_producer(const AttentionArgs& d, const cuda::AttentionRope* rp, size_t index);
  void gated_act(const GatedActArgs& a) override;
  void add(const AddArgs& a) override;
  void softcap(const SoftcapArgs& a) override;
  void scale(const ScaleArgs& a) override;
  // Tensor parallelism (cuda_tp.cpp): ncclAllReduce on this backend's stream, one launch of the
  // step (captured into its graph like the kernels).
  void all_reduce(const AllReduceArgs& a) override;
  void moe(const MoeArgs& a) override;
  bool moe_expert_scale_supported() const override { return true; }
  bool moe_shared_supported(const MoeArgs& a) const override;
  void embedding(const EmbeddingArgs& a) override;
  void get_rows(const GetRowsArgs& a) override;
  // Linear-attention ops (cuda_delta_net.cpp).
  void conv_state(const ConvStateArgs& a) override;
  void l2_norm(const L2NormArgs& a) override;
  void gated_rms_norm(const GatedRmsNormArgs& a) override;
  void sigmoid_mul(const SigmoidMulArgs& a) override;
  void delta_rule(const DeltaRuleArgs& a) override;
  // Encoder ops (cuda_encoder.cpp).
  void layer_norm(const LayerNormArgs& a) override;
  void unary(const UnaryArgs& a) override;
  void im2col(const Im2colArgs& a) override;
  void attention_weights(const AttentionWeightsArgs& a) override;
  bool attention_dense(const AttentionDenseArgs& a) override;
  bool attention_dense_bias(const AttentionDenseArgs& a) const override;
  bool mean_rows(const MeanRowsArgs& a) override;

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
  void enqueue_moe_route(const MoeArgs& a, int32_t* ids, float* wts);
  // Device copy of a.expert_scale (nullptr without one).
  const float* expert_scale(const MoeArgs& a);

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
  // Prompts of more than kGraphMaxTokens tokens run those grouped matmuls on the tensor cores
  // instead (cuda::launch_moe_items_mma, runs of up to 32 rows; BRISK_NO_CUDA_MOE_MMA).
  static constexpr int64_t kMoeItemMaxRows = 64;
  void moe_grouped_items(const MoeArgs& a);
  void moe_grouped_device(const MoeArgs& a);
  void moe_grouped(const MoeArgs& a);

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
  const MoeTables& moe_tables(const MoeArgs& a);
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
  MoeInput moe_act_input(const Mat& g, const Mat& u, Activation act, const MoeTables& tb, bool fused);
  // A grouped expert matmul over the runs `items` (n_items of them; with n_items_dev, at most
  // n_items, the count in device memory).
  void moe_items_launch(const MoeArgs& a, const void* const* w, QuantType type, const MoeInput& in, const Mat& o,
                        const void* const* w2, const Mat* o2, int64_t n_in, int64_t n_out, const int32_t* items,
                        int64_t n_items, const int32_t* n_items_dev);
  // One launch of cuda::launch_moe_items_mma over float rows x into o (w2 / o2: a second matrix).
  void moe_items_mma(const MoeArgs& a, const void* const* w, QuantType type, const Mat& x, const Mat& o,
                     const void* const* w2, const Mat* o2, const int32_t* items, int64_t n_items);
  // Gate and up of the gathered rows xs over the runs (one launch when they share the input).
  void moe_items_gate_up(const MoeArgs& a, const MoeTables& tb, const Mat& xs, const Mat& g, const Mat& u,
                         const int32_t* items, int64_t n_items, const int32_t* n_items_dev);
  MoeInput moe_input(const Mat& x, QuantType host, QuantType dev, Scratch& buf, const char* op);
  // w2 / out2: a second matrix of the same format and shape on the same input, same launch.
  void moe_matmul(const void* const* w, QuantType type, int64_t n_in, int64_t n_out, const MoeArgs& a,
                  const int32_t* ids, int64_t n_pairs, bool x_per_pair, const MoeInput& in, const Mat& out,
                  const void* const* w2 = nullptr, const Mat* out2 = nullptr);
  cuda::MoeMatmulArgs moe_matmul_args(const void* const* w, QuantType type, int64_t n_in, int64_t n_out,
                                      const MoeArgs& a, const int32_t* ids, int64_t n_pairs, bool x_per_pair,
                                      const MoeInput& in, const Mat& out, const void* const* w2 = nullptr,
                                      const Mat* out2 = nullptr);
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
  // one-token attention on them. Kinds 8-11: below, at their fields.
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
    L2NormArgs l2;  // kind 10: an L2 norm (the next independent one joins its launch)
    // kind 11: a conv (+ in-place L2 norms of column ranges of its output, which a following
    // in-place L2 norm of another range joins)
    ConvStateArgs conv;
    cuda::ConvL2Ranges conv_l2;
    // kind 9: group norms (head groups, independent of one another) in one launch
    std::array<RmsNormArgs, cuda::kMaxNormParts> norms{};
    std::array<bool, cuda::kMaxNormParts> norms_wc{};
    int n_norms = 0;
  };
  bool use_gemm(const MatmulArgs& a) const;

  // out = x . W^T (+ bias): x rounded to BF16 once, W (device layout `d.w`) used as is when
  // BF16, else dequantized to BF16 in chunks of rows into the reused scratch.
  void gemm(const MatmulArgs& a, const MatmulArgs& d);
  uint16_t* gemm_input(const MatmulArgs& a, const Mat& dx);
  bool gemm_batch_ok(const MatmulArgs* list, int n) const;
  void gemm_f32(const MatmulArgs& d);  // F32 weights on cuBLAS's F32 GEMM (d: device pointers)

  // Prefill attention on the tensor cores: more than kGraphMaxTokens tokens launch by launch, one
  // sequence at consecutive positions inside the cache (host arrays), a shape the kernel takes.
  bool use_flash_prefill(const AttentionArgs& a);

  // Runs the launch now, or queues it when a step is being collected for a graph.
  void enqueue(const char* op, cuda::Launch fn);

  // Runs the queued launches of the step now (the rest of the step runs launch by launch).
  void flush(const char* op);

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
  bool fuse_into_producer(const Mat& x, cuda::ActRound round, const cuda::QuantAct& xq);

  // Queues a decode matmul; in a graph step, one on the same input as the matmul launch queued
  // last (q / k / v, gate / up) joins that launch instead (cuda::launch_matmuls: same results).
  void enqueue_gemv(const MatmulArgs& d, const cuda::QuantAct* xq, bool wc);

  static bool overlaps(const Mat& a, const Mat& b) {
    if (!a.data || !b.data || a.rows == 0 || b.rows == 0) return false;
    const float* a_end = a.data + (a.rows - 1) * a.row_stride() + a.cols;
    const float* b_end = b.data + (b.rows - 1) * b.row_stride() + b.cols;
    return a.data < b_end && b.data < a_end;
  }
  static bool apart_or_same(const Mat& a, const Mat& b) { return same_mat(a, b) || !overlaps(a, b); }
  // The launch queued last as a producer of `kind` writing `out` (the caller fills the kind's
  // fields).
  Producer& start_producer(int kind, const Mat& out) {
    producer_ = Producer{};
    producer_.kind = kind;
    producer_.index = launches_.size() - 1;
    producer_.out = out;
    return producer_;
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
  // and printed when the backend is destroyed. Eager launches (time_eager_launch) are timed
  // one by one too and summed per op name.
  void time_launches();
  void print_kernel_times() const;

  // Whether device floats `p` are a copy of a host constant (no kernel writes them).
  bool constant_floats(const float* p);

  // A device buffer that only grows; an outgrown one is freed once the launches queued with
  // it have run (end of step).
  void* scratch(Scratch& s, size_t bytes, const char* op);

  // Room in `s` for n activations quantized to int8 and their scales (one per block of 32 at
  // most), as launch_quantize_activations writes them.
  cuda::QuantAct quant_scratch(Scratch& s, size_t n, const char* op);

  // Frees device memory of this backend now, or at the end of the step when launches are queued.
  void release(void* p, const char* op);
  void free_retired();
  void* raw_alloc(size_t bytes, const char* op);

  bool is_device(const void* p) const {
    const auto u = reinterpret_cast<uintptr_t>(p);
    auto it = allocs_.upper_bound(u);
    if (it == allocs_.begin()) return false;
    --it;
    return u < it->first + it->second;
  }
  void check_kv(const KvView& v, const char* op) const;

  // The kernels address K and V rows through one table (the same slots).
  static void check_kv_pair(const KvView& k, const KvView& v, const char* op);

  // Whether no kernel writes the device copy of weight `w` (as given to an op) while steps run:
  // weights uploaded from the host or repacked into a copy here (both complete before use), and
  // device memory declared constant (cuda_mark_constant).
  bool weight_constant(const Weight& w) const;

 public:
  void mark_constant(const void* p, size_t bytes);

 private:
  // Device view of a weight in the device layout: used as is when already in device memory in
  // a layout that is the stored one, else uploaded / repacked once and cached by address.
  Weight device_weight(const Weight& w, const char* op);
  void upload(void* dst, const void* src, size_t bytes, const char* op);
  const float* device_floats(const float* p, int64_t n, const char* op);

  // Device copy of a per-batch int array: the step's fixed buffer when it is one of the
  // step's arrays, else a buffer per host address copied only when its contents changed.
  const int32_t* stage(const int32_t* p, int64_t n, const char* op);

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
  // Delta rule prefill: the runs / chunks plan built on the host (staged by its address, so an
  // unchanged plan, the same step's next layer, is not copied again) and the chunked form's scratch.
  std::vector<int32_t> delta_plan_;
  Scratch delta_chunk_;
  // A state view of this backend's memory holding slots of `floats` each (recurrent state).
  void check_state(const StateView& v, int64_t floats, const char* op);
  // Host checks of a step's sequence ids against the state's slots.
  void check_slots(const int32_t* seq, int64_t n, const StateView& v, const char* op);
  // The GEMM input last converted into gemm_x_ (valid like qstate_).
  Mat bstate_x_;
  uint16_t* bstate_buf_ = nullptr;
  bool bstate_valid_ = false;
  cuda::Blas* blas_ = nullptr;  // cuBLAS handle on stream_ (nullptr: no GEMM)
  std::vector<void*> retired_;
  // matmuls(): device arrays of the x / w / out pointers of a batched GEMM, by their contents.
  std::map<std::vector<uintptr_t>, void**> gemm_batch_ptrs_;

  QuantState qstate_;
  RoundState fstate_;
  Producer producer_;

  // The step being collected.
  bool in_step_ = false;
  bool replay_ok_ = false;     // the last step ran as one graph that replay_step may launch again
  bool staged_other_ = false;  // an op of this step staged a host array that is not the step's
  int64_t replay_n_tok_ = -1, replay_n_out_ = -1;
  bool step_eager_ = true;
  LaunchKey key_;
  std::vector<cuda::Launch> launches_;
  std::vector<const char*> names_;
  struct KernelTimes {
    std::vector<const char*> names;
    std::vector<double> ms;
    int steps = 0;
  };
  std::map<size_t, KernelTimes> kernel_times_;  // BRISK_CUDA_KERNEL_TIMES, by launches per step
  struct EagerTimes {
    double ms = 0.0;
    int64_t launches = 0;
  };
  // BRISK_CUDA_KERNEL_TIMES: launches run eagerly (long prompts, encoders, ops outside steps),
  // summed per op name.
  std::map<std::string, EagerTimes> eager_times_;
  void time_eager_launch(const char* op, const cuda::Launch& fn);
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
  GemvGroup gemv_;
  size_t last_step_launches_ = 0;  // launches of the last step collected for a graph
  // Encoder epilogues outside graph steps (cuda_encoder.cpp): the last GEMM's bias (1), a unary
  // after it (2: + bias), or a residual add (+ that bias) and / or a LayerNorm (3), or the
  // tensor-core dense attention (4) wait here for the next op, which may take them into its
  // launch: a unary takes the bias, an add the bias, a LayerNorm the add, the next GEMM the
  // unary, norm or attention with its BF16 input rounding. Any other launch, copy or
  // synchronization first issues them as their own launches (same bits).
  struct Epilogue {
    int kind = 0;
    Mat out;                    // kind 1: the GEMM's output
    const float* bias = nullptr;  // kind 1: its bias (device)
    cuda::BiasActArgs act;      // kind 2
    bool act_out_dead = false;  // kind 2: the next GEMM may take only the BF16 copy (out_for_matmul)
    cuda::EncoderNormArgs norm; // kind 3 (norm.has_add: add pending; has_ln: the norm too)
    AddArgs add;                // kind 3 with has_add: the add as the model gave it
    bool has_ln = false;
    AttentionDenseArgs attn{};  // kind 4: the tensor-core attention (device arrays), its longest
    int64_t attn_max_len = 0;   //   sequence, and whether only the next GEMM reads its output
    bool attn_out_dead = false;
  };
  Epilogue epi_;
  bool epilogue_on() const { return !(in_step_ && !step_eager_) && !flags().no_cuda_encoder_fuse; }
  // Issues the waiting epilogue as its own launches.
  void settle_epilogue();
  bool defer_add(const AddArgs& a);
  std::vector<StepArray> step_map_;
  int32_t* step_dev_ = nullptr;   // [4, step_cap_]: ids, pos, seq, output rows
  int32_t* step_host_ = nullptr;  // pinned staging of the same
  int64_t step_cap_ = 0;
  cudaEvent_t step_copied_ = nullptr;
  cuda::GraphCache graphs_cache_{kMaxGraphs};
};

}  // namespace brisk::cuda
