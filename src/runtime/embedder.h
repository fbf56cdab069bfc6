// Text embeddings and reranking scores.
// - Encoder-only models (ArchModel::embedder: BERT, cross-encoders): inputs of different lengths
//   are packed back to back into forwards of at most n_batch tokens (attention stays within each
//   input).
// - Causal decoders marked as embedding models (a sentence-transformers folder, a backbone
//   checkpoint without LM head, a GGUF with {arch}.pooling_type; Qwen3-Embedding): the decoder's
//   own forward through a Context of its own (F32 KV cache, cleared after each call), many
//   inputs as separate sequences of one batch, so each forward packs them with per-sequence
//   causal masks; the final-normed hidden states are the last hidden state.
// - Yes/no rerankers (a causal LM scored as logit("yes") - logit("no") at the last token of a
//   chat-formatted (query, document) prompt; Qwen3-Reranker): the same decoder path, the score
//   the last hidden state's dot product with the LM head's yes row minus its no row, presented
//   as a one-logit classification head (sigmoid gives P(yes) of the softmax over yes / no).
// Then pooled as the model's pipeline says (runtime/embed_pooling.h: mean / CLS / last token /
// none, Dense layers, L2 normalisation) and cut to a Matryoshka prefix when asked. Not
// thread-safe: one caller at a time (the server gives it one worker that packs concurrent
// requests into the same forwards).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/embed_pooling.h"
#include "runtime/engine_api.h"

namespace brisk {

// Whether a causal LM is scored as a yes/no reranker: detect (see Embedder::yes_no_detected),
// or as the user says.
enum class YesNoMode { detect, on, off };

struct EmbedderOptions {
  std::string device = "cpu";
  int32_t n_threads = 0;          // 0: all cores
  int32_t n_batch = 8192;         // tokens per forward (an input longer than this runs alone)
  YesNoMode yes_no = YesNoMode::detect;
  // The yes / no token ids of a yes/no reranker; -1: the tokenizer's "yes" / "no" (a GGUF
  // converted by llama.cpp carries the two LM-head rows as cls.output.weight instead).
  int32_t yes_id = -1;
  int32_t no_id = -1;
  // The instruction of the yes/no reranker's prompt ("": the model card's default).
  std::string instruction{};
};

// The prompt of a yes/no reranker (Qwen3-Reranker's model card): prefix (chat turns with
// special tokens), body (plain text, {instruction} / {query} / {document} filled in), suffix.
struct YesNoPrompt {
  std::string prefix, body, suffix, instruction;
};
const YesNoPrompt& yes_no_default_prompt();

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

  // Whether the model is one this class runs: an encoder-only model, a causal decoder marked as
  // an embedding model, or (yes_no on, or detect and yes_no_detected) a yes/no reranker.
  static bool supports(const Model& model, YesNoMode yes_no = YesNoMode::detect);
  // A causal LM recognised as a yes/no reranker: a GGUF with {arch}.pooling_type 4 (rank) and a
  // two-row cls.output.weight (llama.cpp's conversion), or a Hugging Face causal-LM folder whose
  // directory name (in the Hub cache: the repository's), or config `_name_or_path`, contains
  // "reranker" (llama.cpp's converter hint).
  static bool yes_no_detected(const Model& model);
  // MLP width of the model (n_ff), for FLOP counts.
  static int32_t mlp_width(const Model& model);

  const Model& model() const { return *model_; }
  const PoolingConfig& pooling() const { return pooling_; }
  // Overrides the pooling mode of the model's pipeline (its Dense layers and normalisation stay).
  void set_pooling_mode(PoolingMode mode) { pooling_.mode = mode; }
  int32_t dim() const;            // width of a pooled vector (after Dense layers)
  int32_t n_cls() const;          // classification head outputs (0: none)
  int32_t max_tokens() const;     // longest input (positions of the model, max_seq_length)
  int32_t vocab_size() const;

  // Ids of a text with the tokenizer's special tokens (e.g. [CLS] ... [SEP]), lowercased first
  // when sentence_bert_config.json sets do_lower_case; throws naming the missing tokenizer when
  // the model folder has none.
  std::vector<int32_t> tokenize(const std::string& text) const;
  // A cross-encoder's pair input: query then document, separated as the tokenizer's pair
  // template does (BERT: [CLS] a [SEP] b [SEP], types 1 on b; RoBERTa: <s> a </s></s> b </s>).
  EmbedInput pair(const std::vector<int32_t>& a, const std::vector<int32_t>& b) const;
  // A yes/no reranker's input for texts: prefix ids + the body's ids (query and document in
  // their places, tokenized as one text, as the model card does) + suffix ids; a body too long
  // for max_tokens() loses its last tokens when `truncate`, else throws naming `what`.
  EmbedInput pair_text(const std::string& query, const std::string& document, bool truncate,
                       const std::string& what) const;
  bool yes_no() const;            // a yes/no reranker (n_cls() is then 1: logit yes - no)
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
  // A reranker's relevance score of one input's logits: sentence-transformers' CrossEncoder
  // activation (config.json sentence_transformers.activation_fn, or the older
  // sbert_ce_default_activation_function; by default Sigmoid), a yes/no reranker's P(yes).
  // Throws for a head of several labels (no single relevance score).
  float relevance(const std::vector<float>& logits) const;

  const EmbedStats& stats() const { return stats_; }

 private:
  struct Impl;
  // pooled (encoders on a device backend, pooling cls / last / mean): each input's pooled row
  // [n_embd], pooled where the hidden states are, instead of `hidden` copied back whole.
  void run(const std::vector<EmbedInput>& inputs, std::vector<std::vector<float>>* hidden,
           std::vector<std::vector<float>>* cls, std::vector<std::vector<float>>* pooled = nullptr);
  void run_decoder(const std::vector<EmbedInput>& inputs, std::vector<std::vector<float>>* hidden,
                   std::vector<std::vector<float>>* cls);
  void init_decoder(const EmbedderOptions& options);
  std::shared_ptr<const Model> model_;
  PoolingConfig pooling_;
  std::unique_ptr<Impl> impl_;
  EmbedStats stats_;
  int32_t n_batch_ = 8192;
};

}  // namespace brisk
