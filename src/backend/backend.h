// The op interface every model forward is written against. A Backend owns device memory
// (activation arenas, KV caches, uploaded weights) and runs ops on it; the CPU backend runs
// them on a thread pool, the CUDA backend enqueues them on a stream. Ops take parameter
// structs (core/op_args.h, designated initializers) of plain views (core/tensor_view.h): no
// allocation and no host decision happens inside an op, so that a decode step can be captured
// as one CUDA graph.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/op_args.h"
#include "quant/types.h"

namespace brisk {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual int n_threads() const = 0;

  // Device memory, zero-initialized, 64-byte aligned; lives as long as the backend.
  virtual void* alloc(size_t bytes) = 0;
  virtual void free(void* p) = 0;

  virtual void matmul(const MatmulArgs& a) = 0;
  // Several matmuls of the same input x (q/k/v, gate/up), in order. The default runs them one
  // by one; the CPU backend quantizes x once and, for decode, runs them in one parallel region.
  virtual void matmuls(const MatmulArgs* list, int n) {
    for (int i = 0; i < n; ++i) matmul(list[i]);
  }
  virtual void rms_norm(const RmsNormArgs& a) = 0;
  virtual void rope(const RopeArgs& a) = 0;
  virtual void kv_store(const KvStoreArgs& a) = 0;
  virtual void attention(const AttentionArgs& a) = 0;
  virtual void gated_act(const GatedActArgs& a) = 0;
  virtual void add(const AddArgs& a) = 0;
  virtual void embedding(const EmbeddingArgs& a) = 0;
  virtual void get_rows(const GetRowsArgs& a) = 0;
  virtual void moe(const MoeArgs& a) = 0;
  virtual void softcap(const SoftcapArgs& a) = 0;
  // Ops added after the first backends. Defaults (backend/backend_unsupported.cpp): throw
  // "op X is not supported on the Y backend", so a model that needs one fails clearly there
  // instead of computing something else.
  // out = x * scale (a per-tensor constant).
  virtual void scale(const ScaleArgs& a);
  // Whether moe() applies MoeArgs::expert_scale; callers that set it check this first.
  virtual bool moe_expert_scale_supported() const { return false; }
  // Whether moe(a) runs a's shared expert (MoeArgs::shared_*) with the routed ones; otherwise the
  // caller runs it as a dense MLP and must leave those fields null.
  virtual bool moe_shared_supported(const MoeArgs& a) const {
    (void)a;
    return false;
  }
  // Tensor parallelism: the sum of a.x over the ranks of a.tp's group (AllReduceArgs). Called
  // only when the group has more than one rank. Default: throws naming the backend.
  virtual void all_reduce(const AllReduceArgs& a);
  // Encoder ops (see their argument structs); the defaults throw naming the op and backend.
  virtual void layer_norm(const LayerNormArgs& a);
  virtual void unary(const UnaryArgs& a);
  virtual void im2col(const Im2colArgs& a);
  virtual void attention_weights(const AttentionWeightsArgs& a);
  // False when the backend has no such op: the caller then stores k / v in a KV view and runs
  // attention() with every query at the last position.
  virtual bool attention_dense(const AttentionDenseArgs& a) {
    (void)a;
    return false;
  }
  // Whether attention_dense(a) adds AttentionDenseArgs::q_bias / k_bias / v_bias to the rows it
  // reads (the caller then leaves them out of the q / k / v matmuls: no launch writes them).
  virtual bool attention_dense_bias(const AttentionDenseArgs& a) const {
    (void)a;
    return false;
  }
  // False when the backend has no such op (the CPU: the caller pools on the host, where the
  // rows already are).
  virtual bool mean_rows(const MeanRowsArgs& a) {
    (void)a;
    return false;
  }
  // Ops of linear-attention layers.
  virtual void conv_state(const ConvStateArgs& a);
  virtual void l2_norm(const L2NormArgs& a);
  virtual void gated_rms_norm(const GatedRmsNormArgs& a);
  virtual void sigmoid_mul(const SigmoidMulArgs& a);
  virtual void delta_rule(const DeltaRuleArgs& a);
  // Waits for queued work (no-op on the CPU).
  virtual void synchronize() {}
  // Copies bytes between host memory and this backend's memory, in either direction (or
  // within either); returns once dst holds the data.
  virtual void copy(void* dst, const void* src, size_t bytes);

