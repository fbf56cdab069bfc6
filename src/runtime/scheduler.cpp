#include "runtime/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"
#include "core/flags.h"
#include "core/log.h"

namespace brisk {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Log-softmax of the raw logits: the chosen token's logprob and the best `k` alternatives.
void fill_logprobs(const float* logits, int32_t n_vocab, int32_t k, TokenEvent& ev) {
  float mx = -INFINITY;
  for (int32_t i = 0; i < n_vocab; ++i) mx = std::max(mx, logits[i]);
  double sum = 0.0;
  for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp(double(logits[i]) - mx);
  const double log_z = double(mx) + std::log(sum);
  ev.logprob = float(double(logits[ev.token]) - log_z);
  k = std::min(k, n_vocab);
  if (k <= 0) return;
  std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
  for (int32_t i = 0; i < n_vocab; ++i) ids[size_t(i)] = i;
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  ev.top.reserve(size_t(k));
  for (int32_t j = 0; j < k; ++j)
    ev.top.push_back({ids[size_t(j)], float(double(logits[ids[size_t(j)]]) - log_z)});
}

}  // namespace

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::cancelled: return "cancelled";
    case FinishReason::error: return "error";
  }
  return "error";
}

struct Scheduler::Sequence {
  GenerationRequest req;
  SlotPlan plan;
  int32_t slot = -1;
  std::vector<int32_t> kv;      // tokens in this slot's KV, in position order
  size_t n_prompt_done = 0;     // prompt tokens in KV
  int32_t pending = -1;         // sampled, not yet decoded
  int32_t n_generated = 0;
  std::unique_ptr<TokenSampler> sampler;
  GenerationResult result;
  Clock::time_point submitted, admitted, first_token;
  bool done = false;
  bool prepared = false;        // admission's KV work (evict/copy/truncate) done
  bool pinned = false;          // run_one: the caller's slot and KV, kept as they end
  int32_t pos0 = 0;             // positions the slot held before `kv` (run_one)
  std::vector<int32_t> out;     // generated tokens, in order (the pending one last)
  int32_t row0 = 0;             // first logits row of this step
  Draft draft;                  // this step's drafted tokens (speculative decoding)
  std::unique_ptr<DraftLength> length;  // adaptive draft length
  TokenDistribution p;          // scratch: the target distribution of a verify row
};

Scheduler::Scheduler(std::unique_ptr<Context> context, SamplerFactory sampler_factory,
                     SchedulerOptions options)
    : owned_ctx_(std::move(context)),
      ctx_(owned_ctx_.get()),
      sampler_factory_(std::move(sampler_factory)),
      options_(options),
      cache_(ctx_ ? ctx_->options().n_seq_max : 0, options.cache) {
  init();
  worker_ = std::thread([this] { run(); });
}

Scheduler::Scheduler(Context& context, SamplerFactory sampler_factory, SchedulerOptions options)
    : ctx_(&context),
      sampler_factory_(std::move(sampler_factory)),
      options_(options),
      cache_(1, options.cache) {  // (not used)
  init();
}

void Scheduler::init() {
  BRISK_CHECK(ctx_ != nullptr, "scheduler: no context");
  BRISK_CHECK(sampler_factory_ != nullptr, "scheduler: no sampler factory");
  n_ctx_ = ctx_->options().n_ctx;
  n_vocab_ = ctx_->n_vocab();
  n_batch_ = std::max(1, ctx_->options().n_batch);
  options_.prefill_chunk = std::clamp(options_.prefill_chunk, 1, n_batch_);
  if (options_.spec.source && options_.spec.source->wants_hidden())
    BRISK_CHECK(ctx_->set_keep_hidden(true), "speculative decoding (", options_.spec.source->name(),
                "): the context cannot keep the model's hidden states");
}

void Scheduler::show_draft_source(const std::vector<BatchToken>& batch) {
  if (options_.spec.source && options_.spec.source->wants_hidden()) options_.spec.source->observe(batch, *ctx_);
}

