// The argument structs of the Backend ops (backend/backend.h) and of the kernels that carry
// them out: plain views (core/tensor_view.h) and scalars, filled with designated initializers.
// They live below both the backends and the kernels so that neither reaches up for them.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor_view.h"

namespace brisk {

// Rotary embedding frequencies resolved at load time (scaling already applied):
// theta_i(pos) = pos * inv_freq[i], i in [0, n_rot/2); outputs scaled by attn_factor.
struct RopeTable {
  int32_t n_rot = 0;               // rotated dims per head (<= head_dim: partial rotary)
  std::vector<float> inv_freq;     // [n_rot / 2]
  float attn_factor = 1.0f;        // YaRN magnitude scale of cos/sin
  bool neox = false;               // pairs (i, i + n_rot/2) instead of (2i, 2i+1)
};

// One logits row's sampling for Backend::sample_rows, in the host sampler's terms
// (runtime/sampler.h): edits first (in order), then NaN banned, +inf only, greedy or top-k ->
// top-p -> min-p -> temperature -> the draw at u.
struct DeviceSampleEdit {
  int32_t token = 0;
  int32_t count = 0;  // > 0: a penalty for `count` occurrences in the window; 0: add `bias`
  float bias = 0.0f;  // -inf bans
};
constexpr int32_t kDeviceSampleMaxTopK = 1024;
struct DeviceSampleSpec {
  float temperature = 0.0f;  // <= 0, or 1 / temperature not finite: greedy
  int32_t top_k = 0;         // 1..kDeviceSampleMaxTopK (unused when greedy)
  float top_p = 1.0f;        // >= 1: off
  float min_p = 0.0f;        // <= 0: off
  float repeat_penalty = 1.0f, presence_penalty = 0.0f, frequency_penalty = 0.0f;
  int32_t edit_offset = 0, n_edits = 0;
  double u = 0.0;  // the uniform draw in [0, 1)
};

struct MatmulArgs {
  Mat out;              // [n_tok, w.n_out]
  Mat x;                // [n_tok, w.n_in]
  Weight w;             // [n_out, n_in]
  const float* bias = nullptr;  // [n_out] or nullptr
};

struct RmsNormArgs {
  Mat out;                        // [rows, cols] (may alias x)
  Mat x;                          // [rows, cols]; normalized in groups of `group` columns
  const float* weight = nullptr;  // [group] or nullptr
  int64_t group = 0;              // 0: cols (whole row); head_dim for per-head q/k norm
  float eps = 1e-6f;
};

struct RopeArgs {
  Mat x;                          // [n_tok, n_head * head_dim], rotated in place
  const int32_t* pos = nullptr;   // [n_tok]
  int32_t n_head = 0;
  int32_t head_dim = 0;
  const RopeTable* table = nullptr;
};

struct KvStoreArgs {
  Mat k;                          // [n_tok, width]
  Mat v;                          // [n_tok, width]
  KvView k_cache;
  KvView v_cache;
  const int32_t* seq = nullptr;   // [n_tok]
  const int32_t* pos = nullptr;   // [n_tok]
};

struct AttentionArgs {
  Mat out;                        // [n_tok, n_head * head_dim]
  Mat q;                          // [n_tok, n_head * head_dim] (rope applied)
  KvView k_cache;                 // paged [n_seq, capacity, n_head_kv * head_dim]
  KvView v_cache;
  const int32_t* seq = nullptr;   // [n_tok]
  const int32_t* pos = nullptr;   // [n_tok]: attends to positions [max(0, pos-window+1), pos]
  // [n_tok] or nullptr: the first position each token attends to instead (then [first, pos]):
  // bidirectional attention (an embedding model's decoder), where pos is the last position the
  // token sees, after its own; every one of them must be stored first.
  const int32_t* first = nullptr;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;          // n_head % n_head_kv == 0 (GQA)
  int32_t head_dim = 0;
  float scale = 1.0f;             // usually 1/sqrt(head_dim)
  int32_t window = 0;             // sliding window in positions; 0: full causal
  float softcap = 0.0f;           // tanh soft-capping of scores; 0: off
  // The first position token t attends to.
  int64_t key_begin(int64_t t) const {
    if (first) return first[t];
    const int64_t p = pos[t];
    return window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
  }
};

enum class Activation { silu, gelu_tanh, gelu_erf };  // of the gate; gelu_erf: x / 2 * (1 + erf(x / sqrt(2)))

struct GatedActArgs {
  Mat out;    // [rows, cols] = act(gate) * up
  Mat gate;   // [rows, cols]
  Mat up;     // [rows, cols]
  Activation act = Activation::silu;
};

struct AddArgs {
  Mat out;    // [rows, cols] = a + b (may alias a or b)
  Mat a;
  Mat b;
  // b is not read again before it is overwritten: a backend may leave it unfinished (a bias of
  // the matmul that wrote it, added inside this add, not stored back into b).
  bool b_dead = false;
};

struct EmbeddingArgs {
  Mat out;                        // [n_tok, w.n_in]
  Weight table;                   // [n_vocab, n_embd] in any format
  const int32_t* ids = nullptr;   // [n_tok], each in [0, n_vocab) (checked by the caller)
  float scale = 1.0f;             // multiplies the rows (Gemma: sqrt(n_embd))
};

struct GetRowsArgs {
  Mat out;                        // [n, cols]
  Mat x;                          // [rows, cols]
  const int32_t* rows = nullptr;  // [n]
};

// Mixture-of-experts SwiGLU / GeGLU MLP. Per token: p = softmax(logits), the n_used largest
// (ties: lower expert id first), renormalized to sum 1 when norm_topk, then multiplied by
// expert_scale[e] when given (Gemma 4's per-expert scale); then
//   out = sum_k p_k * down_e(act(gate_e(x)) * up_e(x))   over the chosen experts e.
// Routing happens inside the op on the device's own data (no host decision a GPU would
// sync on); the CPU backend gathers the tokens of each expert and runs them as one matmul.
struct MoeArgs {
  Mat out;                        // [n_tok, n_embd] (must not alias x)
  Mat x;                          // [n_tok, n_embd]
  Mat logits;                     // [n_tok, n_expert] router logits
  const Weight* gate = nullptr;   // [n_expert] views, each [n_ff_exp, n_embd]
  const Weight* up = nullptr;     // [n_expert] views, each [n_ff_exp, n_embd]
  const Weight* down = nullptr;   // [n_expert] views, each [n_embd, n_ff_exp]
  int32_t n_expert = 0;
  int32_t n_used = 0;             // top-k, 1 <= n_used <= n_expert
  bool norm_topk = true;
  Activation act = Activation::silu;
  const float* expert_scale = nullptr;  // [n_expert] factor of each chosen expert's weight, or nullptr
  // A shared expert that every token takes beside its routed ones, run in the same launches
  // (only where Backend::moe_shared_supported says so): out += g * down(act(gate x) * up x), with
  // g = sigmoid(shared_logit) per token, or 1 when shared_logit.data is null. Same shapes and
  // formats as the routed experts' views.
  const Weight* shared_gate = nullptr;  // [n_ff_exp, n_embd] or nullptr: no shared expert
  const Weight* shared_up = nullptr;    // [n_ff_exp, n_embd]
  const Weight* shared_down = nullptr;  // [n_embd, n_ff_exp]
  Mat shared_logit{};                   // [n_tok, 1] the shared expert's gate logit, or data = nullptr
};

struct ScaleArgs {
  Mat out;                        // [rows, cols] = x * scale (may alias x)
  Mat x;                          // [rows, cols]
  float scale = 1.0f;
};

struct SoftcapArgs {
  Mat x;                          // [rows, cols] := cap * tanh(x / cap), in place
  float cap = 0.0f;               // > 0
};

// One rank of a tensor-parallel group (backend/tp_comm.h): its index, the group's size and the
// backend's communicator for it (the CPU's in-process HostComm, NCCL's ncclComm_t on CUDA).
struct TpRank {
  int32_t rank = 0;
  int32_t world = 1;
  void* comm = nullptr;
};

// x := the elementwise sum of x over the ranks of the group, on every rank (each rank passes
// its own x of the same shape). The CPU sums in rank order 0..world-1, so every rank gets the
// same bits and a run is reproducible.
struct AllReduceArgs {
  Mat x;                          // [rows, cols] F32, in place
  const TpRank* tp = nullptr;
};

// Ops of encoder and encoder-decoder models (speech, embeddings). Backends without them keep
// the defaults, which throw "op X is not supported on the Y backend".

// out = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias, per row (biased variance).
struct LayerNormArgs {
  Mat out{};                      // [rows, cols] (may alias x)
  Mat x{};                        // [rows, cols]
  const float* weight = nullptr;  // [cols] or nullptr (1)
  const float* bias = nullptr;    // [cols] or nullptr (0)
  float eps = 1e-5f;
};

enum class UnaryOp {
  gelu_erf,   // x / 2 * (1 + erf(x / sqrt(2)))
  gelu_tanh,  // x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))
  tanh,       // tanh(x) (the pooler of classification heads)
};

struct UnaryArgs {
  Mat out{};                      // [rows, cols] = op(x) (may alias x)
  Mat x{};                        // [rows, cols]
  UnaryOp op = UnaryOp::gelu_erf;
  // out is read only as the input x of the next op, a matmul: a backend that hands that matmul
  // its input in another form (CUDA: BF16 rows) may leave out unwritten.
  bool out_for_matmul = false;
};

// Unfolds 1-D convolution inputs (im2col) so that a convolution becomes a matmul with its
// weight [n_out, cols * kernel] (PyTorch's Conv1d weight [n_out, cols, kernel] flattened).
// Rows of x are frames of n_seq independent sequences of frames_in frames each:
//   out[s * frames_out + t, c * kernel + k] = x[s * frames_in + t * stride + k - pad, c]
// (0 where that frame lies outside sequence s), frames_out = (frames_in + 2 pad - kernel) / stride + 1.
struct Im2colArgs {
  Mat out{};                      // [n_seq * frames_out, x.cols * kernel]
  Mat x{};                        // [n_seq * frames_in, cols]
  int32_t frames_in = 0;
  int32_t kernel = 1;
  int32_t stride = 1;
  int32_t pad = 0;
};

// The mean of each packed sequence's rows (an embedding model's mean pooling on the device):
// out[s] = sum over rows [seq_start[s], seq_start[s + 1]) of x, summed in order in double, / count.
struct MeanRowsArgs {
  Mat out{};                      // [n_seq, cols]
  Mat x{};                        // [rows, cols]
  int32_t n_seq = 0;
  const int32_t* seq_start = nullptr;  // host [n_seq + 1]: 0 = seq_start[0] < ... < seq_start[n_seq] = rows
};

// Bidirectional attention over dense keys and values (encoders): rows are n_seq sequences back
// to back, sequence s at rows [b_s, e_s) (seq_start nullptr: rows / n_seq rows each, b_s = s * n;
// else b_s = seq_start[s], e_s = seq_start[s + 1]), and every position attends to every position
// of its own sequence (within |i - j| <= window when window > 0: a symmetric local window), so
// inputs of different lengths pack into one call without padding:
//   out[b_s + i, head h] = sum_j softmax_j(scale * q[b_s + i, h] . k[b_s + j, h / group]) v[b_s + j, h / group]
struct AttentionDenseArgs {
  Mat out{};                      // [rows, n_head * head_dim]
  Mat q{};                        // [rows, n_head * head_dim]
  Mat k{};                        // [rows, n_head_kv * head_dim]
  Mat v{};                        // [rows, n_head_kv * head_dim]
  int32_t n_seq = 1;              // rows % n_seq == 0 unless seq_start is given
  const int32_t* seq_start = nullptr;  // host [n_seq + 1]: 0 = seq_start[0] < ... < seq_start[n_seq] = rows
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  float scale = 1.0f;
  int32_t window = 0;             // > 0: keys at most `window` positions before or after the query
  // The q / k / v projections' biases, left out of their matmuls and added to each row as it is
  // read ([n_head * head_dim] / [n_head_kv * head_dim]); only where
  // Backend::attention_dense_bias(args) says so (nullptr: none).
  const float* q_bias = nullptr;
  const float* k_bias = nullptr;
  const float* v_bias = nullptr;
  // out is read only as the input x of the next op, a matmul: a backend that hands that matmul
  // its input in another form (CUDA: BF16 rows written by the attention) may leave out unwritten.
  bool out_for_matmul = false;
  // Rows of sequence s: [seq_begin(s), seq_begin(s + 1)).
  int64_t seq_begin(int64_t s) const { return seq_start ? seq_start[s] : s * (q.rows / n_seq); }
  // The sequence of row r.
  int64_t seq_of(int64_t r) const {
    if (!seq_start) return r / (q.rows / n_seq);
    int64_t lo = 0, hi = n_seq;  // seq_start[lo] <= r < seq_start[hi]
    while (hi - lo > 1) {
      const int64_t mid = (lo + hi) / 2;
      (seq_start[mid] <= r ? lo : hi) = mid;
    }
    return lo;
  }
  // The keys row r attends to, [*lo, *hi), in the sequence at rows [b, e).
  void key_range(int64_t r, int64_t b, int64_t e, int64_t* lo, int64_t* hi) const {
    *lo = window > 0 && r - window > b ? r - window : b;
    *hi = window > 0 && r + window + 1 < e ? r + window + 1 : e;
  }
  int64_t max_seq_len() const {
    if (!seq_start) return q.rows / n_seq;
    int64_t m = 0;
    for (int64_t s = 0; s < n_seq; ++s) m = m > seq_start[s + 1] - seq_start[s] ? m : seq_start[s + 1] - seq_start[s];
    return m;
  }
};

// The attention probabilities of one query head (alignment of decoder tokens to encoder
// frames): out[t, j] = softmax_j(scale * q_head(t) . k_kvhead(seq[t], j)) over j in [0, pos[t]],
// 0 for j > pos[t] up to out.cols.
struct AttentionWeightsArgs {
  Mat out{};                      // [n_tok, n_pos], n_pos > every pos[t]
  Mat q{};                        // [n_tok, n_head * head_dim]
  KvView k_cache{};
  const int32_t* seq = nullptr;   // [n_tok]
  const int32_t* pos = nullptr;   // [n_tok]
  int32_t head = 0;               // the query head, in [0, n_head)
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  float scale = 1.0f;
};

// Ops of linear-attention (hybrid) layers.

// Causal depthwise conv1d with a rolling window, per sequence: for each channel c and token t of
// a sequence, out[t, c] = act(sum_j weight[c, j] * in[p - kernel + 1 + j, c]) where p is t's
// position and the inputs of positions before the sequence's first token in the batch come from
// its state (zeros before position 0). Afterwards the state holds the inputs of the last
// kernel - 1 positions. The tokens of one sequence appear in the batch in position order
// (consecutive positions); sequences may interleave.
struct ConvStateArgs {
  Mat out;                        // [n_tok, channels] (must not alias x)
  Mat x;                          // [n_tok, channels]
  const float* weight = nullptr;  // [channels, kernel], tap kernel - 1 on the current token
  int32_t kernel = 0;             // taps, >= 1
  StateView state;                // slot: [kernel - 1, channels], oldest position first
  const int32_t* seq = nullptr;   // [n_tok] state slot of each token
  const int32_t* pos = nullptr;   // [n_tok]
  bool silu = true;               // act = SiLU (else identity)
};

struct L2NormArgs {
  Mat out;                        // [rows, cols] = x / sqrt(sum(x^2) + eps) per group (may alias x)
  Mat x;                          // [rows, cols]
  int64_t group = 0;              // columns per group (a head); 0: the whole row
  float eps = 1e-6f;
};

// out = rms_norm(x) * weight * silu(z), per group of `group` columns (one head).
struct GatedRmsNormArgs {
  Mat out;                        // [rows, cols] (may alias x)
  Mat x;                          // [rows, cols]
  Mat z;                          // [rows, cols] gate
  const float* weight = nullptr;  // [group]
  int64_t group = 0;              // 0: the whole row
  float eps = 1e-6f;
};

// out = x * sigmoid(gate); gate has x's columns, or one column (one gate per row).
struct SigmoidMulArgs {
  Mat out;                        // [rows, cols] (may alias x)
  Mat x;                          // [rows, cols]
  Mat gate;                       // [rows, cols] or [rows, 1]
};

// The gated delta rule (Gated DeltaNet linear attention). Per value head h of each token, with
// its key head kh (grouped: h / (n_v_head / n_k_head); kv_tiled: h % n_k_head), the state
// S [k_dim, v_dim] of the token's sequence and
//   g = decay_rate[h] * softplus(alpha[h] + dt_bias[h]),  b = sigmoid(beta[h]):
//   S := exp(g) * S;  S := S + k (b * (v - S^T k))^T;  out = S^T (scale * q)
// q and k are the L2-normalized rows of key head kh. Tokens of a sequence are processed in
// position order (as ConvStateArgs); position 0 starts from S = 0. The CPU backend runs runs
// of several tokens of one sequence in the chunked (WY / UT) form, single tokens step by step.
struct DeltaRuleArgs {
  Mat out;                           // [n_tok, n_v_head * v_dim]
  Mat q;                             // [n_tok, n_k_head * k_dim]
  Mat k;                             // [n_tok, n_k_head * k_dim]
  Mat v;                             // [n_tok, n_v_head * v_dim]
  Mat alpha;                         // [n_tok, n_v_head] decay input
  Mat beta;                          // [n_tok, n_v_head] update gate before its sigmoid
  const float* decay_rate = nullptr; // [n_v_head] -exp(A_log), negative
  const float* dt_bias = nullptr;    // [n_v_head]
  StateView state;                   // slot: [n_v_head, k_dim, v_dim]
  const int32_t* seq = nullptr;      // [n_tok]
  const int32_t* pos = nullptr;      // [n_tok]
  int32_t n_k_head = 0;
  int32_t n_v_head = 0;              // a multiple of n_k_head
  int32_t k_dim = 0;
  int32_t v_dim = 0;
  bool kv_tiled = false;             // value head h reads key head h % n_k_head
  float scale = 1.0f;                // applied to q (1/sqrt(k_dim))
};

// The per-step inputs of one forward (a decode step or a prefill chunk), see begin_step.
struct StepInputs {
  int32_t n_tok = 0;
  const int32_t* ids = nullptr;       // [n_tok]
  const int32_t* pos = nullptr;       // [n_tok]
  const int32_t* seq = nullptr;       // [n_tok]
  int32_t n_out = 0;
  const int32_t* out_rows = nullptr;  // [n_out]
};

}  // namespace brisk
