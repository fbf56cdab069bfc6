// The CUDA backend's linear-attention ops (cuda_backend_impl.h): the causal conv with its rolling
// window, L2 norm, the gated RMS norm, the sigmoid gate and the gated delta rule (kernels in
// kernels/cuda/delta_net.cu and delta_rule.cu).
//
// The recurrent state (runtime/recurrent_state.*) is allocated by the Context through alloc(),
// so it is device memory at fixed addresses; snapshots for the prefix cache are other slots of
// the same buffers, copied by copy() on the device. The kernels find each token's slot through
// the step's sequence ids in device memory (as the KV cache's block table), so a decode step's
// launches do not change with the sequences it serves and the step stays one graph.
//
// The delta rule takes its recurrent form for steps of at most kGraphMaxTokens tokens (decode,
// graph steps: nothing planned on the host) and its chunked form for longer steps (prefill, run
// launch by launch), whose runs and chunks the host plans from the step's sequence ids.
// BRISK_NO_CUDA_CHUNKED_DELTA keeps the recurrent form for every step.
#include <algorithm>
#include <numeric>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/op_checks.h"

namespace brisk::cuda {

void CudaBackend::check_state(const StateView& v, int64_t floats, const char* op) {
  BRISK_CHECK(v.data != nullptr && v.n_slots > 0 && v.slot_floats == floats, op, ": state slots of ",
              v.slot_floats, " floats, expected ", floats);
  std::lock_guard<std::mutex> lock(mutex_);
  BRISK_CHECK(is_device(v.data) && is_device(v.data + v.slot_floats * v.n_slots - 1), op,
              ": the recurrent state is not device memory of this backend");
}

void CudaBackend::check_slots(const int32_t* seq, int64_t n, const StateView& v, const char* op) {
  BRISK_CHECK(seq != nullptr || n == 0, op, ": missing sequence ids");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (n == 0 || is_device(seq)) return;  // device ids: the caller vouches for them
  }
  for (int64_t t = 0; t < n; ++t)
    BRISK_CHECK(seq[t] >= 0 && seq[t] < v.n_slots, op, ": token ", t, " names sequence ", seq[t],
                ", the state holds ", v.n_slots);
}

void CudaBackend::conv_state(const ConvStateArgs& a) {
  const int64_t n_tok = a.x.rows, C = a.x.cols;
  check_mat(a.out, n_tok, C, "conv_state", "out");
  BRISK_CHECK(a.out.data != a.x.data, "conv_state: out must not alias x");
  BRISK_CHECK(a.weight && a.kernel >= 1 && a.kernel <= 16, "conv_state: kernel ", a.kernel, " out of range [1, 16]");
  if (a.kernel > 1) check_state(a.state, int64_t(a.kernel - 1) * C, "conv_state");
  if (n_tok == 0) return;
  if (a.kernel > 1) check_slots(a.seq, n_tok, a.state, "conv_state");
  ConvStateArgs d = a;
  d.weight = device_floats(a.weight, C * a.kernel, "conv_state weight");
  d.seq = stage(a.seq, n_tok, "conv_state seq");
  d.pos = stage(a.pos, n_tok, "conv_state pos");
  key_.add(uint64_t(20));
  key_.add(d.out);
  key_.add(d.x);
  key_.add(d.weight);
  key_.add(uint64_t(d.kernel));
  key_.add(d.state.data);
  key_.add(uint64_t(d.state.slot_floats));
  key_.add(d.seq);
  key_.add(d.pos);
  key_.add(uint64_t(d.silu));
  forget_quant();
  enqueue("conv_state", [d](cudaStream_t s) { return cuda::launch_conv_state(d, s); });
  if (in_step_ && !step_eager_) start_producer(11, d.out).conv = d;
}

// Whether `a` normalises, in place, whole groups of a column range of the conv output `c` (its
// rows, its stride): then the conv's launch does it (returns the range's first column).
static int64_t conv_l2_range(const ConvStateArgs& c, const cuda::ConvL2Ranges& r, const L2NormArgs& a, int64_t group) {
  if (a.out.data != a.x.data || a.out.row_stride() != a.x.row_stride() || a.x.rows != c.out.rows ||
      a.x.row_stride() != c.out.row_stride() || a.x.data < c.out.data || a.x.data >= c.out.data + c.out.cols)
    return -1;
  const int64_t col0 = a.x.data - c.out.data;
  if (!cuda::conv_l2_group_supported(group) || col0 + a.x.cols > c.out.cols || col0 % group != 0 ||
      c.out.cols % group != 0 || (r.n > 0 && r.group != group))
    return -1;
  for (int j = 0; j < r.n; ++j)
    if (col0 < r.col0[j] + r.cols[j] && r.col0[j] < col0 + a.x.cols) return -1;
  return col0;
}