GenerationResult Scheduler::run_one(Context& ctx, int32_t seq, GenerationRequest request,
                                    SamplerFactory sampler_factory, int32_t prefill_chunk, SpecOptions spec) {
  Scheduler sched(ctx, std::move(sampler_factory),
                  SchedulerOptions{.max_queue = 1, .prefill_chunk = prefill_chunk, .cache = {}, .spec = std::move(spec)});
  BRISK_CHECK(seq >= 0 && seq < ctx.options().n_seq_max, "sequence ", seq, " outside [0, ", ctx.options().n_seq_max,
              ")");
  BRISK_CHECK(!request.prompt.empty(), "request has an empty prompt");
  BRISK_CHECK(request.max_tokens >= 0, "max_tokens must not be negative, got ", request.max_tokens);
  const int32_t pos0 = ctx.seq_length(seq);
  BRISK_CHECK(int64_t(pos0) + int64_t(request.prompt.size()) <= sched.n_ctx_, "prompt of ", request.prompt.size(),
              " tokens does not fit the context (", sched.n_ctx_ - pos0, " positions left)");
  for (size_t i = 0; i < request.prompt.size(); ++i)
    BRISK_CHECK(request.prompt[i] >= 0 && request.prompt[i] < sched.n_vocab_, "prompt token ", i, " has id ",
                request.prompt[i], " outside the vocabulary [0, ", sched.n_vocab_, ")");
  auto s = std::make_unique<Sequence>();
  s->req = std::move(request);
  s->pinned = true;
  s->slot = seq;
  s->pos0 = pos0;
  s->submitted = s->admitted = Clock::now();
  s->result.prompt_tokens = int32_t(s->req.prompt.size());
  s->sampler = sched.sampler_factory_(s->req.sampling, sched.n_vocab_);
  s->prepared = true;
  GenerationResult out;
  auto on_done = std::move(s->req.on_done);
  s->req.on_done = [&out, &on_done](const GenerationResult& r) {
    out = r;
    if (on_done) on_done(r);
  };
  Sequence& one = *s;
  sched.active_.push_back(std::move(s));
  while (!one.done) sched.step();
  return out;
}

Scheduler::~Scheduler() { shutdown(); }

bool Scheduler::submit(GenerationRequest request) {
  BRISK_CHECK(!request.prompt.empty(), "request has an empty prompt");
  BRISK_CHECK(int64_t(request.prompt.size()) <= n_ctx_, "prompt of ", request.prompt.size(),
              " tokens does not fit the context of ", n_ctx_, " tokens");
  for (size_t i = 0; i < request.prompt.size(); ++i)
    BRISK_CHECK(request.prompt[i] >= 0 && request.prompt[i] < n_vocab_, "prompt token ", i, " has id ",
                request.prompt[i], " outside the vocabulary [0, ", n_vocab_, ")");
  BRISK_CHECK(request.max_tokens >= 1, "max_tokens must be at least 1, got ", request.max_tokens);
  BRISK_CHECK(request.logprobs <= 20, "top_logprobs must be at most 20, got ", request.logprobs);
  auto seq = std::make_unique<Sequence>();
  seq->req = std::move(request);
  seq->submitted = Clock::now();
  seq->result.prompt_tokens = int32_t(seq->req.prompt.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || int32_t(queue_.size()) >= options_.max_queue) return false;
    queue_.push_back(std::move(seq));
  }
  cv_.notify_one();
  return true;
}

void Scheduler::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void Scheduler::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [&] { return (queue_.empty() && active_.empty()) || stopping_; });
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  SchedulerStats s = stats_;
  s.queue_depth = int32_t(queue_.size());
  s.active = int32_t(active_.size());
  s.slots_cached = cache_.n_state(SlotState::cached);
  s.cache_resident_tokens = cache_.cached_tokens();
  return s;
}

void Scheduler::clear_slot(int32_t slot) {
  try {
    ctx_->seq_truncate(slot, 0);
  } catch (const std::exception& e) {
    log_error("scheduler: clearing slot ", slot, " failed: ", e.what());
  }
}

