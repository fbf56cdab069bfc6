// What the front ends (generate, chat, server) use to run a model: a loaded Model (weights,
// config, tokenizer, chat template; read-only and shareable) and a Context (KV cache for up to
// n_seq_max sequences, each with its own length) that runs batches of tokens from any mix of
// sequences in one forward pass.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "quant/types.h"
#include "runtime/sampler.h"
#include "text/tokenizer.h"

namespace brisk {

struct ModelLoadOptions {
  std::string path{};         // GGUF file or Hugging Face folder (safetensors + config.json)
  std::string quant{};        // "", "q8_0", "q4_0", "q4_k": quantize safetensors weights at load
  bool use_mmap = false;      // weights read into memory by default
  int32_t n_threads = 0;      // 0: all cores
};

struct ModelInfo {
  std::string architecture;   // HF model_type / GGUF general.architecture, e.g. "qwen3"
  std::string name;
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;
  int32_t n_layer = 0;
  int32_t n_embd = 0;
  uint64_t n_params = 0;
  uint64_t weight_bytes = 0;  // bytes of weights read per decoded token (roofline)
  uint64_t state_bytes = 0;   // bytes of recurrent state (F32, linear-attention layers) a decoded token
                              // reads and writes: every layer's state of one sequence, read once and
                              // written once (0 for models without recurrent layers)
};

class Model {
 public:
  virtual ~Model() = default;
  static std::shared_ptr<Model> load(const ModelLoadOptions& options);

  virtual const ModelInfo& info() const = 0;
  virtual const Tokenizer* tokenizer() const = 0;         // nullptr when the files have none
  virtual const std::string& chat_template() const = 0;   // "" when none
  virtual std::string bos_text() const = 0;               // for templates: bos_token
  virtual std::string eos_text() const = 0;               // for templates: eos_token
};

struct ContextOptions {
  int32_t n_ctx = 4096;            // max positions per sequence (capped at n_ctx_train)
  int32_t n_seq_max = 1;           // sequences held at once
  int32_t n_batch = 512;           // max tokens per forward (larger batches are chunked)
  QuantType kv_type = QuantType::F16;  // F16 (default), BF16, F32 or Q8_0
  int32_t n_threads = 0;           // 0: all cores
  std::string device = "cpu";      // cpu | cuda | cuda:N | auto (see make_backend); options()
                                   // gives the backend's name ("cpu", "cuda:0")
  // Tensor parallelism (runtime/tp_context.h, docs/multi_gpu.md): the ranks the model is split
  // over, each holding a slice of every layer's heads and MLP rows on its own backend. 0: none,
  // unless device lists GPUs ("cuda:0,1,...": one rank each); >= 1: that many ranks ("cpu": CPU
  // ranks in threads sharing n_threads; "cuda": GPUs 0..tp-1); 1 runs the whole model through
  // the same tensor-parallel path.
  int32_t tp = 0;
  int32_t kv_block_size = 256;     // KV cache positions per block (paged): a power of two >= 16
                                   // (256: backend/kv_table.h says why)
  // Models with recurrent state (linear-attention layers): a sequence's state is snapshotted
  // when its length reaches a multiple of state_snapshot_interval (0: never), keeping up to
  // state_snapshots per sequence, so that it can be cut back there (seq_restorable).
  int32_t state_snapshot_interval = 16;
  int32_t state_snapshots = 4;
  // Speculative decoding: one more recurrent-state slot per sequence for seq_checkpoint.
  bool state_checkpoints = false;
  // Encoder-decoder models: windows one encoder pass runs at once (1..64; encode() takes more in
  // passes of this many): batched GEMMs over all their frames, scratch for as many windows.
  int32_t encoder_windows = 1;
};

struct BatchToken {
  int32_t token = 0;
  int32_t pos = 0;        // position in its sequence; must equal the sequence's next position
  int32_t seq = 0;        // 0 .. n_seq_max-1
  bool want_logits = false;
};

// Encoder-decoder models (speech): one window of input features for a sequence.
struct EncoderInput {
  int32_t seq = 0;
  const float* features = nullptr;  // [n_frames, n_features] of EncoderShape
};
struct EncoderShape {
  int32_t n_frames = 0;     // input rows per window (e.g. log-mel frames)
  int32_t n_features = 0;   // input columns (e.g. mel bins)
  int32_t n_pos = 0;        // encoder positions per window the decoder attends to
  bool empty() const { return n_frames == 0; }
};

class Context {
 public:
  virtual ~Context() = default;
  static std::unique_ptr<Context> create(std::shared_ptr<const Model> model, const ContextOptions& options);
  // A context that runs the model's multi-token-prediction block alone (one attention layer with
  // its own KV cache; each token comes with a hidden-state row, set_next_hidden_in). Throws,
  // naming the model, when the checkpoint has no MTP weights.
  static std::unique_ptr<Context> create_mtp(std::shared_ptr<const Model> model, const ContextOptions& options);

