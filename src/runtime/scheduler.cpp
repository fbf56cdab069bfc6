#include "runtime/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"
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
}

GenerationResult Scheduler::run_one(Context& ctx, int32_t seq, GenerationRequest request,
                                    SamplerFactory sampler_factory, int32_t prefill_chunk) {
  Scheduler sched(ctx, std::move(sampler_factory),
                  SchedulerOptions{.max_queue = 1, .prefill_chunk = prefill_chunk, .cache = {}});
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
      const int32_t reuse = s->plan.reuse_tokens;
      if (s->plan.copy_from >= 0) {
        ctx_->seq_copy(s->plan.copy_from, s->slot, reuse);
      } else {
        ctx_->seq_truncate(s->slot, reuse);
      }
      BRISK_CHECK(ctx_->seq_length(s->slot) == reuse, "slot ", s->slot, " holds ",
                  ctx_->seq_length(s->slot), " positions after reuse of ", reuse);
      s->kv.assign(s->req.prompt.begin(), s->req.prompt.begin() + reuse);
      s->n_prompt_done = size_t(reuse);
      s->result.cached_tokens = reuse;
      s->sampler = sampler_factory_(s->req.sampling, n_vocab_);
      s->prepared = true;
    } catch (const std::exception& e) {
      finish(*s, FinishReason::error, e.what());
    }
  }

  // 2. One batch: the next token of every decoding sequence, then prompt chunks.
  std::vector<BatchToken> batch;
  std::vector<Sequence*> logit_rows;               // owner of each logits row, in order
  std::vector<std::pair<Sequence*, size_t>> fills;  // prompt tokens added per sequence
  for (Sequence* s : seqs) {
    if (s->done || s->pending < 0) continue;
    batch.push_back({.token = s->pending, .pos = s->pos0 + int32_t(s->kv.size()), .seq = s->slot, .want_logits = true});
    logit_rows.push_back(s);
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
      if (last) logit_rows.push_back(s);
    }
    fills.emplace_back(s, take);
    budget -= int64_t(take);
  }
  if (batch.empty()) return;

  // 3. One forward. Its rows are sampled on the device (only ids come back) when every row's
  // sampler can run there and no row needs its logits (constraint masks, logprobs).
  std::vector<Sampler*> on_device;
  for (Sequence* s : logit_rows) {
    const bool wants_logits = s->req.constraint || s->req.logprobs >= 0 ||
                              (s->req.on_prompt_logits && s->n_generated == 0 && s->pending < 0);
    Sampler* d = wants_logits ? nullptr : s->sampler->device_sampler();
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
  for (size_t i = 0; i < n_decode; ++i) {
    Sequence* s = logit_rows[i];
    s->kv.push_back(s->pending);
    s->pending = -1;
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

  // 4. Sample one token per logits row.
  for (size_t row = 0; row < logit_rows.size(); ++row) {
    Sequence& s = *logit_rows[row];
    if (s.done) continue;
    try {
      const float* logits = device_ids ? nullptr : ctx_->logits(int32_t(row));
      if (s.n_generated == 0 && s.req.on_prompt_logits) s.req.on_prompt_logits(logits, n_vocab_);
      if (s.req.max_tokens == 0) {  // run_one: the prompt only
        finish(s, FinishReason::length);
        continue;
      }
      const std::vector<bool>* allowed = s.req.constraint ? s.req.constraint->allowed() : nullptr;
      const int32_t tok = device_ids ? device_ids[row] : s.sampler->sample(logits, allowed);
      BRISK_CHECK(!device_ids || tok >= 0, "sampling on the device: every token is banned");
      BRISK_CHECK(tok >= 0 && tok < n_vocab_, "sampler returned token ", tok, " outside [0, ", n_vocab_, ")");
      s.sampler->accept(tok);
      if (s.req.constraint) s.req.constraint->accept(tok);
      if (s.n_generated == 0) s.first_token = Clock::now();
      if (std::find(s.req.stop_tokens.begin(), s.req.stop_tokens.end(), tok) != s.req.stop_tokens.end()) {
        finish(s, FinishReason::stop);
        continue;
      }
      TokenEvent ev;
      ev.token = tok;
      ev.index = s.n_generated;
      ev.cached_tokens = s.result.cached_tokens;
      if (s.req.logprobs >= 0) fill_logprobs(logits, n_vocab_, s.req.logprobs, ev);
      s.n_generated++;
      {
        std::lock_guard<std::mutex> lock(mu_);
        stats_.generated_tokens++;
      }
      const bool go = s.req.on_token ? s.req.on_token(ev) : true;
      if (!go) {
        finish(s, FinishReason::stop);
      } else if (s.n_generated >= s.req.max_tokens || s.pos0 + int64_t(s.kv.size()) + 1 > n_ctx_) {
        finish(s, FinishReason::length);
      } else {
        s.pending = tok;
      }
    } catch (const std::exception& e) {
      finish(s, FinishReason::error, e.what());
    }
  }
}

}  // namespace brisk
