// Scheduler (continuous batching, chunked prefill, cancellation, prefix cache) on the fake engine.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "fake_engine.h"
#include "runtime/engine_sampler.h"
#include "runtime/scheduler.h"
#include "runtime/speculative.h"
#include "scoped_env.h"

using namespace brisk;
using brisk::testing::FakeContext;

namespace {

constexpr int32_t kVocab = 97;

struct Collector {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int32_t> tokens;
  std::vector<TokenEvent> events;
  bool done = false;
  GenerationResult result;

  GenerationRequest request(std::vector<int32_t> prompt, int32_t max_tokens, std::string session = "") {
    GenerationRequest r;
    r.prompt = std::move(prompt);
    r.max_tokens = max_tokens;
    r.session = std::move(session);
    r.on_token = [this](const TokenEvent& ev) {
      std::lock_guard<std::mutex> l(mu);
      tokens.push_back(ev.token);
      events.push_back(ev);
      return true;
    };
    r.on_done = [this](const GenerationResult& res) {
      std::lock_guard<std::mutex> l(mu);
      result = res;
      done = true;
      cv.notify_all();
    };
    return r;
  }
  void wait() {
    std::unique_lock<std::mutex> l(mu);
    ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(30), [&] { return done; })) << "request never finished";
  }
};

std::vector<int32_t> make_prompt(int32_t n, int32_t seed) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i < n; ++i) p.push_back(int32_t((uint32_t(i) * 31u + uint32_t(seed) * 17u + 5u) % kVocab));
  return p;
}

struct Rig {
  FakeContext* ctx = nullptr;
  std::unique_ptr<Scheduler> sched;
  Rig(int32_t n_seq, SchedulerOptions opt = {}, int32_t n_ctx = 512, int32_t n_batch = 64) {
    auto c = std::make_unique<FakeContext>(ContextOptions{.n_ctx = n_ctx, .n_seq_max = n_seq, .n_batch = n_batch}, kVocab);
    ctx = c.get();
    sched = std::make_unique<Scheduler>(std::move(c), brisk::testing::greedy_factory(), opt);
  }
};

}  // namespace

TEST(Scheduler, SingleRequestMatchesDirectGreedy) {
  Rig rig(2);
  Collector c;
  const auto prompt = make_prompt(20, 1);
  ASSERT_TRUE(rig.sched->submit(c.request(prompt, 12)));
  c.wait();
  EXPECT_EQ(c.tokens, brisk::testing::fake_greedy(prompt, 12, kVocab));
  EXPECT_EQ(c.result.reason, FinishReason::length);
  EXPECT_EQ(c.result.prompt_tokens, 20);
  EXPECT_EQ(c.result.completion_tokens, 12);
}

TEST(Scheduler, BatchedEqualsAloneAndBatchesAreShared) {
  SchedulerOptions opt;
  opt.prefill_chunk = 24;
  Rig rig(4, opt);
  constexpr int kN = 12;
  std::vector<Collector> cs(kN);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < kN; ++i) prompts.push_back(make_prompt(5 + i * 9, 100 + i));  // 5 .. 104 tokens
  for (int i = 0; i < kN; ++i) ASSERT_TRUE(rig.sched->submit(cs[size_t(i)].request(prompts[size_t(i)], 10 + i, brisk::str_cat("s", i))));
  for (auto& c : cs) c.wait();
  for (int i = 0; i < kN; ++i)
    EXPECT_EQ(cs[size_t(i)].tokens, brisk::testing::fake_greedy(prompts[size_t(i)], 10 + i, kVocab)) << "request " << i;
  const auto sizes = rig.ctx->batch_sizes();
  const int32_t biggest = *std::max_element(sizes.begin(), sizes.end());
  EXPECT_GT(biggest, 1);
  EXPECT_LE(biggest, 24 + 4);  // prefill chunk + one token per decoding slot
}