void CudaBackend::l2_norm(const L2NormArgs& a) {
  const int64_t group = a.group > 0 ? a.group : a.x.cols;
  BRISK_CHECK(group > 0 && a.x.cols % group == 0, "l2_norm: ", a.x.cols, " columns are not a multiple of group ", group);
  check_mat(a.out, a.x.rows, a.x.cols, "l2_norm", "out");
  key_.add(uint64_t(21));
  key_.add(a.out);
  key_.add(a.x);
  key_.add(uint64_t(group));
  key_.add(a.eps);
  const Producer prev = producer_;
  forget_quant();
  // In place on q or k of the conv queued just before (a delta-net layer): in the conv's launch.
  if (in_step_ && !step_eager_ && !flags().no_cuda_norm_merge && prev.kind == 11 &&
      prev.index + 1 == launches_.size() && prev.conv_l2.n < 2) {
    const int64_t col0 = conv_l2_range(prev.conv, prev.conv_l2, a, group);
    if (col0 >= 0) {
      Producer pr = prev;
      cuda::ConvL2Ranges& r = pr.conv_l2;
      r.col0[r.n] = col0;
      r.cols[r.n] = a.x.cols;
      r.eps[r.n] = a.eps;
      r.group = group;
      ++r.n;
      launches_[pr.index] = [c = pr.conv, r](cudaStream_t s) { return cuda::launch_conv_state_l2(c, r, s); };
      names_[pr.index] = "conv_state (+ L2 norms)";
      key_.add(uint64_t(114));
      producer_ = pr;
      return;
    }
  }
  // Right after another L2 norm that reads and writes none of this one's memory (a delta-net
  // layer's q and k): one launch for both.
  if (in_step_ && !step_eager_ && !flags().no_cuda_norm_merge && prev.kind == 10 &&
      prev.index + 1 == launches_.size() && !overlaps(a.x, prev.l2.out) && !overlaps(a.out, prev.l2.x) &&
      !overlaps(a.out, prev.l2.out)) {
    const L2NormArgs first = prev.l2;
    launches_[prev.index] = [first, a](cudaStream_t s) { return cuda::launch_l2_norm_pair(first, a, s); };
    names_[prev.index] = "l2_norm (two tensors)";
    key_.add(uint64_t(113));
    return;
  }
  enqueue("l2_norm", [a](cudaStream_t s) { return cuda::launch_l2_norm(a, s); });
  if (in_step_ && !step_eager_) start_producer(10, a.out).l2 = a;
}

void CudaBackend::gated_rms_norm(const GatedRmsNormArgs& a) {
  const int64_t group = a.group > 0 ? a.group : a.x.cols;
  BRISK_CHECK(a.weight && group > 0 && a.x.cols % group == 0, "gated_rms_norm: ", a.x.cols,
              " columns are not a multiple of group ", group, ", or no weight");
  check_mat(a.z, a.x.rows, a.x.cols, "gated_rms_norm", "z");
  check_mat(a.out, a.x.rows, a.x.cols, "gated_rms_norm", "out");
  GatedRmsNormArgs d = a;
  d.weight = device_floats(a.weight, group, "gated_rms_norm weight");
  key_.add(uint64_t(22));
  key_.add(d.out);
  key_.add(d.x);
  key_.add(d.z);
  key_.add(d.weight);
  key_.add(uint64_t(group));
  key_.add(d.eps);
  forget_quant();
  enqueue("gated_rms_norm", [d](cudaStream_t s) { return cuda::launch_gated_rms_norm(d, s); });
}

void CudaBackend::sigmoid_mul(const SigmoidMulArgs& a) {
  BRISK_CHECK(a.gate.cols == a.x.cols || a.gate.cols == 1, "sigmoid_mul: gate has ", a.gate.cols, " columns for ",
              a.x.cols);
  check_mat(a.gate, a.x.rows, a.gate.cols, "sigmoid_mul", "gate");
  check_mat(a.out, a.x.rows, a.x.cols, "sigmoid_mul", "out");
  key_.add(uint64_t(23));
  key_.add(a.out);
  key_.add(a.x);
  key_.add(a.gate);
  forget_quant();
  enqueue("sigmoid_mul", [a](cudaStream_t s) { return cuda::launch_sigmoid_mul(a, s); });
}

