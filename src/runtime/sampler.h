// Sampler chain applied to one row of logits: logit bias -> penalties (repetition, presence,
// frequency over the last `penalty_last_n` tokens) -> top-k -> top-p -> min-p -> temperature
// -> draw with a seeded generator. temperature <= 0 means greedy (argmax after bias and
// penalties). Same seed and same inputs give the same tokens.
#pragma once
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "backend/backend.h"

namespace brisk {

struct SamplerParams {
  float temperature = 0.8f;
  int32_t top_k = 40;           // <= 0: off
  float top_p = 0.95f;          // >= 1: off
  float min_p = 0.05f;          // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off (llama.cpp semantics: divide positive, multiply negative)
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t penalty_last_n = 64;  // -1: whole history
  std::vector<std::pair<int32_t, float>> logit_bias = {};  // added to the logit; -inf bans
  uint64_t seed = 0xB415C;
};

// Ids a model can produce that its tokenizer has no token for: embedding / output rows padded
// past the vocabulary (Qwen2.5 and Qwen3 pad 151,665 tokens to 151,936 rows). Appends a -inf
// logit bias for ids [n_tokens, n_vocab) so that no sampler (host or device) ever picks one.
// n_tokens: the tokenizer's vocab_size(); n_vocab: the model's output rows.
void sampler_ban_ids_without_token(SamplerParams& params, int32_t n_tokens, int32_t n_vocab);

// A distribution over token ids: (id, probability or weight), in id order.
using TokenDistribution = std::vector<std::pair<int32_t, double>>;

class Sampler {
 public:
  Sampler(SamplerParams params, int32_t n_vocab);
  // logits: [n_vocab]; `allowed` (optional, [n_vocab]) masks tokens out when false.
  int32_t sample(const float* logits, const std::vector<bool>* allowed = nullptr);
  // The next sample() in the device form of Backend::sample_rows: the same chain and the same
  // draw from this sampler's generator (advanced as sample() would). device_supported() says
  // whether a device can run this configuration (top-k in 1..kDeviceSampleMaxTopK unless
  // greedy); device_spec() then fills spec (edit_offset = edits->size() on entry) and appends
  // the row's edits.
  bool device_supported() const;
  void device_spec(DeviceSampleSpec* spec, std::vector<DeviceSampleEdit>* edits);
  // The distribution sample() draws from for these logits, after the whole chain (mask, bias,
  // penalties, top-k, top-p, min-p, temperature): the kept tokens in id order with their
  // probabilities; greedy: the picked token with probability 1. Uses no random number.
  // Speculative sampling checks drafted tokens against it.
  void distribution(const float* logits, const std::vector<bool>* allowed, TokenDistribution* out);
  double uniform();                               // one uniform draw in [0, 1) from the generator
  int32_t draw(const TokenDistribution& weights);  // one token, with probability weight / total
  bool greedy() const;
  bool uses_history() const;  // penalties on: a row's result depends on the accepted tokens
  void accept(int32_t token);  // appends to the penalty history
  void reset();                // clears history, reseeds
  const SamplerParams& params() const { return params_; }

 private:
  SamplerParams params_;
  int32_t n_vocab_;
  std::mt19937_64 rng_;
  std::vector<int32_t> history_;
  struct Candidate { int32_t id; float logit; float p; };
  std::vector<Candidate> cand_;
  std::vector<float> work_;  // [n_vocab] logits after mask, bias and penalties
  // Steps 1-5 of the chain: the greedy pick (>= 0), or -1 with the kept candidates in cand_.
  int32_t prepare(const float* logits, const std::vector<bool>* allowed);
  // The distinct tokens of the penalty window with their counts, in token order (empty when
  // no penalty applies).
  std::vector<std::pair<int32_t, int32_t>> penalty_counts() const;
};

}  // namespace brisk
