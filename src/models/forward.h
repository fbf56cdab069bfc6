// What a model's forward works with: the backend, the batch, the activation arena planned for
// the largest batch, this context's KV cache views, and the tap hook. Buffers are allocated
// once per Context (ForwardArena); a forward only takes row-prefix views of them, so a step
// allocates nothing and its sequence of ops depends only on the batch shape.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "models/config.h"

namespace brisk {

// Receives named intermediates: name as in llama.cpp's graph ("attn_norm", "Qcur", ...),
// layer (-1 for model-level tensors) and the [rows, cols] float32 values.
using TapFn = std::function<void(const std::string& name, int layer, const Mat& t)>;

struct ForwardBatch {
  int32_t n_tok = 0;
  const int32_t* ids = nullptr;       // [n_tok]
  const int32_t* pos = nullptr;       // [n_tok]
  const int32_t* seq = nullptr;       // [n_tok]
  int32_t n_out = 0;                  // tokens that want logits
  const int32_t* out_rows = nullptr;  // [n_out] indices into the batch
  // Input rows beside the ids, on the backend (models run as their multi-token-prediction block:
  // the target's final-normed hidden states, ArchModel::mtp); nullptr: none.
  const float* embd_in = nullptr;     // [n_tok, n_embd]
  // The LM head also writes the final-normed rows of every token into ForwardArena::hidden.
  bool want_hidden = false;
  // Bidirectional forwards (ModelConfig::bidirectional "all": a decoder run as an embedding
  // model), else nullptr: every sequence lies whole in the batch, from position 0. A full layer's
  // token t sees its sequence's positions [0, seq_last[t]]; a sliding layer of window
  // bidir_window sees [window_first[t], window_last[t]], bidir_window / 2 positions either side
  // (as transformers and llama.cpp mask a symmetric window).
  const int32_t* seq_last = nullptr;      // [n_tok]
  const int32_t* window_first = nullptr;  // [n_tok]
  const int32_t* window_last = nullptr;   // [n_tok]
  int32_t bidir_window = 0;
};

// Activation buffers for up to n_max tokens, [n_max, width] each; widths are those of the
// widest layer (ModelConfig::max_q_width, max_kv_width, max_n_ff).
struct ForwardArena {
  int32_t n_max = 0;
  float* x = nullptr;      // residual stream [n, n_embd]
  float* h = nullptr;      // normed input of a block [n, n_embd]
  float* t = nullptr;      // block output [n, n_embd]
  float* t2 = nullptr;     // a second block output [n, n_embd] (a branch beside the MLP, or
                           // routed experts beside a shared one)
  float* q = nullptr;      // [n, n_head * head_dim]
  float* k = nullptr;      // [n, n_head_kv * head_dim]
  float* v = nullptr;      // [n, n_head_kv * head_dim]
  float* attn = nullptr;   // attention result [n, n_head * head_dim]
  float* gate = nullptr;   // [n, n_ff]
  float* up = nullptr;     // [n, n_ff]
  // Per-layer embeddings (cfg.n_embd_per_layer > 0, else nullptr).
  float* per_layer = nullptr;       // [n, n_layer * n_embd_per_layer] every layer's input
  float* per_layer_tok = nullptr;   // [n, n_layer * n_embd_per_layer] the token rows of the table
  float* per_layer_gate = nullptr;  // [n, n_embd_per_layer]
  float* out = nullptr;    // rows needing logits [n, n_embd]
  float* hidden = nullptr; // final-normed rows of every token [n, n_embd] (ForwardBatch::want_hidden)
  float* embd_in = nullptr;  // input rows (ForwardBatch::embd_in) [n, n_embd], or nullptr
  float* logits = nullptr; // [n_logits_max, n_vocab]
  int32_t n_logits_max = 0;
  std::vector<float*> extra = {};  // [n, width] each, the widths ArchModel::extra_arena_widths asked for
};

struct CrossAttentionProbe;  // models/encoder_forward.h
// What one layer keeps per sequence, as the model declares it (ArchModel::layer_states): keys
// and values of its attention in the paged KV cache, and / or recurrent state tensors (F32,
// `recurrent[i]` floats per sequence each) that the runtime allocates, snapshots and copies.
struct LayerState {
  bool kv = true;
  std::vector<int64_t> recurrent = {};
};

// [n_layer] per layer the views of its recurrent state tensors, in the order declared.
using RecurrentViews = std::vector<std::vector<StateView>>;

struct Forward {
  Backend& backend;
  const ModelConfig& cfg;
  const ForwardBatch& batch;
  const ForwardArena& arena;
  const std::vector<KvView>& k_cache;  // [n_layer]; a KV-shared layer has its source's views
  const std::vector<KvView>& v_cache;  // [n_layer]
  const TapFn* tap = nullptr;
  // Encoder-decoder models: the per-layer cross-attention caches the encoder wrote ([n_layer]
  // views of [n_seq, n_enc_pos, width]; nullptr for decoder-only models), for each batch token
  // the last encoder position (attention over the cache then sees every position), and the
  // probabilities to record for alignment (nullptr: none).
  const std::vector<KvView>* cross_k = nullptr;
  const std::vector<KvView>* cross_v = nullptr;
  const int32_t* cross_pos = nullptr;  // [n_tok]
  const CrossAttentionProbe* cross_probe = nullptr;
  const RecurrentViews* state = nullptr;  // layers with recurrent state (LayerState::recurrent)
  // Tensor parallelism: this rank of the group whose shards together hold the model (the config
  // is the shard's: a slice of the heads and MLP rows); blocks sum the row-parallel matmuls'
  // partial outputs over it. nullptr or a world of 1: the whole model on one backend.
  const TpRank* tp = nullptr;

  Mat mat(float* data, int64_t cols) const { return Mat{.data = data, .rows = batch.n_tok, .cols = cols}; }
  void tap_tensor(const char* name, int layer, const Mat& m) const {
    if (tap && *tap) {
      backend.synchronize();
      (*tap)(name, layer, m);
    }
  }
};

}  // namespace brisk