  // Runs the batch; throws brisk::Error on a bad token id, position or sequence (state unchanged).
  virtual void decode(const std::vector<BatchToken>& batch) = 0;
  // Logits of the i-th token of the last batch that had want_logits set, in batch order: [n_vocab].
  virtual const float* logits(int32_t i) const = 0;
  virtual int32_t n_vocab() const = 0;
  // Greedy sampling on the device: while on, decode() picks the argmax of each wanted row on
  // the backend and copies only the token ids back (logits(i) then fails); device_ids() gives
  // them. Returns whether the mode is on (false: the backend has no such op, e.g. the CPU).
  virtual bool set_device_greedy(bool on) {
    (void)on;
    return false;
  }
  // Sampling on the device: while a sampler is set, decode() runs its chain (device_spec) on
  // the backend for each wanted row, in batch order, and copies only the drawn ids back; the
  // caller still calls sampler->accept(). nullptr turns it off. Returns whether the mode is on
  // (false: the backend has no such op, or the sampler's configuration cannot run there).
  virtual bool set_device_sampler(Sampler* sampler) {
    (void)sampler;
    return false;
  }
  // Sampling on the device for the next decode() only, one sampler per wanted row (batch
  // order; a server's rows belong to different requests): each row's chain (device_spec) runs
  // on the backend and only the ids are copied back; the caller still calls accept(). Returns
  // false, with nothing set, when the backend has no such op or a sampler's configuration
  // cannot run there (the caller then samples logits(i) itself).
  virtual bool set_next_device_samplers(std::vector<Sampler*> rows) {
    (void)rows;
    return false;
  }
  // [rows wanted by the last batch] ids picked on the device (-1: every token banned) while
  // device greedy or a device sampler is on; nullptr otherwise.
  virtual const int32_t* device_ids() const { return nullptr; }

  // Speculative decoding with the model's multi-token-prediction block. While on, decode() also
  // keeps the final-normed hidden state (the LM head's input) of every batch token: hidden(i) is
  // [n_embd] of the i-th token of the last batch, nullptr when off. Returns whether it is on.
  virtual bool set_keep_hidden(bool on) {
    (void)on;
    return false;
  }
  virtual const float* hidden(int32_t i) const {
    (void)i;
    return nullptr;
  }
  // A context of the MTP block (create_mtp): the next decode()'s input rows, host memory
  // [batch size, n_embd] (row i: the target's hidden state at the position of token i).
  virtual void set_next_hidden_in(const float* rows) {
    (void)rows;
    fail("this context does not run a multi-token-prediction block");
  }

  virtual int32_t seq_length(int32_t seq) const = 0;
  // Keep positions [0, n_keep) of seq. A model whose sliding-window layers keep only their window
  // cannot go back to a length whose window they released: it keeps none then (the caller
  // computes them again); seq_length() says what was kept.
  virtual void seq_truncate(int32_t seq, int32_t n_keep) = 0;
  // dst := src's first n positions (or none, as for seq_truncate; seq_length(dst) says).
  virtual void seq_copy(int32_t src, int32_t dst, int32_t n) = 0;
  // The largest m <= n (and <= the length) to which seq can be cut back or copied exactly: n for
  // a KV cache; a model with recurrent state knows it only at snapshots, 0 and the current
  // length, and seq_truncate / seq_copy to other lengths throw.
  virtual int32_t seq_restorable(int32_t seq, int32_t n) const { return std::max(0, std::min(n, seq_length(seq))); }
  // Remembers seq's state at its current length so that seq_truncate back to it stays exact after
  // later forwards (a speculative verify whose drafted tokens are rejected). A KV cache needs
  // nothing (true); recurrent state needs ContextOptions::state_checkpoints (false without it).
  virtual bool seq_checkpoint(int32_t seq) {
    (void)seq;
    return true;
  }
  // Recurrent-state snapshots held now, all sequences (0 for models without recurrent state).
  virtual int32_t state_snapshots() const { return 0; }
  virtual const ContextOptions& options() const = 0;

  // Encoder-decoder models. encoder_shape() is empty for a decoder-only model. encode() runs
  // the encoder over each input's window and keeps the result as that sequence's
  // cross-attention state (until its next encode(); seq_copy shares it); a sequence's tokens
  // may be decoded only once it holds one. The probe records, for the next decode() only,
  // the cross-attention probabilities of the given (decoder layer, head) pairs:
  // cross_attention_probe(i) is then [tokens of that batch, n_pos] for pair i.
  virtual EncoderShape encoder_shape() const { return {}; }
  virtual void encode(const std::vector<EncoderInput>& inputs) {
    (void)inputs;
    fail("this model has no encoder");
  }
  virtual void set_cross_attention_probe(std::vector<std::pair<int32_t, int32_t>> heads) {
    (void)heads;
    fail("this model has no cross-attention");
  }
  virtual const float* cross_attention_probe(int32_t i) const {
    (void)i;
    return nullptr;
  }

  // Debugging hook: receives every named intermediate of the forward (llama.cpp names such as
  // "attn_norm", "Qcur", "l_out"; layer -1 for model-level tensors) as float32 [rows, cols]
  // with one row per batch token. An empty function turns it off.
  using TapFn = std::function<void(const std::string& name, int layer, const float* data,
                                   int64_t rows, int64_t cols)>;
  // Contexts without taps (test doubles, other implementations) keep this default.
  virtual void set_tap(TapFn tap) { fail("this context does not support taps"); }
};

}  // namespace brisk