// Moves queued requests into slots while the prefix cache finds room (FIFO: the head waits
// rather than being overtaken).
void Scheduler::admit_locked() {
  while (!queue_.empty()) {
    Sequence& seq = *queue_.front();
    if (seq.req.cancel && seq.req.cancel->load()) {
      // Cancelled while queued: answered without ever taking a slot.
      seq.slot = -1;
      active_.push_back(std::move(queue_.front()));
      queue_.pop_front();
      continue;
    }
    // A model with recurrent state can be cut back only where it has a snapshot.
    SlotPlan plan = cache_.acquire(seq.req.session, seq.req.prompt, int32_t(seq.req.prompt.size()) - 1,
                                   [this](int32_t slot, int32_t n) { return ctx_->seq_restorable(slot, n); });
    if (plan.slot < 0) break;
    seq.slot = plan.slot;
    seq.plan = std::move(plan);
    seq.admitted = Clock::now();
    active_.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
}

void Scheduler::finish(Sequence& seq, FinishReason reason, std::string error) {
  if (seq.done) return;
  seq.done = true;
  const auto now = Clock::now();
  GenerationResult& r = seq.result;
  r.reason = reason;
  r.error = std::move(error);
  r.completion_tokens = seq.n_generated;
  if (seq.slot >= 0) {  // (queue_ms: 0 for run_one's)
    r.queue_ms = ms_between(seq.submitted, seq.admitted);
    if (seq.n_generated > 0 || seq.pending >= 0) {
      r.prefill_ms = ms_between(seq.admitted, seq.first_token);
      r.decode_ms = ms_between(seq.first_token, now);
    } else {
      r.prefill_ms = ms_between(seq.admitted, now);
    }
  } else {
    r.queue_ms = ms_between(seq.submitted, now);
  }
  std::vector<int32_t> to_clear;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (seq.slot >= 0 && !seq.pinned) {
      const bool keep = seq.prepared && (reason == FinishReason::stop || reason == FinishReason::length);
      if (keep) {
        to_clear = cache_.release_cached(seq.slot, seq.kv);
      } else {
        cache_.release_free(seq.slot);
        to_clear.push_back(seq.slot);
      }
    }
    stats_.requests_done++;
    stats_.prompt_tokens += uint64_t(r.prompt_tokens);
    stats_.cached_tokens += uint64_t(r.cached_tokens);
  }
  for (int32_t s : to_clear) clear_slot(s);
  if (seq.req.on_done) {
    try {
      seq.req.on_done(r);
    } catch (const std::exception& e) {
      log_error("scheduler: completion callback failed: ", e.what());
    }
  }
}

void Scheduler::run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || !active_.empty(); });
      if (stopping_) break;
      admit_locked();
    }
    step();
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.state_snapshots = ctx_->state_snapshots();
      active_.erase(std::remove_if(active_.begin(), active_.end(), [](const auto& s) { return s->done; }),
                    active_.end());
      if (queue_.empty() && active_.empty()) idle_cv_.notify_all();
    }
  }
  // Shutdown: everything still queued or running ends as cancelled.
  std::vector<std::unique_ptr<Sequence>> rest;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& s : active_) rest.push_back(std::move(s));
    for (auto& s : queue_) rest.push_back(std::move(s));
    active_.clear();
    queue_.clear();
  }
  for (auto& s : rest) finish(*s, FinishReason::cancelled);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int32_t slot : cache_.clear_cached()) clear_slot(slot);
  }
  idle_cv_.notify_all();
}

