// Speculative decoding: a draft source proposes the next few tokens of a sequence, the target
// model runs them in one forward (the verify step: the pending token plus k drafts, a logits row
// each), and the scheduler keeps the longest prefix the target agrees with (runtime/scheduler.cpp).
//
// Exactness. A row of the verify forward equals the logits of decoding its token alone (the CPU
// kernels give the same bits for runs of up to 8 tokens per matmul and 16 per delta-rule run;
// tests/unit/test_speculative.cpp checks every fixture). At temperature 0 a draft is kept when it
// is the sampler's pick, so the ids equal plain decoding. Above 0 speculative sampling keeps draft
// d with probability min(1, p(d) / q(d)) and otherwise draws from the normalised residual
// max(0, p - q), where p is the distribution the sampler would draw from (Sampler::distribution:
// penalties, top-k/p, min-p and the constraint's mask included) and q the draft's (a point mass for
// the deterministic sources): the output distribution is the target's.
//
// Rollback. Rejected tokens leave the KV cache by seq_truncate; recurrent state goes back to the
// checkpoint taken before the verify (Context::seq_checkpoint) and the kept tokens are replayed.
// The prefix cache only ever sees verified tokens.
//
// Sources: prompt lookup over the sequence's own tokens (n-gram), a replayed token list (oracle:
// benchmarks, tests) and a smaller draft model with its own context kept in step.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/engine_api.h"
#include "runtime/sampler.h"

namespace brisk {

// A proposed continuation: tokens and, per token, the distribution it was drawn from (empty: the
// tokens are deterministic, q is a point mass).
struct Draft {
  std::vector<int32_t> tokens = {};
  std::vector<TokenDistribution> q = {};
};

class DraftSource {
 public:
  virtual ~DraftSource() = default;
  virtual const char* name() const = 0;
  // Up to n_max tokens to follow `history` (the request's prompt, its verified output and the
  // pending token, in order) of the sequence in slot `slot`. `sampling`: the request's settings
  // (a drafting model draws with them). May propose nothing.
  virtual void propose(int32_t slot, const std::vector<int32_t>& history, int32_t n_max,
                       const SamplerParams& sampling, Draft* out) = 0;
};

// Prompt lookup: the continuation of the latest earlier occurrence of the last n tokens, for n
// from ngram_max down to ngram_min (the longest match wins).
struct NgramOptions {
  int32_t ngram_min = 1;  // llama.cpp's lookup decoding: LLAMA_NGRAM_MIN / LLAMA_NGRAM_MAX
  int32_t ngram_max = 4;
};
std::unique_ptr<DraftSource> draft_source_ngram(const NgramOptions& options);

// The continuation of `tokens` (prompt followed by the expected output) wherever the history is
// a prefix of it; nothing elsewhere. bench --spec oracle replays the model's own greedy output.
std::unique_ptr<DraftSource> draft_source_oracle(std::vector<int32_t> tokens);

// A draft model with its own context (n_seq_max sequences like the target's, positions up to
// n_ctx): per slot it remembers the tokens its KV holds, keeps their longest common prefix with
// the history, decodes the rest and then drafts token by token (greedy at temperature 0, else
// drawn from its own distribution under the request's settings without penalties). Throws when
// the vocabularies differ, naming both sizes.
struct DraftModelOptions {
  std::shared_ptr<const Model> model = nullptr;
  std::string name = {};           // for messages: the draft model's path
  std::string target_name = {};    // the target model's path
  int32_t target_n_vocab = 0;      // the target's output rows
  int32_t target_n_tokens = 0;     // the target tokenizer's vocabulary (0: none)
  ContextOptions context = {};
};
std::unique_ptr<DraftSource> draft_source_model(const DraftModelOptions& options);

// What a scheduler does with a draft source.
struct SpecOptions {
  std::shared_ptr<DraftSource> source = nullptr;  // nullptr: no speculation
  int32_t draft_max = 4;                // tokens drafted per step at most (>= 1)
  int32_t draft_min = 0;                // fewer proposed than this: decode plainly
  bool adaptive = true;                 // the draft length follows the recent acceptance
  // Several decoding sequences: verify all of them in one batch while at most this many decode,
  // else plain decoding for that step (SchedulerStats::spec_plain_steps).
  int32_t max_batch_seqs = 4;
  // Tokens of all verify groups of a step together at most: the CPU matmuls give rows
  // bit-identical to one-token decoding for up to 8 tokens (the GEMV's token group; the prefill
  // GEMM from 9 tokens sums in another order). Each of n decoding sequences drafts at most
  // max_verify_tokens / n - 1 tokens; where that is 0 the step decodes plainly.
  int32_t max_verify_tokens = 8;
};

// Draft length per sequence from its recent acceptance: an exponential average a of the share of
// drafted tokens kept; the i-th draft is kept with about a^i, so drafting stops where that falls
// under kMinWorth (a verify row costs a fraction of a decode step).
class DraftLength {
 public:
  DraftLength(int32_t draft_min, int32_t draft_max, bool adaptive);
  int32_t next() const;                            // tokens to draft now
  void update(int32_t drafted, int32_t accepted);  // after a verify
  double rate() const { return rate_; }

 private:
  int32_t min_, max_;
  bool adaptive_;
  double rate_ = 1.0;
};

// One verify row's decision (speculative sampling): whether `draft` (drawn from q, or a point mass
// when q is null) is kept under the target distribution p, and otherwise the replacement drawn from
// the normalised residual max(0, p - q). `sampler` supplies the uniform draws.
struct VerifyPick {
  bool accepted = false;
  int32_t token = -1;
};
VerifyPick spec_verify_row(Sampler& sampler, const TokenDistribution& p, int32_t draft, const TokenDistribution* q);

}  // namespace brisk
