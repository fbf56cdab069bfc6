// The op interface every model forward is written against. A Backend owns device memory
// (activation arenas, KV caches, uploaded weights) and runs ops on it; the CPU backend runs
// them on a thread pool, a CUDA backend would enqueue them on a stream. Ops take parameter
// structs (designated initializers) of plain views: no allocation and no host decision
// happens inside an op, so that a decode step can later be captured as one CUDA graph.
//
// Layouts (all row-major, innermost dimension last in the comments):
//   Mat      float32 activations [rows, cols], row r at data + r * stride
//   Weight   a 2-D weight in its stored format: [n_out, n_in], one row per output feature
//            (GGUF ne = {n_in, n_out}); rows are row_bytes apart
//   KvView   one layer's K or V cache, paged: a pool of blocks [n_blocks, block_size, width]
//            in F32 / F16 / Q8_0 and a block table [n_seq, table_stride] of block ids;
//            position pos of sequence seq is row pos % block_size of block
//            table[seq * table_stride + pos / block_size]; a tiled F16 view (the CPU
//            backend's K cache) stores each 16 positions of a block column-major instead,
//            [width, 16] in the bytes of their 16 rows (KvView::tiled)
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "quant/types.h"

namespace brisk {

struct Mat {
  float* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t stride = 0;  // floats between rows (>= cols); 0 means cols
  float* row(int64_t r) const { return data + r * (stride ? stride : cols); }
  int64_t row_stride() const { return stride ? stride : cols; }
};

struct Weight {
  QuantType type = QuantType::F32;
  int64_t n_in = 0;    // elements per row (GGUF ne[0])
  int64_t n_out = 0;   // rows (GGUF ne[1])
  size_t row_bytes = 0;
  const void* data = nullptr;
  bool empty() const { return data == nullptr; }
  const uint8_t* row(int64_t r) const { return static_cast<const uint8_t*>(data) + size_t(r) * row_bytes; }
};

struct KvView {
  QuantType type = QuantType::F16;
  void* data = nullptr;     // the pool: [n_blocks, block_size, width]
  int64_t width = 0;        // n_head_kv * head_dim elements per position
  size_t row_bytes = 0;     // bytes per position
  int64_t capacity = 0;     // positions a sequence may hold now (<= table_stride * block_size)
  int64_t n_seq = 0;
  int32_t block_size = 0;   // positions per block: a power of two >= 16
  int64_t n_blocks = 0;     // blocks in the pool
  const int32_t* table = nullptr;         // [n_seq, table_stride] block ids, host memory
  const int32_t* device_table = nullptr;  // the same in the backend's memory (== table on the CPU)
  int64_t table_stride = 0;               // block ids per sequence row of the table
  // F16 only: each tile of kKvTile positions of a block (tile_start(seq, pos), the bytes of
  // its kKvTile rows) holds element c of position p at (c * kKvTile + p % kKvTile) halves, so
  // one column's 16 positions are one 32-byte vector (the CPU attention's score pass). Read
  // and write rows of any view with cpu::kv_read_f32 / kv_write_f32 (kernels/cpu/ops.h).
  bool tiled = false;
  static constexpr int kKvTile = 16;
  int block_shift() const { return __builtin_ctz(unsigned(block_size)); }
  // The pool row of (seq, pos): block * block_size + pos % block_size.
  int64_t slot(int64_t seq, int64_t pos) const {
    const int sh = block_shift();
    return (int64_t(table[seq * table_stride + (pos >> sh)]) << sh) | (pos & (block_size - 1));
  }
  uint8_t* row(int64_t seq, int64_t pos) const {
    return static_cast<uint8_t*>(data) + size_t(slot(seq, pos)) * row_bytes;
  }
  // Positions pos .. pos + run(pos) - 1 lie in one block: their rows are row_bytes apart.
  int64_t run(int64_t pos) const { return block_size - (pos & (block_size - 1)); }
  // The first byte of the tile of kKvTile positions that holds (seq, pos) (tiled views).
  uint8_t* tile_start(int64_t seq, int64_t pos) const { return row(seq, pos & ~int64_t(kKvTile - 1)); }
};

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
  int32_t n_head = 0;
  int32_t n_head_kv = 0;          // n_head % n_head_kv == 0 (GQA)
  int32_t head_dim = 0;
  float scale = 1.0f;             // usually 1/sqrt(head_dim)
  int32_t window = 0;             // sliding window in positions; 0: full causal
  float softcap = 0.0f;           // tanh soft-capping of scores; 0: off
};

enum class Activation { silu, gelu_tanh };

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
// (ties: lower expert id first), renormalized to sum 1 when norm_topk; then
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
};

struct SoftcapArgs {
  Mat x;                          // [rows, cols] := cap * tanh(x / cap), in place
  float cap = 0.0f;               // > 0
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
};

struct UnaryArgs {
  Mat out{};                      // [rows, cols] = op(x) (may alias x)
  Mat x{};                        // [rows, cols]
  UnaryOp op = UnaryOp::gelu_erf;
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

// The per-step inputs of one forward (a decode step or a prefill chunk), see begin_step.
struct StepInputs {
  int32_t n_tok = 0;
  const int32_t* ids = nullptr;       // [n_tok]
  const int32_t* pos = nullptr;       // [n_tok]
  const int32_t* seq = nullptr;       // [n_tok]
  int32_t n_out = 0;
  const int32_t* out_rows = nullptr;  // [n_out]
};

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
  // Encoder ops (see their argument structs); the defaults throw naming the op and backend.
  virtual void layer_norm(const LayerNormArgs& a);
  virtual void unary(const UnaryArgs& a);
  virtual void im2col(const Im2colArgs& a);
  virtual void attention_weights(const AttentionWeightsArgs& a);
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
