// Text embeddings and cross-encoder scores from an encoder-only model (ArchModel::embedder):
// inputs of different lengths are packed back to back into forwards of at most n_batch tokens
// (attention stays within each input), then pooled as the model's pipeline says
// (runtime/embed_pooling.h: mean / CLS / last token / none, Dense layers, L2 normalisation)
// and cut to a Matryoshka prefix when asked. Not thread-safe: one caller at a time (the server
// gives it one worker that packs concurrent requests into the same forwards).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/embed_pooling.h"
#include "runtime/engine_api.h"

namespace brisk {

struct EmbedderOptions {
  std::string device = "cpu";
  int32_t n_threads = 0;          // 0: all cores
  int32_t n_batch = 8192;         // tokens per forward (an input longer than this runs alone)
};

struct EmbedInput {
  std::vector<int32_t> ids{};
  std::vector<int32_t> types{};   // empty: all 0
};

// A forward's timing, for benchmarks.
struct EmbedStats {
  int64_t tokens = 0;
  int32_t forwards = 0;
};

class Embedder {
 public:
  // Throws naming the model when it is not an encoder-only model.
  Embedder(std::shared_ptr<const Model> model, const EmbedderOptions& options);
  ~Embedder();
  Embedder(const Embedder&) = delete;
  Embedder& operator=(const Embedder&) = delete;

  // Whether the model is an encoder-only model this class runs.
  static bool supports(const Model& model);
  // MLP width of the model (n_ff), for FLOP counts.
  static int32_t mlp_width(const Model& model);

  const Model& model() const { return *model_; }
  const PoolingConfig& pooling() const { return pooling_; }
  int32_t dim() const;            // width of a pooled vector (after Dense layers)
  int32_t n_cls() const;          // classification head outputs (0: none)
  int32_t max_tokens() const;     // longest input (positions of the model, max_seq_length)
  int32_t vocab_size() const;

  // Ids of a text with the tokenizer's special tokens (e.g. [CLS] ... [SEP]); throws naming the
  // missing tokenizer when the model folder has none.
  std::vector<int32_t> tokenize(const std::string& text) const;
  // A cross-encoder's pair input: query then document, separated as the tokenizer's pair
  // template does (BERT: [CLS] a [SEP] b [SEP], types 1 on b; RoBERTa: <s> a </s></s> b </s>).
  EmbedInput pair(const std::vector<int32_t>& a, const std::vector<int32_t>& b) const;
  // Checks ids (in the vocabulary), types and length; throws naming `what`.
  void check(const EmbedInput& in, const std::string& what) const;

  // Last hidden state of every token of each input: [len_i * n_embd].
  std::vector<std::vector<float>> hidden(const std::vector<EmbedInput>& inputs);
  // Each input's pooled vector(s): one vector of dim() floats (pooling none: one per token,
  // back to back), normalised when the pipeline normalises; `dimensions` > 0 keeps that prefix
  // (normalised again when the pipeline normalises).
  std::vector<std::vector<float>> embed(const std::vector<EmbedInput>& inputs, int32_t dimensions = 0);
  // Classification head scores of each input, [n_cls()] (raw logits).
  std::vector<std::vector<float>> classify(const std::vector<EmbedInput>& inputs);

  const EmbedStats& stats() const { return stats_; }

 private:
  struct Impl;
  void run(const std::vector<EmbedInput>& inputs, std::vector<std::vector<float>>* hidden,
           std::vector<std::vector<float>>* cls);
  std::shared_ptr<const Model> model_;
  PoolingConfig pooling_;
  std::unique_ptr<Impl> impl_;
  EmbedStats stats_;
  int32_t n_batch_ = 8192;
};

}  // namespace brisk
