// Continuous batching over one Context with n_seq_max sequence slots.
//
// One worker thread owns the Context. Every step it (1) admits queued requests into slots,
// reusing the longest cached prefix of the same session key (PrefixCache: the slot's KV is
// kept in place or copied with seq_copy), (2) drops cancelled requests and frees their slot,
// (3) builds ONE batch holding the next token of every decoding sequence plus a chunk of
// pending prompt tokens (at most `prefill_chunk` per step, so a long prompt never stalls the
// streams), (4) runs Context::decode once and samples one token for every sequence that
// produced logits. Requests join between steps. Callbacks run on the worker thread and must
// not block.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/engine_api.h"
#include "runtime/sampler.h"
#include "runtime/prefix_cache.h"
#include "runtime/speculative.h"

namespace brisk {

// Picks tokens for one sequence (the engine's Sampler in production).
class TokenSampler {
 public:
  virtual ~TokenSampler() = default;
  virtual int32_t sample(const float* logits, const std::vector<bool>* allowed) = 0;  // logits: [n_vocab]
  virtual void accept(int32_t token) = 0;
  // The engine's sampler behind this one, for sampling on the device (Context::
  // set_next_device_samplers); nullptr: sample() only.
  virtual Sampler* device_sampler() { return nullptr; }
};
using SamplerFactory =
    std::function<std::unique_ptr<TokenSampler>(const SamplerParams& params, int32_t n_vocab)>;

// Restricts which tokens may come next (JSON mode, forced tool calls).
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  virtual const std::vector<bool>* allowed() = 0;  // [n_vocab] mask, nullptr: anything
  virtual void accept(int32_t token) = 0;
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct TokenEvent {
  int32_t token = 0;
  int32_t index = 0;                  // 0-based position in the completion
  int32_t cached_tokens = 0;          // prompt tokens reused (same for every event)
  float logprob = 0.0f;               // log-softmax of the raw logits (when logprobs asked)
  std::vector<TokenLogprob> top;      // best `top_logprobs` alternatives, descending
};

enum class FinishReason { stop, length, cancelled, error };
const char* finish_reason_name(FinishReason r);

struct GenerationResult {
  FinishReason reason = FinishReason::stop;
  std::string error;                  // when reason == error
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;          // prompt tokens reused from the prefix cache
  int32_t completion_tokens = 0;
  double queue_ms = 0.0;              // submit -> admitted into a slot
  double prefill_ms = 0.0;            // admitted -> first token
  double decode_ms = 0.0;             // first token -> end
  int32_t spec_steps = 0;             // verify steps (speculative decoding)
  int32_t spec_drafted = 0;           // drafted tokens verified
  int32_t spec_accepted = 0;          // drafted tokens kept
};

struct GenerationRequest {
  std::vector<int32_t> prompt;        // token ids, checked against n_vocab on submit
  int32_t max_tokens = 256;
  SamplerParams sampling;
  std::vector<int32_t> stop_tokens;   // end of generation (not passed to on_token)
  std::string session;                // prefix-cache isolation key
  int32_t logprobs = -1;              // -1: none; 0: chosen token; k: also top k
  std::unique_ptr<TokenConstraint> constraint;
  std::function<bool(const TokenEvent&)> on_token;   // false: stop here (reason stop)
  // Logits [n_vocab] of the last prompt position, before the first token is sampled (on the
  // host: that step samples no row on the device).
  std::function<void(const float* logits, int32_t n_vocab)> on_prompt_logits;
  std::function<void(const GenerationResult&)> on_done;  // called exactly once
  std::shared_ptr<std::atomic<bool>> cancel;         // set to end early (reason cancelled)
  // Speculative decoding (when the scheduler has a draft source): at most this many drafted
  // tokens per step; -1: the scheduler's draft_max, 0: off for this request.
  int32_t draft_max = -1;
};

struct SchedulerOptions {
  int32_t max_queue = 64;            // waiting requests beyond this are refused
  int32_t prefill_chunk = 256;       // prompt tokens per step, over all sequences
  PrefixCacheOptions cache;
  SpecOptions spec;                  // speculative decoding (no source: off)
};

struct SchedulerStats {
  uint64_t requests_done = 0;
  uint64_t prompt_tokens = 0;        // prompt tokens of finished/running requests
  uint64_t prefill_tokens = 0;       // prompt tokens actually decoded
  uint64_t cached_tokens = 0;        // prompt tokens reused
  uint64_t generated_tokens = 0;
  double prefill_seconds = 0.0;      // step time attributed to prompt tokens
  double decode_seconds = 0.0;       // step time attributed to generated tokens
  uint64_t steps = 0;
  uint64_t max_batch_tokens = 0;
  int32_t queue_depth = 0;
  int32_t active = 0;
  int32_t slots_cached = 0;
  int64_t cache_resident_tokens = 0;
  int32_t state_snapshots = 0;       // recurrent-state snapshots held (hybrid models)
  // Speculative decoding: verify steps (one per sequence and step), drafted and kept tokens,
  // scheduler steps that verified in one batch and steps that decoded plainly because more
  // sequences decoded than SpecOptions::max_batch_seqs (or than max_verify_tokens / 2).
  uint64_t spec_verify = 0;
  uint64_t spec_drafted = 0;
  uint64_t spec_accepted = 0;
  uint64_t spec_batched_steps = 0;
  uint64_t spec_plain_steps = 0;
};

class Scheduler {
 public:
  Scheduler(std::unique_ptr<Context> context, SamplerFactory sampler_factory, SchedulerOptions options);
  ~Scheduler();  // cancels everything still queued or running, then joins
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. Returns false (and calls nothing) when the queue is full.
  // Throws brisk::Error on an invalid request (empty prompt, token id out of range, prompt
  // longer than the context).
  bool submit(GenerationRequest request);

