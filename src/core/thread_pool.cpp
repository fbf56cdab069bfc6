// Protocol: a run publishes its task and opens a join state; every thread (the caller
// included) that gets in claims part indices from a shared counter until none are left, so
// each part runs exactly once on whichever thread is running. The caller then closes the run
// and waits only for workers that joined it. A worker that the OS has not scheduled in time
// simply misses the run: on an oversubscribed machine (2 cores shared by many processes) the
// caller never waits for a thread that is not running.
#include "core/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>

#include "core/flags.h"

namespace brisk {

namespace {
// About 10-50 microseconds of spinning before sleeping (workers) or yielding (caller): long
// enough to catch the next op of a forward, short enough not to starve other processes when
// the machine is oversubscribed.
constexpr int kSpinIterations = 1 << 12;
constexpr uint32_t kClosed = 1u << 31;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}
}  // namespace

int ThreadPool::default_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : int(n);
}

namespace {
// BRISK_PIN_THREADS=1: thread i of a pool runs only on the i-th CPU (mod the count) of the
// process's allowed set; the caller is thread 0. Off by default: on a shared machine the OS
// scheduler places threads better than a fixed map.
// Read once, before the first pool pins its caller: a later pool made on that thread would
// otherwise see only the caller's one CPU and pin all its workers there.
std::vector<int> allowed_cpus() {
  static const std::vector<int> cpus = [] {
    std::vector<int> v;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return v;
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) v.push_back(c);
    return v;
  }();
  return cpus;
}

void pin_current_thread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);  // advice: failure leaves it unpinned
}
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  n_threads_ = n_threads > 0 ? n_threads : default_threads();
  workers_.reserve(size_t(n_threads_ - 1));
  const std::vector<int> cpus = flags().pin_threads ? allowed_cpus() : std::vector<int>{};
  if (!cpus.empty()) pin_current_thread(cpus[0]);
  for (int i = 1; i < n_threads_; ++i) {
    const int cpu = cpus.empty() ? -1 : cpus[size_t(i) % cpus.size()];
    workers_.emplace_back([this, cpu] {
      if (cpu >= 0) pin_current_thread(cpu);
      worker();
    });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::claim_parts() {
  for (;;) {
    const int part = next_part_.fetch_add(1, std::memory_order_acq_rel);
    if (part >= active_) return;
    try {
      (*task_)(part, active_);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
  }
}

bool ThreadPool::try_join() {
  uint32_t s = state_.load(std::memory_order_acquire);
  while (!(s & kClosed)) {
    if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) return true;
  }
  return false;
}

void ThreadPool::worker() {
  uint64_t seen = 0;
  for (;;) {
    // Spin first: the next op of a forward usually arrives within microseconds.
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < kSpinIterations; ++spin) {
      cpu_relax();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load()) return;
    if (!try_join()) continue;  // that run is over
    claim_parts();
    state_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run(const Task& fn, int max_parts) {
  const int parts = max_parts > 0 ? std::min(max_parts, n_threads_) : n_threads_;
  if (parts == 1) {
    fn(0, 1);
    return;
  }
  task_ = &fn;
  active_ = parts;
  error_ = nullptr;
  next_part_.store(0, std::memory_order_relaxed);
  state_.store(0, std::memory_order_release);  // open, nobody joined
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_.notify_all();
  claim_parts();
  // Close the run; wait for the workers inside it to finish their parts.
  state_.fetch_or(kClosed, std::memory_order_acq_rel);
  for (int spin = 0; state_.load(std::memory_order_acquire) != kClosed; ++spin) {
    if (spin < kSpinIterations) cpu_relax();
    else std::this_thread::yield();
  }
  task_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int nth = int(std::min<int64_t>(n_threads_, n));
  if (nth <= 1) {
    fn(0, n);
    return;
  }
  run([&](int ith, int total) {
    const int64_t per = (n + total - 1) / total;
    const int64_t begin = std::min<int64_t>(n, per * ith);
    const int64_t end = std::min<int64_t>(n, begin + per);
    if (begin < end) fn(begin, end);
  }, nth);
}

}  // namespace brisk