void Scheduler::step() {
  // Work on the sequences admitted before this step (the vector only grows under mu_ in
  // admit_locked, which runs on this thread).
  std::vector<Sequence*> seqs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& s : active_)
      if (!s->done) seqs.push_back(s.get());
  }

  // 1. Admission KV work, cancellations.
  for (Sequence* s : seqs) {
    if (s->req.cancel && s->req.cancel->load()) {
      finish(*s, FinishReason::cancelled);
      continue;
    }
    if (s->prepared) continue;
    try {
      for (int32_t victim : s->plan.evicted) ctx_->seq_truncate(victim, 0);
      if (s->plan.copy_from >= 0) {
        ctx_->seq_copy(s->plan.copy_from, s->slot, s->plan.reuse_tokens);
      } else {
        ctx_->seq_truncate(s->slot, s->plan.reuse_tokens);
      }
      // Fewer (none) when the model's sliding-window layers no longer hold the window before
      // the planned length: those positions are computed again.
      const int32_t reuse = ctx_->seq_length(s->slot);
      BRISK_CHECK(reuse == s->plan.reuse_tokens || reuse == 0, "slot ", s->slot, " holds ", reuse,
                  " positions after reuse of ", s->plan.reuse_tokens);
      s->kv.assign(s->req.prompt.begin(), s->req.prompt.begin() + reuse);
      if (reuse != s->plan.reuse_tokens) {
        std::lock_guard<std::mutex> lock(mu_);
        cache_.update(s->slot, s->kv);
      }
      s->n_prompt_done = size_t(reuse);
      s->result.cached_tokens = reuse;
      s->sampler = sampler_factory_(s->req.sampling, n_vocab_);
      s->prepared = true;
    } catch (const std::exception& e) {
      finish(*s, FinishReason::error, e.what());
    }
  }

  // 2. Drafts (speculative decoding) while few enough sequences decode, then one batch: the
  // next token of every decoding sequence (with its drafts: the verify group), then prompt chunks.
  int32_t n_decoding = 0;
  for (Sequence* s : seqs) n_decoding += !s->done && s->pending >= 0 ? 1 : 0;
  const bool speculate = options_.spec.source && !flags().no_spec && n_decoding > 0;
  const int32_t per_seq = options_.spec.max_verify_tokens / std::max(1, n_decoding) - 1;  // drafts each
  const bool batched = speculate && n_decoding <= std::max(1, options_.spec.max_batch_seqs) && per_seq >= 1;
  for (Sequence* s : seqs) {
    s->draft.tokens.clear();
    s->draft.q.clear();
    if (!batched || s->done || s->pending < 0) continue;
    try {
      draft_for(*s, per_seq);
    } catch (const std::exception& e) {
      finish(*s, FinishReason::error, str_cat("drafting failed: ", e.what()));
    }
  }
  if (speculate) {
    std::lock_guard<std::mutex> lock(mu_);
    (batched ? stats_.spec_batched_steps : stats_.spec_plain_steps)++;
  }

  std::vector<BatchToken> batch;
  std::vector<Sequence*> logit_rows;               // owner of each logits row, in order
  std::vector<std::pair<Sequence*, size_t>> fills;  // prompt tokens added per sequence
  std::vector<Sequence*> decoding;
  for (Sequence* s : seqs) {
    if (s->done || s->pending < 0) continue;
    const int32_t pos = s->pos0 + int32_t(s->kv.size());
    s->row0 = int32_t(logit_rows.size());
    batch.push_back({.token = s->pending, .pos = pos, .seq = s->slot, .want_logits = true});
    logit_rows.push_back(s);
    for (size_t i = 0; i < s->draft.tokens.size(); ++i) {
      batch.push_back({.token = s->draft.tokens[i], .pos = pos + 1 + int32_t(i), .seq = s->slot, .want_logits = true});
      logit_rows.push_back(s);
    }
    decoding.push_back(s);
  }
  const size_t n_decode = batch.size();
  int64_t budget = std::min<int64_t>(options_.prefill_chunk, int64_t(n_batch_) - int64_t(batch.size()));
  for (Sequence* s : seqs) {
    if (s->done || s->pending >= 0 || budget <= 0) continue;
    const size_t left = s->req.prompt.size() - s->n_prompt_done;
    const size_t take = size_t(std::min<int64_t>(budget, int64_t(left)));
    for (size_t i = 0; i < take; ++i) {
      const size_t p = s->n_prompt_done + i;
      const bool last = p + 1 == s->req.prompt.size();
      batch.push_back({.token = s->req.prompt[p], .pos = s->pos0 + int32_t(p), .seq = s->slot, .want_logits = last});
      if (last) {
        s->row0 = int32_t(logit_rows.size());
        logit_rows.push_back(s);
      }
    }
    fills.emplace_back(s, take);
    budget -= int64_t(take);
  }
  if (batch.empty()) return;

  // 3. One forward. Its rows are sampled on the device (only ids come back) when every row's
  // sampler can run there and no row needs its logits (constraint masks, logprobs, a verify
  // that compares distributions). A greedy verify row needs only its argmax: a draft is kept
  // when it equals the row's id, and without penalties the id does not depend on the drafts
  // kept before it.
  std::vector<Sampler*> on_device;
  for (Sequence* s : logit_rows) {
    Sampler* d = s->sampler->device_sampler();
    const bool verify_on_host = !s->draft.tokens.empty() &&
                                (!d || !d->greedy() || d->uses_history() || flags().no_spec_device_verify);
    const bool wants_logits = s->req.constraint || s->req.logprobs >= 0 || verify_on_host ||
                              (s->req.on_prompt_logits && s->n_generated == 0 && s->pending < 0);
    if (wants_logits) d = nullptr;
    if (!d) {
      on_device.clear();
      break;
    }
    on_device.push_back(d);
  }
  const auto t0 = Clock::now();
  const int32_t* device_ids = nullptr;
  try {
    const bool ids = !on_device.empty() && ctx_->set_next_device_samplers(std::move(on_device));
    ctx_->decode(batch);
    if (ids) device_ids = ctx_->device_ids();
    show_draft_source(batch);
  } catch (const std::exception& e) {
    std::string msg = str_cat("decode failed: ", e.what());
    for (Sequence* s : logit_rows) finish(*s, FinishReason::error, msg);
    for (auto& [s, n] : fills) finish(*s, FinishReason::error, msg);
    return;
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  {
    std::lock_guard<std::mutex> lock(mu_);
    const double n = double(batch.size());
    stats_.steps++;
    stats_.max_batch_tokens = std::max<uint64_t>(stats_.max_batch_tokens, batch.size());
    stats_.prefill_tokens += batch.size() - n_decode;
    stats_.prefill_seconds += secs * double(batch.size() - n_decode) / n;
    stats_.decode_seconds += secs * double(n_decode) / n;
  }
  for (auto& [s, n] : fills) {
    s->kv.insert(s->kv.end(), s->req.prompt.begin() + long(s->n_prompt_done),
                 s->req.prompt.begin() + long(s->n_prompt_done + n));
    s->n_prompt_done += n;
    if (s->n_prompt_done == s->req.prompt.size() && !s->pinned) {
      std::lock_guard<std::mutex> lock(mu_);
      cache_.update(s->slot, s->kv);  // the prompt can now be shared by concurrent requests
    }
  }

  // 4. Decoding sequences: the verify group's rows in order, each draft kept while the target's
  // sampler agrees (speculative.h), then the KV cut back to the kept tokens (recurrent state
  // replayed in one more forward) before a sequence that ended is finished.
  std::vector<BatchToken> replay;
  std::vector<std::pair<Sequence*, FinishReason>> ended;
  for (Sequence* sp : decoding) {
    Sequence& s = *sp;
    if (s.done) continue;
    try {
      const int32_t k = int32_t(s.draft.tokens.size());
      std::vector<int32_t> group{s.pending};
      group.insert(group.end(), s.draft.tokens.begin(), s.draft.tokens.end());
      s.pending = -1;
      Sampler* smp = s.sampler->device_sampler();
      int32_t accepted = 0;
      std::optional<FinishReason> end;
      for (int32_t i = 0; i <= k; ++i) {
        s.kv.push_back(group[size_t(i)]);
        const int32_t row = s.row0 + i;
        const float* logits = device_ids ? nullptr : ctx_->logits(row);
        const std::vector<bool>* allowed = s.req.constraint ? s.req.constraint->allowed() : nullptr;
        int32_t tok;
        bool kept = false;
        if (device_ids) {
          tok = device_ids[row];
          BRISK_CHECK(tok >= 0, "sampling on the device: every token is banned");
          kept = i < k && tok == group[size_t(i) + 1];  // greedy (step 3)
        } else if (i == k || smp->greedy()) {
          tok = s.sampler->sample(logits, allowed);
          kept = i < k && tok == group[size_t(i) + 1];
        } else {
          smp->distribution(logits, allowed, &s.p);
          const VerifyPick v = spec_verify_row(*smp, s.p, group[size_t(i) + 1], s.draft.q.empty() ? nullptr : &s.draft.q[size_t(i)]);
          tok = v.token;
          kept = v.accepted;
        }
        accepted += kept ? 1 : 0;
        end = emit(s, tok, logits);
        if (end || !kept) break;
      }
      if (k > 0) {
        if (s.length && !end) s.length->update(k, accepted);
        s.result.spec_steps++;
        s.result.spec_drafted += k;
        s.result.spec_accepted += accepted;
        std::lock_guard<std::mutex> lock(mu_);
        stats_.spec_verify++;
        stats_.spec_drafted += uint64_t(k);
        stats_.spec_accepted += uint64_t(accepted);
      }
      keep_verified(s, replay);
      if (end) ended.emplace_back(&s, *end);
    } catch (const std::exception& e) {
      finish(s, FinishReason::error, e.what());
    }
  }
  if (!replay.empty()) {
    try {
      ctx_->decode(replay);
      show_draft_source(replay);
    } catch (const std::exception& e) {
      std::string msg = str_cat("replay after a rejected draft failed: ", e.what());
      for (Sequence* s : decoding) finish(*s, FinishReason::error, msg);
    }
  }
  for (auto& [s, reason] : ended) finish(*s, reason);

  // 5. Sequences whose prompt ended: sample their first token.
  for (auto& [sp, n] : fills) {
    Sequence& s = *sp;
    if (s.done || s.n_prompt_done != s.req.prompt.size()) continue;
    try {
      const int32_t row = s.row0;
      const float* logits = device_ids ? nullptr : ctx_->logits(row);
      if (s.n_generated == 0 && s.req.on_prompt_logits) s.req.on_prompt_logits(logits, n_vocab_);
      if (s.req.max_tokens == 0) {  // run_one: the prompt only
        finish(s, FinishReason::length);
        continue;
      }
      const std::vector<bool>* allowed = s.req.constraint ? s.req.constraint->allowed() : nullptr;
      const int32_t tok = device_ids ? device_ids[row] : s.sampler->sample(logits, allowed);
      BRISK_CHECK(!device_ids || tok >= 0, "sampling on the device: every token is banned");
      if (const auto end = emit(s, tok, logits)) finish(s, *end);
    } catch (const std::exception& e) {
      finish(s, FinishReason::error, e.what());
    }
  }
}