  // Stops admitting, cancels queued and running requests, joins the worker.
  void shutdown();
  // Waits until no request is queued or running (graceful drain).
  void wait_idle();

  // One request on the calling thread, through the same step as the worker's: on sequence
  // `seq` of a context the caller keeps, after the positions it already holds (no queue, no
  // prefix cache, no other request). max_tokens may be 0 (the prompt only). The sequence then
  // holds the prompt and every generated token but the last one sampled. Used by the CLI's
  // generate / run (runtime/generate.h), so that they and the server share one loop.
  static GenerationResult run_one(Context& ctx, int32_t seq, GenerationRequest request,
                                  SamplerFactory sampler_factory, int32_t prefill_chunk, SpecOptions spec = {});

  SchedulerStats stats() const;
  int32_t n_ctx() const { return n_ctx_; }
  int32_t n_vocab() const { return n_vocab_; }

 private:
  struct Sequence;
  void run();
  void admit_locked();
  void step();
  void finish(Sequence& seq, FinishReason reason, std::string error = {});
  // Emits a sampled token (sampler, constraint, stop ids, on_token, limits); returns how the
  // sequence ends after it, or nothing when it goes on (the token is then its pending one).
  std::optional<FinishReason> emit(Sequence& s, int32_t tok, const float* logits);
  // The drafts of s for this step, at most k_max (none: decode plainly).
  void draft_for(Sequence& s, int32_t k_max);
  // Cuts s's context back to the tokens of `kv` after a verify (recurrent state: from its
  // checkpoint, the kept tokens appended to `replay` to run again).
  void keep_verified(Sequence& s, std::vector<BatchToken>& replay);
  void clear_slot(int32_t slot);

  // run_one's: a borrowed context and no worker thread.
  Scheduler(Context& context, SamplerFactory sampler_factory, SchedulerOptions options);
  void init();

  std::unique_ptr<Context> owned_ctx_;
  Context* ctx_ = nullptr;
  SamplerFactory sampler_factory_;
  SchedulerOptions options_;
  int32_t n_ctx_ = 0;
  int32_t n_vocab_ = 0;
  int32_t n_batch_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;       // worker waits for work
  std::condition_variable idle_cv_;  // wait_idle waits for no work
  std::deque<std::unique_ptr<Sequence>> queue_;
  std::vector<std::unique_ptr<Sequence>> active_;  // touched by the worker only (size under mu_)
  PrefixCache cache_;                              // guarded by mu_
  SchedulerStats stats_;                           // guarded by mu_
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace brisk
