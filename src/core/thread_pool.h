// A fixed pool of worker threads for data-parallel kernels. `run(fn)` calls fn(ith, nth) once
// for every part ith in [0, nth) and returns when all are done; parts are claimed by whichever
// threads are running (the caller included), so a worker the OS has not scheduled never holds
// up the caller. Workers spin for a short while on a generation counter before sleeping on a
// condition variable, so that the many small ops of a decode step do not pay a futex wake-up
// each (spin-then-wait).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace brisk {

class ThreadPool {
 public:
  using Task = std::function<void(int ith, int nth)>;
  // n_threads <= 0: one per hardware thread.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Runs fn(ith, nth) for each ith in [0, nth) on the pool (a thread may run several parts;
  // parts must not depend on which thread runs them); not reentrant. An exception thrown by
  // any part is rethrown here after all parts finished. max_parts > 0 caps nth (small work
  // runs inline on the caller: waking workers costs more than it saves).
  void run(const Task& fn, int max_parts = 0);
  // Splits [0, n) into contiguous chunks, one per thread: fn(begin, end).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

  static int default_threads();

 private:
  void worker();
  void claim_parts();
  bool try_join();

  int n_threads_ = 1;
  std::vector<std::thread> workers_;
  const Task* task_ = nullptr;
  int active_ = 0;  // parts of the current task
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> next_part_{0};
  std::atomic<uint32_t> state_{0x80000000u};  // closed bit | workers inside the current run
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

}  // namespace brisk
