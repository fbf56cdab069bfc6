#include "core/thread_pool.h"

#include <algorithm>

namespace brisk {

namespace {
// About 10-50 microseconds of spinning before sleeping (workers) or yielding (caller): long
// enough to catch the next op of a forward, short enough not to starve other processes when
// the machine is oversubscribed.
constexpr int kSpinIterations = 1 << 12;

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

ThreadPool::ThreadPool(int n_threads) {
  n_threads_ = n_threads > 0 ? n_threads : default_threads();
  workers_.reserve(size_t(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
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

void ThreadPool::run_part(int ith) {
  if (ith >= active_) return;
  try {
    (*task_)(ith, active_);
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_) error_ = std::current_exception();
  }
}

void ThreadPool::worker(int ith) {
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
    run_part(ith);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
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
  pending_.store(n_threads_ - 1, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_.notify_all();
  run_part(0);
  for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin) {
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
  });
}

}  // namespace brisk