void Scheduler::draft_for(Sequence& s, int32_t k_max) {
  const SpecOptions& sp = options_.spec;
  Sampler* smp = s.sampler ? s.sampler->device_sampler() : nullptr;
  if (s.req.draft_max == 0 || !smp) return;
  if (!s.length) s.length = std::make_unique<DraftLength>(sp.draft_min, sp.draft_max, sp.adaptive);
  int64_t k = s.length->next();
  if (s.req.draft_max > 0) k = std::min<int64_t>(k, s.req.draft_max);
  k = std::min<int64_t>(k, k_max);
  // The group emits up to k + 1 tokens, and its k + 1 positions must fit the context.
  const int64_t pos = s.pos0 + int64_t(s.kv.size());
  k = std::min({k, int64_t(s.req.max_tokens) - s.n_generated - 1, int64_t(n_ctx_) - pos - 1, int64_t(n_batch_) - 1});
  if (k <= 0) return;
  std::vector<int32_t> history = s.req.prompt;
  history.insert(history.end(), s.out.begin(), s.out.end());
  sp.source->propose(s.slot, history, s.pos0, int32_t(k), smp->params(), &s.draft);
  Draft& d = s.draft;
  size_t n = std::min(d.tokens.size(), size_t(k));
  for (size_t i = 0; i < n; ++i)
    if (d.tokens[i] < 0 || d.tokens[i] >= n_vocab_) n = i;  // never verify an id the model has no row for
  BRISK_CHECK(d.q.empty() || d.q.size() >= n, "draft source ", sp.source->name(), " gave ", d.q.size(),
              " distributions for ", n, " tokens");
  d.tokens.resize(n);
  if (!d.q.empty()) d.q.resize(n);
  if (int32_t(n) < std::max(1, sp.draft_min) || !ctx_->seq_checkpoint(s.slot)) {
    d.tokens.clear();
    d.q.clear();
  }
}

