// What an encoder-only model (text embeddings, cross-encoder rerankers) declares and works with.
// The runtime (runtime/embedder.h) packs many inputs of different lengths back to back into one
// forward without padding: sequence s holds rows [seq_start[s], seq_start[s + 1]), and attention
// stays within a sequence (AttentionDenseArgs::seq_start). The model writes the last hidden state
// of every row and, when it has a classification head, the scores of each sequence.
#pragma once
#include <cstdint>

#include "backend/backend.h"
#include "models/forward.h"

namespace brisk {

struct EmbedSpec {
  int32_t n_out = 0;              // width of the hidden states written (n_embd)
  int32_t n_cls = 0;              // classification head outputs (0: no head)
  int32_t n_pos = 0;              // rows of the position table: an input holds at most n_pos - position_offset tokens
  int32_t position_offset = 0;    // position-table row of an input's first token (RoBERTa: pad_token_id + 1)
  int32_t n_type = 0;             // token types the model knows (0: none; types are then ignored)
  int64_t scratch_floats = 0;     // arena floats per token
};

struct EmbedForward {
  Backend& backend;
  const ModelConfig& cfg;
  int32_t n_tok = 0;
  int32_t n_seq = 0;
  const int32_t* ids = nullptr;        // [n_tok]
  const int32_t* types = nullptr;      // [n_tok] token types, each < EmbedSpec::n_type
  const int32_t* pos = nullptr;        // [n_tok] position-table rows (the offset included)
  const int32_t* seq_start = nullptr;  // host [n_seq + 1]: 0, ..., n_tok
  float* scratch = nullptr;            // [n_tok * EmbedSpec::scratch_floats]
  Mat out{};                           // [n_tok, n_out] last hidden states
  Mat cls{};                           // [n_seq, n_cls] classification scores (empty: not asked)
  Mat cls_scratch{};                   // [n_seq, n_out] (when cls is asked)
  const TapFn* tap = nullptr;

  void tap_tensor(const char* name, int layer, const Mat& m) const {
    if (tap && *tap) {
      backend.synchronize();
      (*tap)(name, layer, m);
    }
  }
};

}  // namespace brisk