  // Bracket the ops of one forward. The arrays of `in` stay unchanged until end_step; a
  // device backend copies them once to fixed device buffers (ops given these host arrays
  // use those) and may queue the ops' launches and run them as one graph at end_step. copy()
  // and synchronize() inside a step first run what is queued. Defaults: nothing.
  virtual void begin_step(const StepInputs& in) { (void)in; }
  virtual void end_step() {}
  // Runs the previous step again on new step inputs, in place of begin_step, the ops and
  // end_step: the caller vouches that it would issue the same ops on the same buffers and
  // shapes (the same model, n_tok, n_out, output rows, sequences and KV capacity; only ids and
  // positions differ). True when the backend did (a CUDA backend whose previous step ran as
  // one graph and read no host array but the step's), false when the caller must run the
  // step op by op. Default: false.
  virtual bool replay_step(const StepInputs& in) {
    (void)in;
    return false;
  }
  // Greedy pick on the backend: ids[t] (host) = the first index of the largest value of row t
  // of x (this backend's memory), NaN counting as -inf, -1 when a row has no finite or +inf
  // value; only the ids are copied back. False when the backend has no such op (the caller
  // copies the logits and samples on the host; the CPU backend does that).
  virtual bool argmax_rows(const Mat& x, int32_t* ids) {
    (void)x;
    (void)ids;
    return false;
  }
  // The sampler chain of runtime/sampler.h on the backend: ids[t] (host) = the token drawn from
  // row t of x (this backend's memory) under specs[t], whose edits are
  // edits[specs[t].edit_offset, + n_edits); -1 when every token is banned. False when the
  // backend has no such op (the caller copies the logits). x.rows == 0 only asks.
  virtual bool sample_rows(const Mat& x, const DeviceSampleSpec* specs, const DeviceSampleEdit* edits,
                           int32_t n_edits, int32_t* ids) {
    (void)x;
    (void)specs;
    (void)edits;
    (void)n_edits;
    (void)ids;
    return false;
  }
  // Whether this backend's attention wants K caches of `type` tiled (KvView::tiled) for these
  // heads. Default: no (row layout).
  virtual bool wants_tiled_k(QuantType type, int32_t head_dim, int32_t group) const {
    (void)type;
    (void)head_dim;
    (void)group;
    return false;
  }
  // The layout this backend's matmul kernels read weights of a stored format in, when it is
  // not the stored one (a repacked layout of quant/repack.h: the CPU backend's Q8_0_R16 on
  // AVX-512). The weight store converts a model's matmul weights for it once, when a context
  // first binds the model to this backend (models/weights.h); ops then only see weights in
  // the layouts this answers. Default: the stored layout.
  virtual std::optional<QuantType> weight_layout(QuantType stored) const {
    (void)stored;
    return std::nullopt;
  }
  // Free and total bytes of the device memory; false for host memory (the CPU backend).
  virtual bool memory_info(size_t* free_bytes, size_t* total_bytes) const {
    (void)free_bytes;
    (void)total_bytes;
    return false;
  }
};

// The CPU backend with n_threads workers (<= 0: all cores).
std::unique_ptr<Backend> make_cpu_backend(int n_threads);

// By name: "cpu", "cuda" (device 0), "cuda:N", or "auto" (CUDA device 0 when one is usable,
// else the CPU). Throws brisk::Error for an unknown name or an unavailable device.
std::unique_ptr<Backend> make_backend(const std::string& device, int n_threads);

}  // namespace brisk
