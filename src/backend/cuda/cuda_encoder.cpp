// The CUDA backend's encoder ops (cuda_backend_impl.h): LayerNorm, GELU, im2col, the
// probabilities of one cross-attention head (alignment) and bidirectional attention over dense
// k / v rows. Each checks its arguments, resolves host constants and arrays to device memory,
// adds its arguments to the step's launch key and queues its launch (kernels/cuda/encoder_ops.cu,
// attention_dense.cu); inside a decode step they join its graph like the other ops.
#include "backend/cuda/cuda_backend_impl.h"

namespace brisk::cuda {

void CudaBackend::layer_norm(const LayerNormArgs& a) {
  BRISK_CHECK(a.x.data != nullptr && a.x.cols > 0 && a.x.rows >= 0 && a.x.rows <= INT32_MAX, "layer_norm: x is [",
              a.x.rows, ", ", a.x.cols, "]");
  check_mat(a.out, a.x.rows, a.x.cols, "layer_norm", "out");
  LayerNormArgs d = a;
  d.weight = a.weight ? device_floats(a.weight, a.x.cols, "layer_norm weight") : nullptr;
  d.bias = a.bias ? device_floats(a.bias, a.x.cols, "layer_norm bias") : nullptr;
  key_.add(uint64_t(20));
  key_.add(d.out);
  key_.add(d.x);
  key_.add(d.weight);
  key_.add(d.bias);
  key_.add(d.eps);
  if (epilogue_on()) {
    // After the residual add that wrote x (waiting): one launch; else the norm waits alone.
    // Either way the next GEMM on its output may round it to BF16 in the same launch.
    if (epi_.kind == 3 && epi_.norm.has_add && !epi_.has_ln && same_mat(epi_.add.out, a.x) &&
        apart_or_same(d.out, epi_.add.a) && apart_or_same(d.out, epi_.add.b) && apart_or_same(d.out, a.x)) {
      forget_quant();
      epi_.norm.ln = d;
      // The sum is needed only where the norm does not overwrite it.
      epi_.norm.sum = same_mat(d.out, a.x) ? Mat{} : a.x;
      epi_.has_ln = true;
      return;
    }
    settle_epilogue();
    if (apart_or_same(d.out, a.x)) {
      forget_quant();
      epi_ = Epilogue{.kind = 3, .norm = {.ln = d}, .has_ln = true};
      return;
    }
  }
  forget_quant();
  enqueue("layer_norm", [d](cudaStream_t s) { return cuda::launch_layer_norm(d, s); });
}

void CudaBackend::settle_epilogue() {
  if (epi_.kind == 0) return;
  const Epilogue e = epi_;
  epi_.kind = 0;
  if (e.kind == 1) {
    const Mat out = e.out;
    const float* bias = e.bias;
    enqueue("matmul (bias)", [out, bias](cudaStream_t s) { return cuda::launch_add_bias(out, bias, s); });
  } else if (e.kind == 2) {
    const cuda::BiasActArgs act = e.act;
    enqueue(act.bias ? "unary (+ bias)" : "unary", [act](cudaStream_t s) { return cuda::launch_bias_act(act, s); });
  } else if (e.kind == 4) {
    const AttentionDenseArgs d = e.attn;
    const int64_t max_len = e.attn_max_len;
    enqueue("attention_dense (tensor cores)",
            [d, max_len](cudaStream_t s) { return cuda::launch_attention_dense_tc(d, max_len, s); });
  } else if (e.has_ln) {
    const cuda::EncoderNormArgs norm = e.norm;
    enqueue(norm.has_add ? "add + layer_norm" : "layer_norm",
            [norm](cudaStream_t s) { return cuda::launch_encoder_norm(norm, s); });
  } else {
    // A residual add whose norm did not come: the matmul's bias, then the add.
    if (e.norm.b_bias) {
      const Mat out = e.norm.b;
      const float* bias = e.norm.b_bias;
      enqueue("matmul (bias)", [out, bias](cudaStream_t s) { return cuda::launch_add_bias(out, bias, s); });
    }
    const AddArgs add = e.add;
    enqueue("add", [add](cudaStream_t s) { return cuda::launch_add(add, s); });
  }
}

// A residual add outside graph steps: waits (epi_) with the bias of the GEMM that wrote one of
// its operands, for a LayerNorm of its output. False when it does not wait.
bool CudaBackend::defer_add(const AddArgs& a) {
  // (Operands that partly overlap keep the separate launches.)
  if (!epilogue_on() || !apart_or_same(a.out, a.a) || !apart_or_same(a.out, a.b) || !apart_or_same(a.a, a.b)) return false;
  const bool bias_b = epi_.kind == 1 && same_mat(epi_.out, a.b) && !same_mat(a.a, a.b);
  const bool bias_a = epi_.kind == 1 && same_mat(epi_.out, a.a) && !same_mat(a.a, a.b);
  const float* bias = bias_a || bias_b ? epi_.bias : nullptr;
  if (!bias) settle_epilogue();
  // The matmul's output is b of the fused kernel (a + (b + bias); float adds commute).
  const Mat gemm_out = bias_a ? a.a : a.b;
  // The matmul's output gets its bias as its own launch would give it, unless the sum
  // overwrites it or nothing reads it again (b_dead).
  const bool gemm_out_dead = bias_b && a.b_dead && !flags().no_cuda_skip_dead_writes;
  epi_ = Epilogue{.kind = 3, .norm = {.has_add = true, .a = bias_a ? a.b : a.a, .b = gemm_out, .b_bias = bias,
                                      .write_b = bias != nullptr && !same_mat(a.out, gemm_out) && !gemm_out_dead,
                                      .sum = a.out},
                  .add = a};
  return true;
}

void CudaBackend::unary(const UnaryArgs& a) {
  BRISK_CHECK(a.op == UnaryOp::gelu_erf || a.op == UnaryOp::gelu_tanh || a.op == UnaryOp::tanh, "unary: unknown op ",
              int(a.op));
  check_mat(a.out, a.x.rows, a.x.cols, "unary", "out");
  BRISK_CHECK(a.x.data != nullptr && a.x.rows * a.x.cols / 256 < INT32_MAX, "unary: x is [", a.x.rows, ", ",
              a.x.cols, "]");
  key_.add(uint64_t(21));
  key_.add(a.out);
  key_.add(a.x);
  key_.add(uint64_t(a.op));
  if (epilogue_on() && apart_or_same(a.out, a.x)) {
    // With the bias of the GEMM that wrote x (waiting), and waiting itself for the next GEMM.
    // (In place only: out = x + bias is what the bias launch leaves in x.)
    const float* bias = epi_.kind == 1 && same_mat(epi_.out, a.x) && same_mat(a.out, a.x) ? epi_.bias : nullptr;
    if (!bias) settle_epilogue();
    forget_quant();
    epi_ = Epilogue{.kind = 2, .act = {.out = a.out, .x = a.x, .bias = bias, .op = a.op},
                    .act_out_dead = a.out_for_matmul && !flags().no_cuda_skip_dead_writes};
    return;
  }
  forget_quant();
  enqueue("unary", [a](cudaStream_t s) { return cuda::launch_unary(a, s); });
}

void CudaBackend::im2col(const Im2colArgs& a) {
  BRISK_CHECK(a.kernel >= 1 && a.stride >= 1 && a.pad >= 0 && a.frames_in > 0 && a.x.rows % a.frames_in == 0,
              "im2col: kernel ", a.kernel, ", stride ", a.stride, ", pad ", a.pad, " or ", a.x.rows,
              " rows of frames_in ", a.frames_in, " do not fit");
  const int64_t span = int64_t(a.frames_in) + 2 * int64_t(a.pad) - a.kernel;
  const int64_t frames_out = span < 0 ? 0 : span / a.stride + 1;
  check_mat(a.out, a.x.rows / a.frames_in * frames_out, a.x.cols * a.kernel, "im2col", "out");
  BRISK_CHECK(a.out.rows * a.out.cols / 256 < INT32_MAX, "im2col: out [", a.out.rows, ", ", a.out.cols, "] too large");
  key_.add(uint64_t(22));
  key_.add(a.out);
  key_.add(a.x);
  key_.add(uint64_t(a.frames_in));
  key_.add(uint64_t(a.kernel));
  key_.add(uint64_t(a.stride));
  key_.add(uint64_t(a.pad));
  forget_quant();
  enqueue("im2col", [a, frames_out](cudaStream_t s) { return cuda::launch_im2col(a, frames_out, s); });
}

void CudaBackend::attention_weights(const AttentionWeightsArgs& a) {
  BRISK_CHECK(a.n_head_kv > 0 && a.n_head % a.n_head_kv == 0 && a.head >= 0 && a.head < a.n_head,
              "attention_weights: head ", a.head, " of ", a.n_head, " (", a.n_head_kv, " KV heads)");
  BRISK_CHECK(a.head_dim > 0 && a.head_dim <= 4096 && a.k_cache.width == int64_t(a.n_head_kv) * a.head_dim,
              "attention_weights: KV cache width ", a.k_cache.width, " does not match ", a.n_head_kv, " x ",
              a.head_dim);
  BRISK_CHECK(a.k_cache.type != QuantType::Q8_0 || a.head_dim % 32 == 0, "attention_weights: head_dim ", a.head_dim,
              " with a q8_0 KV cache (CUDA needs a multiple of 32)");
  check_mat(a.q, a.q.rows, int64_t(a.n_head) * a.head_dim, "attention_weights", "q");
  check_mat(a.out, a.q.rows, a.out.cols, "attention_weights", "out");
  check_kv(a.k_cache, "attention_weights");
  BRISK_CHECK(a.q.rows <= INT32_MAX, "attention_weights: ", a.q.rows, " tokens");
  AttentionWeightsArgs d = a;
  d.seq = stage(a.seq, a.q.rows, "attention_weights seq");
  d.pos = stage(a.pos, a.q.rows, "attention_weights pos");
  key_.add(uint64_t(23));
  key_.add(d.out);
  key_.add(d.q);
  key_.add(d.k_cache);
  key_.add(d.seq);
  key_.add(d.pos);
  key_.add(uint64_t(d.head));
  key_.add(uint64_t(d.n_head));
  key_.add(uint64_t(d.n_head_kv));
  key_.add(uint64_t(d.head_dim));
  key_.add(d.scale);
  forget_quant();
  enqueue("attention_weights", [d](cudaStream_t s) { return cuda::launch_attention_weights(d, s); });
}

// The tensor-core kernel takes the q / k / v biases as it reads the rows (the q / k / v matmuls
// would otherwise add them, a launch each reading and writing every row).
bool CudaBackend::attention_dense_bias(const AttentionDenseArgs& a) const {
  return !flags().no_cuda_attention_bias && !flags().no_cuda_dense_attention && !flags().no_cuda_dense_attention_tc &&
         cuda::attention_dense_supported(a) && cuda::attention_dense_tc_supported(a);
}

bool CudaBackend::attention_dense(const AttentionDenseArgs& a) {
  const bool biased = a.q_bias || a.k_bias || a.v_bias;
  BRISK_CHECK(!biased || attention_dense_bias(a),
              "attention_dense: q / k / v biases given where attention_dense_bias() is false");
  if (flags().no_cuda_dense_attention || !cuda::attention_dense_supported(a)) return false;
  BRISK_CHECK(a.n_head_kv > 0 && a.n_head % a.n_head_kv == 0 && a.window >= 0, "attention_dense: ", a.n_head,
              " heads are not a multiple of ", a.n_head_kv, " KV heads, or window ", a.window, " < 0");
  AttentionDenseArgs d = a;
  int64_t max_len = a.q.rows / a.n_seq;
  if (a.seq_start) {
    // Packed sequences: the starts are checked here on the host and read by the kernel from the
    // step's device copy.
    BRISK_CHECK(a.seq_start[0] == 0 && a.seq_start[a.n_seq] == a.q.rows, "attention_dense: sequence starts span [",
                a.seq_start[0], ", ", a.seq_start[a.n_seq], "), the rows are [0, ", a.q.rows, ")");
    for (int32_t s = 0; s < a.n_seq; ++s)
      BRISK_CHECK(a.seq_start[s + 1] > a.seq_start[s], "attention_dense: sequence ", s, " is empty or out of order");
    max_len = a.max_seq_len();
    d.seq_start = stage(a.seq_start, int64_t(a.n_seq) + 1, "attention_dense seq_start");
  }
  const int64_t qw = int64_t(a.n_head) * a.head_dim, kvw = int64_t(a.n_head_kv) * a.head_dim;
  check_mat(a.q, a.q.rows, qw, "attention_dense", "q");
  check_mat(a.k, a.q.rows, kvw, "attention_dense", "k");
  check_mat(a.v, a.q.rows, kvw, "attention_dense", "v");
  check_mat(a.out, a.q.rows, qw, "attention_dense", "out");
  BRISK_CHECK(!overlaps(a.out, a.q) && !overlaps(a.out, a.k) && !overlaps(a.out, a.v),
              "attention_dense: out overlaps q, k or v");
  if (a.q_bias) d.q_bias = device_floats(a.q_bias, qw, "attention_dense q bias");
  if (a.k_bias) d.k_bias = device_floats(a.k_bias, kvw, "attention_dense k bias");
  if (a.v_bias) d.v_bias = device_floats(a.v_bias, kvw, "attention_dense v bias");
  key_.add(uint64_t(24));
  key_.add(a.out);
  key_.add(a.q);
  key_.add(a.k);
  key_.add(a.v);
  key_.add(uint64_t(a.n_seq));
  key_.add(d.seq_start);
  key_.add(uint64_t(max_len));
  key_.add(uint64_t(a.n_head));
  key_.add(uint64_t(a.n_head_kv));
  key_.add(uint64_t(a.head_dim));
  key_.add(a.scale);
  key_.add(uint64_t(a.window));
  key_.add(d.q_bias);
  key_.add(d.k_bias);
  key_.add(d.v_bias);
  forget_quant();
  if (biased || (!flags().no_cuda_dense_attention_tc && cuda::attention_dense_tc_supported(d))) {
    key_.add(uint64_t(112));
    if (epilogue_on()) {
      // Waits for the next op: a GEMM of its output takes the BF16 rows from this launch.
      settle_epilogue();
      epi_ = Epilogue{.kind = 4, .attn = d, .attn_max_len = max_len,
                      .attn_out_dead = a.out_for_matmul && !flags().no_cuda_skip_dead_writes};
      return true;
    }
    enqueue("attention_dense (tensor cores)",
            [d, max_len](cudaStream_t s) { return cuda::launch_attention_dense_tc(d, max_len, s); });
    return true;
  }
  enqueue("attention_dense", [d, max_len](cudaStream_t s) { return cuda::launch_attention_dense(d, max_len, s); });
  return true;
}

bool CudaBackend::mean_rows(const MeanRowsArgs& a) {
  BRISK_CHECK(a.n_seq > 0 && a.n_seq <= 65535 && a.seq_start && a.seq_start[0] == 0 && a.seq_start[a.n_seq] == a.x.rows,
              "mean_rows: ", a.n_seq, " sequences do not span the ", a.x.rows, " rows");
  for (int32_t s = 0; s < a.n_seq; ++s)
    BRISK_CHECK(a.seq_start[s + 1] > a.seq_start[s], "mean_rows: sequence ", s, " is empty or out of order");
  check_mat(a.out, a.n_seq, a.x.cols, "mean_rows", "out");
  BRISK_CHECK(a.x.data != nullptr, "mean_rows: no x");
  MeanRowsArgs d = a;
  d.seq_start = stage(a.seq_start, int64_t(a.n_seq) + 1, "mean_rows seq_start");
  key_.add(uint64_t(25));
  key_.add(d.out);
  key_.add(d.x);
  key_.add(uint64_t(d.n_seq));
  key_.add(d.seq_start);
  forget_quant();
  enqueue("mean_rows", [d](cudaStream_t s) { return cuda::launch_mean_rows(d, s); });
  return true;
}

}  // namespace brisk::cuda