TEST(Scheduler, LongPromptDoesNotStallStreams) {
  SchedulerOptions opt;
  opt.prefill_chunk = 8;
  Rig rig(2, opt);
  Collector shortc, longc;
  std::atomic<int> long_first_at{-1};
  auto sreq = shortc.request(make_prompt(4, 7), 60);
  ASSERT_TRUE(rig.sched->submit(std::move(sreq)));
  // Wait until the short one streams, then submit a 200-token prompt.
  for (int i = 0; i < 2000; ++i) {
    { std::lock_guard<std::mutex> l(shortc.mu); if (!shortc.tokens.empty()) break; }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  auto lreq = longc.request(make_prompt(200, 8), 3);
  auto inner = lreq.on_token;
  lreq.on_token = [&, inner](const TokenEvent& ev) {
    if (ev.index == 0) { std::lock_guard<std::mutex> l(shortc.mu); long_first_at = int(shortc.tokens.size()); }
    return inner(ev);
  };
  ASSERT_TRUE(rig.sched->submit(std::move(lreq)));
  shortc.wait();
  longc.wait();
  // 200 prompt tokens at 8 per step take 25 steps, during which the short stream kept going.
  EXPECT_GE(long_first_at.load(), 20);
  for (int32_t s : rig.ctx->batch_sizes()) EXPECT_LE(s, 8 + 2);
  EXPECT_EQ(longc.tokens, brisk::testing::fake_greedy(make_prompt(200, 8), 3, kVocab));
}

TEST(Scheduler, QueueFullIsRefused) {
  SchedulerOptions opt;
  opt.max_queue = 2;
  Rig rig(1, opt);
  std::mutex gate_mu;
  std::condition_variable gate_cv;
  bool open = false, entered = false;
  Collector a, b, c;
  auto ra = a.request(make_prompt(4, 1), 3);
  auto inner = ra.on_token;
  ra.on_token = [&, inner](const TokenEvent& ev) {
    std::unique_lock<std::mutex> l(gate_mu);
    entered = true;
    gate_cv.notify_all();
    gate_cv.wait(l, [&] { return open; });
    return inner(ev);
  };
  ASSERT_TRUE(rig.sched->submit(std::move(ra)));
  {
    std::unique_lock<std::mutex> l(gate_mu);
    gate_cv.wait(l, [&] { return entered; });  // the worker is inside a step now
  }
  EXPECT_TRUE(rig.sched->submit(b.request(make_prompt(4, 2), 2)));
  EXPECT_TRUE(rig.sched->submit(c.request(make_prompt(4, 3), 2)));
  Collector d;
  EXPECT_FALSE(rig.sched->submit(d.request(make_prompt(4, 4), 2)));
  EXPECT_EQ(rig.sched->stats().queue_depth, 2);
  {
    std::lock_guard<std::mutex> l(gate_mu);
    open = true;
  }
  gate_cv.notify_all();
  a.wait(); b.wait(); c.wait();
  EXPECT_EQ(b.tokens, brisk::testing::fake_greedy(make_prompt(4, 2), 2, kVocab));
}

TEST(Scheduler, CancelFreesTheSlot) {
  Rig rig(1);
  Collector c;
  auto r = c.request(make_prompt(10, 3), 400);
  auto cancel = std::make_shared<std::atomic<bool>>(false);
  r.cancel = cancel;
  auto inner = r.on_token;
  r.on_token = [cancel, inner](const TokenEvent& ev) {
    if (ev.index == 4) cancel->store(true);
    return inner(ev);
  };
  ASSERT_TRUE(rig.sched->submit(std::move(r)));
  c.wait();
  EXPECT_EQ(c.result.reason, FinishReason::cancelled);
  EXPECT_LT(c.tokens.size(), 10u);
  rig.sched->wait_idle();
  const auto st = rig.sched->stats();
  EXPECT_EQ(st.active, 0);
  EXPECT_EQ(st.slots_cached, 0);
  EXPECT_EQ(rig.ctx->seq_length(0), 0);
  // The single slot serves the next request.
  Collector d;
  ASSERT_TRUE(rig.sched->submit(d.request(make_prompt(6, 9), 4)));
  d.wait();
  EXPECT_EQ(d.tokens, brisk::testing::fake_greedy(make_prompt(6, 9), 4, kVocab));
}

TEST(Scheduler, SecondTurnReusesPrefixOfSameSessionOnly) {
  SchedulerOptions opt;
  opt.cache.block_size = 8;
  Rig rig(3, opt);
  const auto p1 = make_prompt(45, 5);
  Collector t1;
  ASSERT_TRUE(rig.sched->submit(t1.request(p1, 10, "alice")));
  t1.wait();
  EXPECT_EQ(t1.result.cached_tokens, 0);
  // Turn 2: history + answer + new user text.
  auto p2 = p1;
  p2.insert(p2.end(), t1.tokens.begin(), t1.tokens.end());
  const auto more = make_prompt(12, 6);
  p2.insert(p2.end(), more.begin(), more.end());
  Collector t2;
  ASSERT_TRUE(rig.sched->submit(t2.request(p2, 6, "alice")));
  t2.wait();
  // KV held 45 + 9 tokens (the last sampled token is never decoded): 6 whole blocks of 8.
  EXPECT_EQ(t2.result.cached_tokens, 48);
  EXPECT_EQ(t2.tokens, brisk::testing::fake_greedy(p2, 6, kVocab));
  // Another session with the same prompt shares nothing.
  Collector t3;
  ASSERT_TRUE(rig.sched->submit(t3.request(p2, 6, "bob")));
  t3.wait();
  EXPECT_EQ(t3.result.cached_tokens, 0);
  EXPECT_EQ(t3.tokens, t2.tokens);
  EXPECT_EQ(rig.sched->stats().cached_tokens, 48u);
}

// A model whose sliding-window layers released the positions before the reusable prefix's
// end keeps none of it: the request computes its whole prompt again (and gives the same
// answer) instead of failing.
TEST(Scheduler, ReuseThatTheCacheCannotKeepIsComputedAgain) {
  SchedulerOptions opt;
  opt.cache.block_size = 8;
  Rig rig(2, opt);
  rig.ctx->set_window(2);
  const auto p1 = make_prompt(45, 5);
  Collector t1;
  ASSERT_TRUE(rig.sched->submit(t1.request(p1, 10, "alice")));
  t1.wait();
  auto p2 = p1;
  p2.insert(p2.end(), t1.tokens.begin(), t1.tokens.end());
  const auto more = make_prompt(12, 6);
  p2.insert(p2.end(), more.begin(), more.end());
  Collector t2;
  ASSERT_TRUE(rig.sched->submit(t2.request(p2, 6, "alice")));
  t2.wait();
  EXPECT_EQ(t2.result.reason, FinishReason::length) << t2.result.error;
  EXPECT_EQ(t2.result.cached_tokens, 0);  // 48 planned, 54 held, window 2: nothing kept
  EXPECT_EQ(t2.tokens, brisk::testing::fake_greedy(p2, 6, kVocab));
}

TEST(Scheduler, ConcurrentRequestsShareAPrefixByCopy) {
  SchedulerOptions opt;
  opt.cache.block_size = 4;
  Rig rig(2, opt);
  const auto sys = make_prompt(32, 11);
  Collector a;
  auto ra = a.request(sys, 200, "team");
  std::atomic<bool> release{false};
  std::mutex gate_mu;
  std::condition_variable gate_cv;
  bool b_submitted = false, a_waiting = false;
  auto inner = ra.on_token;
  ra.on_token = [&, inner](const TokenEvent& ev) {
    inner(ev);
    if (ev.index == 1) {  // hold A (active) until B is queued, so B joins while A runs
      std::unique_lock<std::mutex> l(gate_mu);
      a_waiting = true;
      gate_cv.notify_all();
      gate_cv.wait(l, [&] { return b_submitted; });
    }
    return !release.load();
  };
  ASSERT_TRUE(rig.sched->submit(std::move(ra)));
  {
    std::unique_lock<std::mutex> l(gate_mu);
    gate_cv.wait(l, [&] { return a_waiting; });
  }
  auto p = sys;
  const auto tail = make_prompt(5, 12);
  p.insert(p.end(), tail.begin(), tail.end());
  Collector b;
  ASSERT_TRUE(rig.sched->submit(b.request(p, 5, "team")));
  {
    std::lock_guard<std::mutex> l(gate_mu);
    b_submitted = true;
  }
  gate_cv.notify_all();
  b.wait();
  release = true;
  a.wait();
  EXPECT_EQ(b.result.cached_tokens, 32);
  EXPECT_GE(rig.ctx->n_copies(), 1);
  EXPECT_EQ(b.tokens, brisk::testing::fake_greedy(p, 5, kVocab));
}

TEST(Scheduler, CacheBudgetEvictsLeastRecentlyUsed) {
  SchedulerOptions opt;
  opt.cache.block_size = 4;
  opt.cache.cached_token_budget = 40;
  Rig rig(4, opt);
  for (int i = 0; i < 3; ++i) {
    Collector c;
    ASSERT_TRUE(rig.sched->submit(c.request(make_prompt(20, 40 + i), 4, brisk::str_cat("u", i))));
    c.wait();
  }
  rig.sched->wait_idle();
  const auto st = rig.sched->stats();
  EXPECT_LE(st.cache_resident_tokens, 40);
  EXPECT_EQ(st.slots_cached, 1);  // 23 tokens each: only the most recent fits
  // The oldest was evicted: no reuse; the newest still is.
  Collector old_c, new_c;
  ASSERT_TRUE(rig.sched->submit(new_c.request(make_prompt(20, 42), 2, "u2")));
  new_c.wait();
  EXPECT_EQ(new_c.result.cached_tokens, 16);
  ASSERT_TRUE(rig.sched->submit(old_c.request(make_prompt(20, 40), 2, "u0")));
  old_c.wait();
  EXPECT_EQ(old_c.result.cached_tokens, 0);
}

TEST(Scheduler, StopTokensAndLogprobs) {
  Rig rig(1);
  const auto prompt = make_prompt(9, 21);
  const auto ref = brisk::testing::fake_greedy(prompt, 6, kVocab);
  Collector c;
  auto r = c.request(prompt, 20);
  r.stop_tokens = {ref[3]};
  r.logprobs = 3;
  ASSERT_TRUE(rig.sched->submit(std::move(r)));
  c.wait();
  const std::vector<int32_t> expect(ref.begin(), ref.begin() + 3);
  ASSERT_EQ(c.tokens, std::vector<int32_t>(expect.begin(), expect.begin() + long(std::find(expect.begin(), expect.end(), ref[3]) - expect.begin())));
  EXPECT_EQ(c.result.reason, FinishReason::stop);
  for (const auto& ev : c.events) {
    ASSERT_EQ(ev.top.size(), 3u);
    EXPECT_EQ(ev.top[0].token, ev.token);  // greedy picks the best
    EXPECT_FLOAT_EQ(ev.top[0].logprob, ev.logprob);
    EXPECT_GE(ev.top[0].logprob, ev.top[1].logprob);
    EXPECT_GE(ev.top[1].logprob, ev.top[2].logprob);
    EXPECT_LT(ev.logprob, 0.0f);
  }
}

TEST(Scheduler, RejectsInvalidRequests) {
  Rig rig(1, {}, 64);
  Collector c;
  EXPECT_THROW(rig.sched->submit(c.request({}, 4)), Error);
  EXPECT_THROW(rig.sched->submit(c.request({1, kVocab}, 4)), Error);
  EXPECT_THROW(rig.sched->submit(c.request({1, -3}, 4)), Error);
  EXPECT_THROW(rig.sched->submit(c.request(make_prompt(65, 1), 4)), Error);
  EXPECT_THROW(rig.sched->submit(c.request({1, 2}, 0)), Error);
}

TEST(Scheduler, ContextEndFinishesWithLength) {
  Rig rig(1, {}, 32);
  Collector c;
  ASSERT_TRUE(rig.sched->submit(c.request(make_prompt(28, 2), 100)));
  c.wait();
  EXPECT_EQ(c.result.reason, FinishReason::length);
  EXPECT_EQ(c.result.completion_tokens, 5);  // positions 28..31 decoded + one final sample
}

TEST(Scheduler, ShutdownCancelsRunningRequests) {
  Rig rig(1, {}, 4096);
  Collector c;
  auto r = c.request(make_prompt(4, 2), 1000000);
  auto inner = r.on_token;
  r.on_token = [inner](const TokenEvent& ev) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // ~4 s to reach the context end
    return inner(ev);
  };
  ASSERT_TRUE(rig.sched->submit(std::move(r)));
  for (int i = 0; i < 5000; ++i) {
    { std::lock_guard<std::mutex> l(c.mu); if (!c.tokens.empty()) break; }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  rig.sched->shutdown();
  c.wait();
  EXPECT_EQ(c.result.reason, FinishReason::cancelled);
  Collector d;
  EXPECT_FALSE(rig.sched->submit(d.request(make_prompt(4, 2), 3)));
}

// The CLI's loop (run_one: the caller's thread, its context and sequence) is the worker's step:
// the same tokens and ends as a request on the scheduler, a continuation after positions the
// sequence already holds, the prompt logits, and max_tokens 0 (the prompt only).
TEST(Scheduler, RunOneIsTheWorkersStep) {
  const auto prompt = make_prompt(150, 4);  // over n_batch: fed in chunks
  Rig rig(1);
  Collector c;
  ASSERT_TRUE(rig.sched->submit(c.request(prompt, 10)));
  c.wait();
  ASSERT_EQ(c.tokens.size(), 10u);

  FakeContext ctx(ContextOptions{.n_ctx = 512, .n_seq_max = 2, .n_batch = 64}, kVocab);
  Collector d;
  int prompt_logits_calls = 0;
  GenerationRequest req = d.request(prompt, 10);
  req.on_prompt_logits = [&](const float* logits, int32_t n_vocab) {
    ++prompt_logits_calls;
    EXPECT_NE(logits, nullptr);
    EXPECT_EQ(n_vocab, kVocab);
  };
  const GenerationResult r = Scheduler::run_one(ctx, 1, std::move(req), brisk::testing::greedy_factory(), 64);
  EXPECT_EQ(d.tokens, c.tokens);
  EXPECT_EQ(r.reason, FinishReason::length);
  EXPECT_EQ(r.completion_tokens, 10);
  EXPECT_EQ(prompt_logits_calls, 1);
  // The sequence keeps the prompt and all generated tokens but the last.
  EXPECT_EQ(ctx.seq_length(1), int32_t(prompt.size()) + 9);
  EXPECT_EQ(ctx.seq_length(0), 0);

  // A continuation starts after what the sequence holds.
  Collector e;
  const GenerationResult r2 = Scheduler::run_one(ctx, 1, e.request({c.tokens.back()}, 3),
                                                 brisk::testing::greedy_factory(), 64);
  EXPECT_EQ(r2.reason, FinishReason::length);
  EXPECT_EQ(ctx.seq_length(1), int32_t(prompt.size()) + 10 + 2);

  // max_tokens 0: the prompt only; a prompt past the context is refused before any work.
  Collector f;
  const GenerationResult r3 = Scheduler::run_one(ctx, 0, f.request(make_prompt(5, 1), 0),
                                                 brisk::testing::greedy_factory(), 64);
  EXPECT_EQ(r3.completion_tokens, 0);
  EXPECT_TRUE(f.tokens.empty());
  EXPECT_EQ(ctx.seq_length(0), 5);
  Collector g;
  EXPECT_THROW(Scheduler::run_one(ctx, 0, g.request(make_prompt(510, 1), 4), brisk::testing::greedy_factory(), 64),
               Error);
  EXPECT_EQ(ctx.seq_length(0), 5);
}

// Greedy speculative verify rows on a backend that samples on the device (emulated): every row
// of a verify group is picked there (only ids come back), every oracle draft is kept and the ids
// equal plain decoding. With a repetition penalty (a row's pick depends on the drafts kept before
// it) or BRISK_NO_SPEC_DEVICE_VERIFY the verify rows go to the host, with the same ids; above
// temperature 0 too.
TEST(Scheduler, GreedyVerifyRowsPickTheirIdsOnTheDevice) {
  const std::vector<int32_t> prompt = make_prompt(40, 7);
  const ContextOptions opts{.n_ctx = 512, .n_seq_max = 1, .n_batch = 64};
  for (const float penalty : {1.0f, 1.3f}) {
    auto run = [&](FakeContext& ctx, SpecOptions spec) {
      Collector c;
      GenerationRequest req = c.request(prompt, 48);
      req.sampling.temperature = 0.0f;
      req.sampling.repeat_penalty = penalty;
      const GenerationResult r = Scheduler::run_one(ctx, 0, std::move(req), engine_sampler_factory(), 64, std::move(spec));
      return std::make_pair(c.tokens, r);
    };
    FakeContext plain_ctx(opts, kVocab);
    plain_ctx.emulate_device_sampling(true);
    const std::vector<int32_t> plain = run(plain_ctx, {}).first;
    ASSERT_EQ(plain.size(), 48u);
    EXPECT_EQ(plain_ctx.max_device_rows(), 1) << "plain decoding samples on the device, a row per step";
    std::vector<int32_t> replay = prompt;  // the oracle's draft: plain decoding's own output
    replay.insert(replay.end(), plain.begin(), plain.end());
    for (const bool host_switch : {false, true}) {
      std::optional<ScopedEnv> sw;
      if (host_switch) sw.emplace("BRISK_NO_SPEC_DEVICE_VERIFY", "1");
      FakeContext ctx(opts, kVocab);
      ctx.emulate_device_sampling(true);
      const auto [got, r] = run(ctx, SpecOptions{.source = draft_source_oracle(replay), .draft_max = 4, .adaptive = false});
      const std::string what = str_cat("penalty ", penalty, host_switch ? ", BRISK_NO_SPEC_DEVICE_VERIFY" : "");
      EXPECT_EQ(got, plain) << what;
      EXPECT_GT(r.spec_drafted, 0) << what;
      EXPECT_EQ(r.spec_accepted, r.spec_drafted) << what;
      const bool on_device = penalty == 1.0f && !host_switch;
      EXPECT_EQ(ctx.max_device_rows() > 1, on_device) << what << ": most rows picked on the device in one step "
                                                      << ctx.max_device_rows();
    }
  }
  // Above temperature 0 a verify compares distributions: its rows go to the host, while plain
  // steps (no drafts) still sample on the device.
  FakeContext ctx(opts, kVocab);
  ctx.emulate_device_sampling(true);
  Collector c;
  std::vector<int32_t> repeating;  // a prompt of 4 x 10 tokens: n-gram drafts find matches
  for (int32_t i = 0; i < 40; ++i) repeating.push_back(prompt[size_t(i % 10)]);
  GenerationRequest req = c.request(repeating, 48);
  req.sampling.temperature = 0.8f;
  req.sampling.top_k = 20;
  req.sampling.seed = 3;
  const GenerationResult r = Scheduler::run_one(ctx, 0, std::move(req), engine_sampler_factory(), 64,
                                                SpecOptions{.source = draft_source_ngram({}), .draft_max = 4});
  EXPECT_EQ(c.tokens.size(), 48u);
  EXPECT_GT(r.spec_steps, 0) << "nothing was verified";
  EXPECT_EQ(ctx.max_device_rows(), 1);
}

