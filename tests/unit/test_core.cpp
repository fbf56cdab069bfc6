#include <gtest/gtest.h>

#include <atomic>
#include <pthread.h>
#include <sched.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <thread>
#include <vector>

#include "core/checked_math.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/flags.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "scoped_env.h"

using namespace brisk;

TEST(Core, CheckedMath) {
  EXPECT_EQ(checked_add<uint64_t>(1, 2), 3u);
  EXPECT_FALSE(checked_add<uint64_t>(~0ull, 1).has_value());
  EXPECT_FALSE(checked_mul<uint64_t>(1ull << 40, 1ull << 30).has_value());
  EXPECT_TRUE(range_within(10, 5, 15));
  EXPECT_FALSE(range_within(10, 6, 15));
  EXPECT_FALSE(range_within(~0ull, 2, 15));
}

TEST(Core, ErrorMessage) {
  try {
    BRISK_CHECK(1 + 1 == 3, "bad sum ", 2, " at offset ", 17);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "bad sum 2 at offset 17");
  }
}

TEST(Core, Fp16RoundTripAllHalves) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_f32(uint16_t(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_fp16(f), h) << h;
  }
}

TEST(Core, Fp16Rounding) {
  EXPECT_EQ(f32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_fp16(65520.0f), 0x7c00);   // rounds to inf
  EXPECT_EQ(f32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie to even -> 0
  EXPECT_EQ(f32_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie to even
  EXPECT_EQ(f32_to_fp16(1.0f + std::ldexp(3.0f, -11)), 0x3c02);
}

TEST(Core, Bf16) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3f808000)), 0x3f80);  // tie to even
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3f818000)), 0x3f82);
}

TEST(Core, FlagsKillSwitch) {
  setenv("BRISK_NO_AVX512", "1", 1);
  flags_reload();
  EXPECT_TRUE(flags().no_avx512);
  EXPECT_FALSE(cpu_features().avx512);
  unsetenv("BRISK_NO_AVX512");
  flags_reload();
  EXPECT_FALSE(flags().no_avx512);
  EXPECT_EQ(cpu_features().avx512, cpu_features_detected().avx512);
}

TEST(Core, AmxProbeDoesNotCrash) {
  // Detection ran above; on machines where AMX faults the probe must report false, not crash.
  (void)cpu_features_detected().amx;
  SUCCEED() << cpu_features_string();
}

// BRISK_PIN_THREADS=1 pins every thread of a pool to one CPU of the allowed set; unset, the
// workers keep the whole set.
TEST(ThreadPoolPinning, PinsEachThreadToOneCpuOnlyWhenAsked) {
  auto cpus_of_part = [](int n_threads) {
    brisk::ThreadPool pool(n_threads);
    std::vector<int> counts(size_t(n_threads), -1);
    pool.run([&](int ith, int) {
      cpu_set_t set;
      CPU_ZERO(&set);
      pthread_getaffinity_np(pthread_self(), sizeof(set), &set);
      counts[size_t(ith)] = CPU_COUNT(&set);
    });
    return counts;
  };
  cpu_set_t all;
  CPU_ZERO(&all);
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  const int n_allowed = CPU_COUNT(&all);
  for (int c : cpus_of_part(2)) EXPECT_EQ(c, n_allowed);
  setenv("BRISK_PIN_THREADS", "1", 1);
  brisk::flags_reload();
  for (int c : cpus_of_part(2)) EXPECT_EQ(c, 1);
  unsetenv("BRISK_PIN_THREADS");
  brisk::flags_reload();
  // The pinned pool pinned its caller too: give this thread the whole set back.
  ASSERT_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
}

// A second pinned pool made on the same (already pinned) thread still spreads its workers over
// the allowed set: the set is read before the first pool pins its caller.
TEST(ThreadPoolPinning, LaterPoolsKeepTheWholeSet) {
  cpu_set_t all;
  CPU_ZERO(&all);
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  std::vector<int> allowed;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &all)) allowed.push_back(c);
  if (allowed.size() < 2) GTEST_SKIP() << "needs two allowed CPUs";
  brisk::ScopedEnv pin("BRISK_PIN_THREADS", "1");
  { brisk::ThreadPool first(2); }  // pins this thread to allowed[0]
  brisk::ThreadPool second(2);
  const pthread_t caller = pthread_self();
  // The worker's allowed-CPU count and CPU; a worker that ran unpinned fails the test below
  // instead of being taken for one that never ran.
  std::atomic<int> worker_cpus{0};
  int worker_cpu = -1;
  for (int attempt = 0; attempt < 200 && worker_cpus.load() == 0; ++attempt) {
    second.run([&](int, int) {
      if (pthread_equal(pthread_self(), caller)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));  // leave the other part to the worker
        return;
      }
      cpu_set_t set;
      CPU_ZERO(&set);
      pthread_getaffinity_np(pthread_self(), sizeof(set), &set);
      worker_cpus = CPU_COUNT(&set);
      if (CPU_COUNT(&set) == 1)
        for (int c = 0; c < CPU_SETSIZE; ++c)
          if (CPU_ISSET(c, &set)) worker_cpu = c;
    }, 2);
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
  // 200 runs whose calling part sleeps 1 ms: a worker that never takes the other part is a
  // defect of the pool, not a reason to skip.
  ASSERT_GT(worker_cpus.load(), 0) << "the worker never joined a run";
  ASSERT_EQ(worker_cpus.load(), 1) << "the worker ran unpinned (allowed on " << worker_cpus.load() << " CPUs)";
  EXPECT_EQ(worker_cpu, allowed[1]);
}
