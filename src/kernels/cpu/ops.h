// CPU kernels of the Backend ops, each processing the share (ith of nth) of its rows so that
// the CPU backend can run it on a thread pool. Scratch memory is passed in by the backend
// (planned, never allocated inside a kernel). The scalar references these are tested against
// are in kernels/cpu/ref.h.
#pragma once
#include <atomic>
#include <cstdint>
#include <vector>

#include "core/op_args.h"
#include "quant/types.h"

namespace brisk::cpu {

// [begin, end) of n items for part ith of nth.
inline void split_range(int64_t n, int ith, int nth, int64_t* begin, int64_t* end) {
  const int64_t per = (n + nth - 1) / nth;
  *begin = per * ith < n ? per * ith : n;
  *end = *begin + per < n ? *begin + per : n;
}

// Part ith of nth of the (row, group of `group` columns) pairs of x, in row-major order:
// fn(row, first column). group 0: the whole row.
template <class Fn>
void for_each_group(const Mat& x, int64_t group, int ith, int nth, Fn fn) {
  if (group <= 0) group = x.cols;
  const int64_t n_groups = x.cols / group;
  int64_t begin, end;
  split_range(x.rows * n_groups, ith, nth, &begin, &end);
  for (int64_t g = begin; g < end; ++g) fn(g / n_groups, (g % n_groups) * group);
}

inline double sum_squares(const float* x, int64_t n) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * double(x[i]);
  return ss;
}

// Matmul: activations are first converted to the weight format's vec_dot_type
// (matmul_quantize_rows, split over rows of x; when the prefill GEMM will run, also repacked
// for it into `packed`, split over groups of 16 tokens), then each part computes a block of
// output features for every token (matmul_rows).
size_t matmul_act_row_bytes(QuantType weight_type, int64_t n_in);
size_t matmul_packed_bytes(const MatmulArgs& a);  // 0: this matmul does not use the GEMM
// True when b can run on the activations quantized (and packed) for a: same input, same
// activation format, and both on the GEMM with one packing or neither on it.
bool matmul_shares_input(const MatmulArgs& a, const MatmulArgs& b);
void matmul_quantize_rows(const MatmulArgs& a, void* act, void* packed, int ith, int nth);
// act_epoch: 0, or an epoch of kernels::new_activation_epoch() taken when act was quantized, so
// that a thread reuses the activations its GEMV kernel prepared from act (see GemvMultiParams).
void matmul_rows(const MatmulArgs& a, const void* act, const void* packed, int ith, int nth, uint64_t act_epoch = 0);
// Part ith of nth of the rows of n matmuls that share one input. Decode (at most 8 tokens, no
// GEMM): the matmuls' rows as one sequence cut into nth contiguous parts, so that a part of q /
// k / v starts fewer weight streams (BRISK_NO_JOINT_SPLIT: each matmul split on its own, as
// prefill does).
void matmul_list_rows(const MatmulArgs* list, int n, const void* act, const void* packed, int ith, int nth,
                      uint64_t act_epoch = 0);
// Decode split with work stealing, for matmuls whose weights take milliseconds to stream: on a
// machine shared with other work one core often runs slower than the other for a while, and
// with fixed shares the faster part then waits at the end of the region. Part ith starts on the
// same contiguous share of the row tiles as matmul_list_rows but claims it in pieces, half of
// what is left each time (at least claims.min_piece tiles); once its share is claimed it takes
// pieces, half of what is left, from the back of the others' shares. Every tile runs once, as
// matmul_list_rows would run it (the same bits: each row's result does not depend on the rows
// computed with it). TileClaims holds the shares' unclaimed ranges for one region.
struct TileClaims {
  static constexpr int kMaxParts = 64;
  std::atomic<uint64_t> range[kMaxParts];  // unclaimed tiles of part i: [lo, hi) packed as lo | hi << 32
  int64_t min_piece = 1;                   // tiles
};
// Sets claims up for a balanced split of the list over nth parts and returns true, or returns
// false where the fixed split runs: prefill (more than 8 tokens) or the prefill GEMM, one part,
// more parts than kMaxParts, shares of less than min_share_bytes of weights, or
// BRISK_NO_BALANCED_SPLIT. min_piece_bytes: the smallest piece (rounded to whole tiles).
bool matmul_balanced_split(const MatmulArgs* list, int n, const void* packed, int nth, TileClaims& claims,
                           size_t min_share_bytes = size_t(1) << 20, size_t min_piece_bytes = size_t(128) << 10);
void matmul_list_rows_balanced(const MatmulArgs* list, int n, const void* act, const void* packed, int ith, int nth,
                               TileClaims& claims, uint64_t act_epoch = 0);

