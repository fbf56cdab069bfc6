// Launchers of the CUDA kernels, one op family per .cu file. Every pointer inside the
// argument structs (including Weight::data, bias, norm weights, ids/pos/seq) must already be
// device memory (weights in the device layout of dequant.cuh); the backend
// (backend/cuda/cuda_backend.cpp) uploads and checks them. Each
// launcher enqueues on `stream` and returns the launch status (cudaGetLastError).
#pragma once
#include <cuda_runtime.h>

#include "core/op_args.h"
#include "quant/types.h"

namespace brisk::cuda {

// True for the weight formats the matmul and embedding kernels decode directly.
bool weight_format_on_device(QuantType t);
// True for the formats whose matmul takes activations quantized to int8 (Q8_0, Q4_0, Q4_K,
// Q6_K); the others take float activations.
bool weight_takes_quantized_act(QuantType t);
// Bytes of a weight in the device layout (dequant.cuh), and whether that layout differs from
// the stored rows (then launch_repack_weight converts stored rows, already on the device).
size_t device_weight_bytes(QuantType t, int64_t n_in, int64_t n_out);
bool weight_repacked(QuantType t);
cudaError_t launch_repack_weight(QuantType t, const void* stored, size_t stored_row_bytes, void* dst, int64_t n_in,
                                 int64_t n_out, cudaStream_t stream);

// Activations quantized for the dp4a matmul: q [rows, n_in] int8 (dense), d [rows, n_in / block].
struct QuantAct {
  const int8_t* q = nullptr;
  const float* d = nullptr;
};

// How activations are rounded before a matmul, as the CPU backend does: through the weight
// format's vec_dot_type (Q8_0 for Q8_0/Q4_0 weights, Q8_K for K-quants, F16 for F16, ...).
enum class ActRound { none, f16, bf16, q8_0, q8_k };
ActRound act_round_for(QuantType vec_dot_type);
// dst [x.rows, x.cols] (dense) = x rounded through `kind`; x.cols a multiple of its block.
cudaError_t launch_round_activations(ActRound kind, float* dst, const Mat& x, cudaStream_t stream);
// dst = x quantized through `kind` (q8_0 or q8_k only).
cudaError_t launch_quantize_activations(ActRound kind, const QuantAct& dst, const Mat& x, cudaStream_t stream);

// Weights in the device layout; xq: quantized activations when weight_takes_quantized_act,
// else nullptr and a.x holds the (rounded) float activations. weights_constant: no kernel
// writes a.w while this launch may run, so its loads may start before the previous kernel ends.
cudaError_t launch_matmul(const MatmulArgs& a, const QuantAct* xq, cudaStream_t stream, bool weights_constant = false);
// launch_matmul, and the residual add that follows it in the same launch: sum = residual +
// a.out ([a.out.rows, w.n_out] each; sum may be residual, neither may overlap a.x or a.out),
// exactly as launch_add would write it after launch_matmul.
cudaError_t launch_matmul_add(const MatmulArgs& a, const QuantAct* xq, const Mat& residual, const Mat& sum,
                              cudaStream_t stream, bool weights_constant = false);
// Up to kMaxMatmulParts matmuls on the same input (same x, weight format and row length; xq
// shared) in one launch, each output as launch_matmul would write it.
constexpr int kMaxMatmulParts = 3;
bool matmuls_share_launch(const MatmulArgs& a, const MatmulArgs& b);
cudaError_t launch_matmuls(const MatmulArgs* a, int n, const QuantAct* xq, cudaStream_t stream,
                           bool weights_constant = false);
cudaError_t launch_embedding(const EmbeddingArgs& a, cudaStream_t stream);
// barrier (here and in the fused norms below): two zeroed unsigned ints of device memory, left
// zero / counted on by each launch, that let a norm written in place run one row on several
// blocks; null keeps such a row on one block (same results). Launches that share a barrier
// must not run concurrently.
// weight_constant: no kernel writes a.weight while this launch may run (read before the
// previous kernel ends).
cudaError_t launch_rms_norm(const RmsNormArgs& a, cudaStream_t stream, unsigned* barrier = nullptr,
                            bool weight_constant = false);
// Up to kMaxNormParts independent norms over head groups of one group size in one launch (a
// layer's q / k / v norms; a one-head part below 1024 columns), each part's rows as
// launch_rms_norm computes them.
constexpr int kMaxNormParts = 4;
bool rms_norm_parts_supported(const RmsNormArgs& a);
cudaError_t launch_rms_norm_parts(const RmsNormArgs* parts, const bool* weight_constant, int n, cudaStream_t stream);
// inv_freq: device [table.n_rot / 2]
cudaError_t launch_rope(const RopeArgs& a, const float* inv_freq, cudaStream_t stream);
cudaError_t launch_kv_store(const KvStoreArgs& a, cudaStream_t stream);
// Rotary embedding of q (optional) and k, and the KV cache store of k (after rotation) and v
// (optional), in one launch; q, k and store share positions, head_dim and rotary table
// (k.table); store->k must be k.x. Results equal launch_rope + launch_rope + launch_kv_store.
cudaError_t launch_rope_qk_store(const RopeArgs* q, const RopeArgs& k, const KvStoreArgs* store, const float* inv_freq,
                                 cudaStream_t stream);
// Floats of scratch launch_attention needs for its split partial results (0: none); a
// function of the shapes and the cache capacity only, not of the positions.
size_t attention_scratch_floats(const AttentionArgs& a);
// Zeroed ints launch_attention may use to merge the splits in its own last block (0: none);
// the launch leaves them zero. With counters == nullptr a separate combine kernel merges them
// (same results).
size_t attention_counter_ints(const AttentionArgs& a);
cudaError_t launch_attention(const AttentionArgs& a, float* scratch, int* counters, cudaStream_t stream);
// launch_rope_qk_store (q = a.q, k, store of k and v into a's caches at a's seq / pos) and
// launch_attention in one launch, with the same results: for one token whose query heads form
// one group per KV head (attention_rope_supported); counters are needed when the launch splits.
struct AttentionRope {
  float* k = nullptr;  // [tokens, n_head_kv * head_dim]; one token: rotated in place (several: left as is)
  int64_t k_stride = 0;
  const float* v = nullptr;  // [tokens, n_head_kv * head_dim]
  int64_t v_stride = 0;
  const float* inv_freq = nullptr;  // device [n_rot / 2]
  int n_rot = 0;
  float attn_factor = 1.0f;
  bool neox = false;
};
bool attention_rope_supported(const AttentionArgs& a, int n_rot);
// The attention output also quantized (q8_0 / q8_k, into q) or rounded (f16 / bf16, into q.d as
// dense floats) for the matmul that reads it, in the same launch, exactly as
// launch_quantize_activations / launch_round_activations would: for the cluster launches (1..8
// tokens) that attention_quant_supported accepts.
struct AttentionQuant {
  ActRound kind = ActRound::none;
  QuantAct q;
};
bool attention_quant_supported(const AttentionArgs& a, ActRound kind);
cudaError_t launch_attention_rope(const AttentionArgs& a, const AttentionRope* rope, float* scratch, int* counters,
                                  cudaStream_t stream, const AttentionQuant* quant = nullptr);
cudaError_t launch_gated_act(const GatedActArgs& a, cudaStream_t stream);
// Fused producers of a matmul's quantized activations: the op as above (RMS norm over whole
// rows only), then its output quantized through `kind` (q8_0 / q8_k) into q, exactly as
// launch_quantize_activations would; with kind f16 / bf16, the output rounded through that type
// into q.d (dense floats; q.q unused), exactly as launch_round_activations would.
cudaError_t launch_rms_norm_quant(const RmsNormArgs& a, ActRound kind, const QuantAct& q, cudaStream_t stream,
                                  unsigned* barrier = nullptr, bool weight_constant = false);
// The residual add before a whole-row RMS norm in the same launch: add->out = add->a + add->b
// (a.x must be add->out), then the norm of it, quantized into *q too when q is not null.
cudaError_t launch_add_rms_norm(const AddArgs* add, const RmsNormArgs& a, ActRound kind, const QuantAct* q,
                                cudaStream_t stream, unsigned* barrier = nullptr, bool weight_constant = false);
cudaError_t launch_gated_act_quant(const GatedActArgs& a, ActRound kind, const QuantAct& q, cudaStream_t stream);
cudaError_t launch_add(const AddArgs& a, cudaStream_t stream);
cudaError_t launch_softcap(const SoftcapArgs& a, cudaStream_t stream);
cudaError_t launch_scale(const ScaleArgs& a, cudaStream_t stream);
cudaError_t launch_get_rows(const GetRowsArgs& a, cudaStream_t stream);

// Encoder ops (encoder_ops.cu, attention_dense.cu), F32 rows of any width (Mat strides kept);
// weights, biases, q / k / v, seq / pos and the cache are device memory.
cudaError_t launch_layer_norm(const LayerNormArgs& a, cudaStream_t stream);
cudaError_t launch_unary(const UnaryArgs& a, cudaStream_t stream);
// The encoders' GEMM epilogues (the CUDA backend fuses them, same bits as the separate launches):
// ln.out = LayerNorm(x), x = a + (b + b_bias) when has_add (written to `sum` when its data is
// set), else ln.x; xb (when set): a dense BF16 copy [rows, cols] of ln.out.
struct EncoderNormArgs {
  LayerNormArgs ln{};
  bool has_add = false;
  Mat a{}, b{};                   // [rows, cols]: the residual and a matmul's output
  const float* b_bias = nullptr;  // [cols]: the matmul's bias, or nullptr
  bool write_b = false;           // b + b_bias written back to b (b must not alias a)
  Mat sum{};                      // [rows, cols] or data nullptr
  uint16_t* xb = nullptr;         // [rows, cols] BF16 or nullptr
};
cudaError_t launch_encoder_norm(const EncoderNormArgs& a, cudaStream_t stream);
// out = op(x + bias) (bias: [cols] or nullptr; op only when act); xb: a dense BF16 copy of out.
struct BiasActArgs {
  Mat out{};                      // [rows, cols] (may alias x)
  Mat x{};                        // [rows, cols]
  const float* bias = nullptr;
  bool act = true;
  UnaryOp op = UnaryOp::gelu_erf;
  uint16_t* xb = nullptr;
  bool write_out = true;          // false: only xb is written (out is read by nothing else)
};
cudaError_t launch_bias_act(const BiasActArgs& a, cudaStream_t stream);
// a.seq_start in device memory.
cudaError_t launch_mean_rows(const MeanRowsArgs& a, cudaStream_t stream);
cudaError_t launch_im2col(const Im2colArgs& a, int64_t frames_out, cudaStream_t stream);
cudaError_t launch_attention_weights(const AttentionWeightsArgs& a, cudaStream_t stream);  // head_dim floats of smem
constexpr int kDenseMaxHeadDim = 256;
bool attention_dense_supported(const AttentionDenseArgs& a);
// a.seq_start (when given) in device memory; max_len: the longest sequence's rows.
cudaError_t launch_attention_dense(const AttentionDenseArgs& a, int64_t max_len, cudaStream_t stream);
// The same on the tensor cores (attention_dense_tc.cu: split BF16 operands, ~1e-5 relative of
// the FP32 kernel): head_dim 16 / 32 / 64 / 128, k / v rows 16-byte aligned; the one of the two
// that takes the q / k / v biases (device arrays).
bool attention_dense_tc_supported(const AttentionDenseArgs& a);
// What the tensor-core attention writes besides / instead of a.out: xb, a dense BF16 copy
// [rows, n_head * head_dim] of out (the next GEMM's input); write_out false leaves out unwritten.
struct DenseAttentionOut {
  uint16_t* xb = nullptr;
  bool write_out = true;
};
cudaError_t launch_attention_dense_tc(const AttentionDenseArgs& a, int64_t max_len, cudaStream_t stream,
                                      const DenseAttentionOut& extra = {});

// Linear-attention ops (delta_net.cu, delta_rule.cu): seq / pos are the step's device arrays,
// state views device memory; sequences are found on the device, so these need no host plan.
cudaError_t launch_conv_state(const ConvStateArgs& a, cudaStream_t stream);  // kernel <= 16
// Column ranges of a conv's output L2-normalised in place per group of `group` columns (a
// delta-net layer's q and k views); ranges and the row start on whole groups.
struct ConvL2Ranges {
  int64_t col0[2] = {0, 0};
  int64_t cols[2] = {0, 0};
  float eps[2] = {0.0f, 0.0f};
  int n = 0;
  int64_t group = 0;
};
// launch_conv_state, then launch_l2_norm on each range in place, in the conv's launch (same bits);
// groups of a multiple of 32 channels, at most 1024.
bool conv_l2_group_supported(int64_t group);
cudaError_t launch_conv_state_l2(const ConvStateArgs& a, const ConvL2Ranges& r, cudaStream_t stream);
cudaError_t launch_l2_norm(const L2NormArgs& a, cudaStream_t stream);
// Two independent L2 norms (a delta-net layer's q and k) in one launch, each as launch_l2_norm.
cudaError_t launch_l2_norm_pair(const L2NormArgs& a, const L2NormArgs& b, cudaStream_t stream);
cudaError_t launch_gated_rms_norm(const GatedRmsNormArgs& a, cudaStream_t stream);  // weight device
cudaError_t launch_sigmoid_mul(const SigmoidMulArgs& a, cudaStream_t stream);
// The gated delta rule: k_dim at most kDeltaMaxKeyDim (the state column in registers), at most
// 65535 tokens and value heads a launch. decay_rate / dt_bias are device arrays.
constexpr int kDeltaMaxKeyDim = 256;
bool delta_rule_supported(const DeltaRuleArgs& a);
// Recurrent form, any mix of sequences (the first token of each in the batch runs its tokens).
cudaError_t launch_delta_rule_recurrent(const DeltaRuleArgs& a, cudaStream_t stream);
// Chunked form: the batch's tokens grouped by sequence (runs, in batch order within a run) and
// cut into chunks of at most 64 tokens, all in device memory.
struct DeltaChunkPlan {
  const int32_t* tokens = nullptr;  // [n_tok] token indices, run after run
  const int32_t* chunks = nullptr;  // [n_chunks][3] first index into tokens, tokens (1..64), run
  const int32_t* runs = nullptr;    // [n_runs][2] first chunk, chunks
  int32_t n_chunks = 0;
  int32_t n_runs = 0;
  float* scratch = nullptr;         // delta_rule_chunk_scratch_floats(a) floats
};
size_t delta_rule_chunk_scratch_floats(const DeltaRuleArgs& a);
cudaError_t launch_delta_rule_chunked(const DeltaRuleArgs& a, const DeltaChunkPlan& plan, cudaStream_t stream);

// Mixture of experts (MoeArgs) as four launches with no host decision in between:
// launch_moe_route picks each token's experts on the device (ids [n_tok, n_used], weights
// [n_tok, n_used]: the CPU's softmax, top-k with ties to the lower id, renormalization);
// launch_moe_matmul runs one matmul per (token, slot) pair on the expert its id names;
// launch_moe_combine sums each token's expert outputs weighted, in expert id order as the CPU
// backend does. n_expert <= kMoeMaxExperts, n_used <= kMoeMaxUsed.
constexpr int kMoeMaxExperts = 1024;
constexpr int kMoeMaxUsed = 64;
// With quant q8_0 / q8_k, the same launch also quantizes x [n_tok, n_in] into *q exactly as
// launch_quantize_activations(quant, *q, *x) would. expert_scale (device [n_expert], or
// nullptr): each chosen weight times its expert's factor after the renormalization
// (MoeArgs::expert_scale). With `shared`, ids / w hold n_used + 1 slots a token, the last one
// the shared expert's: id n_expert, weight sigmoid(logit[t * stride]) (1 where logit is null);
// the expert tables then hold n_expert + 1 entries.
struct MoeSharedSlot {
  const float* logit = nullptr;  // [n_tok] (stride) device, or nullptr: weight 1
  int64_t stride = 1;
};
cudaError_t launch_moe_route(const Mat& logits, int n_expert, int n_used, bool norm_topk, int32_t* ids, float* w,
                             cudaStream_t stream, ActRound quant = ActRound::none, const QuantAct* q = nullptr,
                             const Mat* x = nullptr, const float* expert_scale = nullptr,
                             const MoeSharedSlot* shared = nullptr);
struct MoeMatmulArgs {
  const void* const* w = nullptr;  // device [n_expert]: each expert's weight in the device layout of `type`
  QuantType type = QuantType::F32;  // device format (weight_format_on_device)
  int64_t n_in = 0, n_out = 0;
  int32_t n_expert = 0;
  const int32_t* ids = nullptr;  // device [n_pairs]: the expert of each pair (out of range: output 0)
  int64_t n_pairs = 0;
  int32_t n_used = 0;
  bool x_per_pair = false;       // pair i reads x row i (else row i / n_used, its token)
  QuantAct xq;                   // quantized x [rows, n_in] when weight_takes_quantized_act(type)
  const float* x = nullptr;      // else float x (16-byte aligned rows)
  int64_t x_stride = 0;
  float* out = nullptr;          // [n_pairs, n_out] dense
  // A second matrix of the same format and shape on the same input in the same launch (the
  // up projection next to the gate): its table and output (nullptr: none).
  const void* const* w2 = nullptr;
  float* out2 = nullptr;
  int row_lanes = 0;             // lanes a row, 8 / 16 / 32 (0: as few as take a row in one pass)
};
cudaError_t launch_moe_matmul(const MoeMatmulArgs& a, cudaStream_t stream);
// The down projection of every pair (x one row per pair, w2 unused) and launch_moe_combine of
// its outputs with weights w into out [n_tok, n_out] in one launch (n_pairs = n_tok * n_used):
// the same bits as launch_moe_matmul then launch_moe_combine.
cudaError_t launch_moe_matmul_combine(const MoeMatmulArgs& a, const float* w, const Mat& out, cudaStream_t stream);
// Grouped expert matmuls (prefill): x (xq or x / x_stride) holds rows sorted by expert; items
// (device, [n_items][3] int32: expert, first row, rows 1..kMoeItemRows) name runs of rows that
// share an expert; out (and out2 with w2) [rows, n_out] in the same row order. ids / n_pairs /
// x_per_pair are unused. Each row gets the bits launch_moe_matmul gives its pair.
// With n_items_dev (device): launched for n_items runs, of which the first *n_items_dev exist.
constexpr int kMoeItemRows = 8;
cudaError_t launch_moe_items(const MoeMatmulArgs& a, const int32_t* items, int64_t n_items, cudaStream_t stream,
                             const int32_t* n_items_dev = nullptr);
// The grouped expert matmuls of launch_moe_items on the tensor cores (moe_mma.cu): float x
// rows (x / x_stride, 16-byte aligned) rounded to BF16, each item's weight tile decoded to
// BF16 once for its rows (items of 1..kMoeMmaRows rows), FP32 sums: the prefill GEMM's
// precision, not launch_moe_items' bits. moe_items_mma_fits says which inputs it takes
// (not F32 weights: those keep FP32 products).
constexpr int kMoeMmaRows = 32;
bool moe_items_mma_fits(QuantType type, int64_t n_in, int64_t x_stride);
cudaError_t launch_moe_items_mma(const MoeMatmulArgs& a, const int32_t* items, int64_t n_items, cudaStream_t stream);
// The pairs grouped by expert without the host (moe_group_kernel in moe.cu): from ids [nk]
// (n_used a token), row_tok [nk], pair_row [nk], items [moe_group_max_items][3], n_items [1].
int64_t moe_group_max_items(int64_t nk, int n_expert);
cudaError_t launch_moe_group(const int32_t* ids, int64_t nk, int n_used, int n_expert, int32_t* row_tok,
                             int32_t* pair_row, int32_t* items, int32_t* n_items, cudaStream_t stream);
// out [n_tok, n_embd] = sum over each token's slots, in expert id order, of w * d[token * n_used + slot].
// With rows (device [n_tok * n_used]): pair i's output is row rows[i] of d, and a pair whose
// row is negative adds nothing.
cudaError_t launch_moe_combine(const Mat& out, const float* d, const int32_t* ids, const float* w, int n_used,
                               cudaStream_t stream, const int32_t* rows = nullptr);
// out[tok[j]] += w[pair[j]] * d[j] for the m rows of d ([m, out.cols] dense): one expert's
// outputs added to their tokens (each token at most once per launch).
cudaError_t launch_moe_scatter_add(const Mat& out, const float* d, int64_t m, const int32_t* tok, const int32_t* pair,
                                   const float* w, cudaStream_t stream);

}  // namespace brisk::cuda