void CudaBackend::delta_rule(const DeltaRuleArgs& a) {
  const int64_t n_tok = a.q.rows;
  check_delta_rule_shapes(a);
  BRISK_CHECK(cuda::delta_rule_supported(a) && a.n_v_head <= 65535, "delta_rule: k_dim ", a.k_dim, " (at most ",
              cuda::kDeltaMaxKeyDim, " on CUDA) or ", a.n_v_head, " value heads not supported");
  check_state(a.state, int64_t(a.n_v_head) * a.k_dim * a.v_dim, "delta_rule");
  if (n_tok == 0) return;
  check_slots(a.seq, n_tok, a.state, "delta_rule");
  bool seq_on_host;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    seq_on_host = !is_device(a.seq);
  }
  const bool chunked = !flags().no_cuda_chunked_delta && n_tok > kGraphMaxTokens && seq_on_host;
  BRISK_CHECK(chunked || n_tok <= 65535, "delta_rule: ", n_tok, " tokens in one recurrent launch (at most 65535)");
  DeltaRuleArgs d = a;
  d.decay_rate = device_floats(a.decay_rate, a.n_v_head, "delta_rule decay_rate");
  d.dt_bias = device_floats(a.dt_bias, a.n_v_head, "delta_rule dt_bias");
  cuda::DeltaChunkPlan plan;
  if (chunked) {
    // Runs: the tokens of each sequence in batch order (a stable sort by sequence); chunks of at
    // most 64 tokens of a run. Layout of the staged plan: tokens, chunks [3], runs [2].
    std::vector<int32_t> order(static_cast<size_t>(n_tok));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) { return a.seq[x] < a.seq[y]; });
    std::vector<int32_t> chunks, runs;
    for (int64_t i = 0; i < n_tok;) {
      int64_t e = i + 1;
      while (e < n_tok && a.seq[order[size_t(e)]] == a.seq[order[size_t(i)]]) ++e;
      runs.push_back(int32_t(chunks.size() / 3));
      int32_t n_chunks = 0;
      for (int64_t c0 = i; c0 < e; c0 += 64, ++n_chunks) {
        chunks.push_back(int32_t(c0));
        chunks.push_back(int32_t(std::min<int64_t>(64, e - c0)));
        chunks.push_back(int32_t(runs.size() / 2));
      }
      runs.push_back(n_chunks);
      i = e;
    }
    delta_plan_.assign(order.begin(), order.end());
    delta_plan_.insert(delta_plan_.end(), chunks.begin(), chunks.end());
    delta_plan_.insert(delta_plan_.end(), runs.begin(), runs.end());
    const int32_t* dev = stage(delta_plan_.data(), int64_t(delta_plan_.size()), "delta_rule plan");
    plan.tokens = dev;
    plan.chunks = dev + n_tok;
    plan.runs = plan.chunks + chunks.size();
    plan.n_chunks = int32_t(chunks.size() / 3);
    plan.n_runs = int32_t(runs.size() / 2);
    plan.scratch = static_cast<float*>(
        scratch(delta_chunk_, sizeof(float) * cuda::delta_rule_chunk_scratch_floats(a), "delta_rule"));
  }
  d.seq = stage(a.seq, n_tok, "delta_rule seq");
  d.pos = stage(a.pos, n_tok, "delta_rule pos");
  key_.add(uint64_t(chunked ? 25 : 24));
  for (const Mat* m : {&d.out, &d.q, &d.k, &d.v, &d.alpha, &d.beta}) key_.add(*m);
  key_.add(d.decay_rate);
  key_.add(d.dt_bias);
  key_.add(d.state.data);
  key_.add(uint64_t(d.state.slot_floats));
  key_.add(d.seq);
  key_.add(d.pos);
  key_.add(uint64_t(d.n_k_head));
  key_.add(uint64_t(d.n_v_head));
  key_.add(uint64_t(d.k_dim));
  key_.add(uint64_t(d.v_dim));
  key_.add(uint64_t(d.kv_tiled));
  key_.add(d.scale);
  key_.add(plan.tokens);
  key_.add(plan.scratch);
  forget_quant();
  if (chunked)
    enqueue("delta_rule (chunked)", [d, plan](cudaStream_t s) { return cuda::launch_delta_rule_chunked(d, plan, s); });
  else
    enqueue("delta_rule", [d](cudaStream_t s) { return cuda::launch_delta_rule_recurrent(d, s); });
}

}  // namespace brisk::cuda