void rms_norm_rows(const RmsNormArgs& a, int ith, int nth);
void rope_rows(const RopeArgs& a, int ith, int nth);
void kv_store_rows(const KvStoreArgs& a, int ith, int nth);
// Elements [col0, col0 + n) of position pos of sequence seq of a KV view as floats (any layout;
// col0 and n whole blocks of the view's type), and a whole row written from floats.
void kv_read_f32(const KvView& v, int64_t seq, int64_t pos, int64_t col0, int64_t n, float* out);
void kv_write_f32(const KvView& v, int64_t seq, int64_t pos, const float* src);
// scratch: at least attention_scratch_floats(head_dim) floats for this part.
// Bytes from the start of a KV cache row to element `offset` (a multiple of the block size).
inline size_t kv_segment_offset(const KvView& v, int64_t offset) {
  const QuantTypeInfo& info = quant_type_info(v.type);
  return size_t(offset / info.block_size) * info.type_size;
}
int64_t attention_scratch_floats(int32_t head_dim);
// The items (token t, one of per_token heads or head groups), t-major, of part ith of nth:
// contiguous ranges of about equal cost, an item costing the positions token t sees (plus a
// constant), so that the parts of a causal prefill get equal work rather than equal item counts.
void attention_split_items(const AttentionArgs& a, int64_t per_token, int ith, int nth, int64_t* begin, int64_t* end);
void attention_rows(const AttentionArgs& a, float* scratch, int ith, int nth);
// AVX2/FMA/F16C variant (attention_avx2.cpp); head_dim % 8 == 0. Callers check the CPU.
void attention_rows_avx2(const AttentionArgs& a, float* scratch, int ith, int nth);
// AVX-512 variant (attention_avx512.cpp): work split over (token, KV head) pairs, positions in
// tiles of 16; only where attention_avx512_supports(head_dim, n_head / n_head_kv). scratch: attention_avx512_scratch_floats(n_head / n_head_kv,
// head_dim) floats for this part. Callers check the CPU.
bool attention_avx512_supports(int32_t head_dim, int32_t group);
int64_t attention_avx512_scratch_floats(int32_t group, int32_t head_dim);
void attention_rows_avx512(const AttentionArgs& a, float* scratch, int ith, int nth);
// Split decode (one token, few KV heads, long context): parts > 1 when it applies; part ith of
// nth takes a contiguous range of positions for every KV head and leaves per-head partial
// softmax results in partials + ith * attention_split_partial_floats(a); attention_merge_split
// then combines the nth parts into a.out (log-sum-exp rescaling).
int attention_avx512_split_parts(const AttentionArgs& a, int n_threads);
int64_t attention_split_partial_floats(const AttentionArgs& a);
void attention_split_avx512(const AttentionArgs& a, float* scratch, float* partials, int ith, int nth);
void attention_merge_split(const AttentionArgs& a, const float* partials, int parts);
void gated_act_rows(const GatedActArgs& a, int ith, int nth);
void gated_act_rows_avx512(const GatedActArgs& a, int ith, int nth);  // elementwise_avx512.cpp
void add_rows(const AddArgs& a, int ith, int nth);
void scale_rows(const ScaleArgs& a, int ith, int nth);
void embedding_rows(const EmbeddingArgs& a, int ith, int nth);
void get_rows_rows(const GetRowsArgs& a, int ith, int nth);
// MoE routing (kernels/cpu/moe.cpp): for each token of the share, the chosen experts
// ids[t * n_used + k] and their weights w[t * n_used + k] (times expert_scale when given), in
// descending probability.
void moe_route_rows(const MoeArgs& a, int32_t* ids, float* w, int ith, int nth);
// x := cap * tanh(x / cap) in place. The parts split the elements (a decode step's logits are
// one long row); simd: the AVX-512 span (softcap_span_avx512), else std::tanh per element.
void softcap_rows(const SoftcapArgs& a, bool simd, int ith, int nth);
void softcap_span_avx512(float* x, int64_t n, float cap);  // elementwise_avx512.cpp

// Linear-attention ops (kernels/cpu/delta_net.cpp). A batch's tokens grouped by sequence: run i
// is slot seq[i]'s tokens, tokens[offset[i], offset[i + 1]) in batch order (seq_runs_build, a
// stable counting sort; throws for a sequence id outside [0, n_slots)).
struct SeqRuns {
  std::vector<int32_t> seq;     // [n_runs] state slot of each run
  std::vector<int32_t> offset;  // [n_runs + 1] into tokens
  std::vector<int32_t> tokens;  // [n_tok] batch indices
  std::vector<int32_t> count;   // scratch of the build
  int64_t n_runs() const { return int64_t(seq.size()); }
};
void seq_runs_build(const int32_t* seq, int64_t n_tok, int32_t n_slots, SeqRuns& runs);
// Items (run, block of 64 channels); kernel <= 16.
void conv_state_rows(const ConvStateArgs& a, const SeqRuns& runs, int ith, int nth);
void l2_norm_rows(const L2NormArgs& a, int ith, int nth);
void gated_rms_norm_rows(const GatedRmsNormArgs& a, int ith, int nth);
void sigmoid_mul_rows(const SigmoidMulArgs& a, int ith, int nth);
// Items (run, value head): runs of one token step by step, longer runs in chunks of 64 unless
// !chunked. scratch: delta_rule_scratch_floats(a) floats for this part.
int64_t delta_rule_scratch_floats(const DeltaRuleArgs& a);
void delta_rule_rows(const DeltaRuleArgs& a, const SeqRuns& runs, float* scratch, bool chunked, int ith, int nth);

// Element conversions shared by the kernels (KV cache rows, embedding rows).
// Converts n elements of `src` (in `type`) to float32.
void row_to_f32(QuantType type, const void* src, float* dst, int64_t n);
// Converts n float32 values into `type` (F32, F16, BF16 or a format with a reference quantizer).
void row_from_f32(QuantType type, const float* src, void* dst, int64_t n);

float silu(float x);
float gelu_tanh(float x);

}  // namespace brisk::cpu