void Scheduler::keep_verified(Sequence& s, std::vector<BatchToken>& replay) {
  const int32_t want = s.pos0 + int32_t(s.kv.size());
  if (ctx_->seq_length(s.slot) == want) return;
  const int32_t from = ctx_->seq_restorable(s.slot, want);
  BRISK_CHECK(from >= s.pos0, "speculative decoding: sequence ", s.slot, " cannot be cut back to ", want,
              " positions (restorable at ", from, ")");
  ctx_->seq_truncate(s.slot, from);
  for (int32_t p = from; p < want; ++p)
    replay.push_back({.token = s.kv[size_t(p - s.pos0)], .pos = p, .seq = s.slot, .want_logits = false});
}

std::optional<FinishReason> Scheduler::emit(Sequence& s, int32_t tok, const float* logits) {
  BRISK_CHECK(tok >= 0 && tok < n_vocab_, "sampler returned token ", tok, " outside [0, ", n_vocab_, ")");
  s.sampler->accept(tok);
  if (s.req.constraint) s.req.constraint->accept(tok);
  if (s.n_generated == 0) s.first_token = Clock::now();
  if (std::find(s.req.stop_tokens.begin(), s.req.stop_tokens.end(), tok) != s.req.stop_tokens.end())
    return FinishReason::stop;
  TokenEvent ev;
  ev.token = tok;
  ev.index = s.n_generated;
  ev.cached_tokens = s.result.cached_tokens;
  if (s.req.logprobs >= 0) fill_logprobs(logits, n_vocab_, s.req.logprobs, ev);
  s.n_generated++;
  s.out.push_back(tok);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.generated_tokens++;
  }
  const bool go = s.req.on_token ? s.req.on_token(ev) : true;
  if (!go) return FinishReason::stop;
  if (s.n_generated >= s.req.max_tokens || s.pos0 + int64_t(s.kv.size()) + 1 > n_ctx_) return FinishReason::length;
  s.pending = tok;
  return std::nullopt;
}

}  // namespace brisk
