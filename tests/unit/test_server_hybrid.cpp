// The scheduler's prefix cache with a hybrid model (recurrent state: reusable only where a
// snapshot is): a second turn that continues the conversation reuses all of it, one whose
// history diverges after the first prompt (a template dropping the answer) reuses up to the
// prompt's last snapshot; cached_tokens says exactly that, the tokens equal a cold run's, and
// the snapshots held show in the stats.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "fake_engine.h"
#include "model_fixtures.h"
#include "runtime/engine_api.h"
#include "runtime/scheduler.h"

namespace brisk {
namespace {

struct Turn {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int32_t> tokens;
  GenerationResult result;
  bool done = false;
  GenerationRequest request(std::vector<int32_t> prompt, int32_t max_tokens) {
    GenerationRequest r;
    r.prompt = std::move(prompt);
    r.max_tokens = max_tokens;
    r.session = "conversation";
    r.on_token = [this](const TokenEvent& ev) {
      std::lock_guard<std::mutex> l(mu);
      tokens.push_back(ev.token);
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
    ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(120), [&] { return done; })) << "request never finished";
  }
};

std::unique_ptr<Scheduler> make_scheduler(const std::shared_ptr<Model>& model) {
  SchedulerOptions opt;
  opt.cache.block_size = 16;
  auto ctx = Context::create(model, {.n_ctx = 512, .n_seq_max = 2, .n_batch = 64, .kv_type = QuantType::F32,
                                     .n_threads = 2, .state_snapshot_interval = opt.cache.block_size});
  return std::make_unique<Scheduler>(std::move(ctx), testing::greedy_factory(), opt);
}

std::vector<int32_t> run(Scheduler& s, const std::vector<int32_t>& prompt, int32_t n, int32_t* cached) {
  Turn t;
  EXPECT_TRUE(s.submit(t.request(prompt, n)));
  t.wait();
  if (cached) *cached = t.result.cached_tokens;
  return t.tokens;
}

TEST(ServerHybrid, SecondTurnReusesUpToASnapshot) {
  REQUIRE_MODEL("qwen3_5");
  auto model = Model::load({.path = model_dir("qwen3_5") + "/hf"});
  std::vector<int32_t> p1;
  for (int32_t i = 0; i < 45; ++i) p1.push_back((i * 29 + 7) % 1000);
  auto sched = make_scheduler(model);
  int32_t cached = -1;
  const std::vector<int32_t> a1 = run(*sched, p1, 20, &cached);
  ASSERT_EQ(a1.size(), 20u);
  EXPECT_EQ(cached, 0);
  EXPECT_GT(sched->stats().state_snapshots, 0);
  // Continued as it was: the sequence holds 45 + 19 positions, a snapshot at 64.
  std::vector<int32_t> continued = p1;
  continued.insert(continued.end(), a1.begin(), a1.end());
  for (int32_t t : {3, 1, 4, 1, 5}) continued.push_back(t);
  const std::vector<int32_t> a2 = run(*sched, continued, 8, &cached);
  EXPECT_EQ(cached, 64);
  // The answer dropped from the history: the first prompt's blocks match (32 positions) and its
  // snapshot at 32 is there.
  std::vector<int32_t> rewritten = p1;
  for (int32_t t : {9, 2, 6, 5, 3, 5}) rewritten.push_back(t);
  const std::vector<int32_t> a3 = run(*sched, rewritten, 8, &cached);
  EXPECT_EQ(cached, 32);
  EXPECT_EQ(sched->stats().cached_tokens, 96u);
  // Cold runs give the same tokens.
  auto cold = make_scheduler(model);
  EXPECT_EQ(run(*cold, continued, 8, nullptr), a2);
  auto cold2 = make_scheduler(model);
  EXPECT_EQ(run(*cold2, rewritten, 8, nullptr), a3);
}

}  // namespace
}  // namespace brisk
