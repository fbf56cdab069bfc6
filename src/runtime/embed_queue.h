// One worker thread over an Embedder: concurrent callers submit their inputs, the worker takes
// every request waiting at that moment and runs them together (one packed forward per n_batch
// tokens), then hands each caller its part. Embedding requests and cross-encoder scoring
// requests waiting together run as two packed calls.
#pragma once
#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/embedder.h"

namespace brisk {

class EmbedQueue {
 public:
  explicit EmbedQueue(std::unique_ptr<Embedder> embedder);
  ~EmbedQueue();
  EmbedQueue(const EmbedQueue&) = delete;
  EmbedQueue& operator=(const EmbedQueue&) = delete;

  // Read-only settings of the model (thread-safe: they never change).
  const Embedder& embedder() const { return *embedder_; }

  // Pooled vectors (Embedder::embed) of the inputs, Matryoshka prefix `dimensions` (0: all).
  // Blocks until done; errors of the inputs are thrown here (the caller checks them first with
  // embedder().check to name the request's own field).
  std::vector<std::vector<float>> embed(std::vector<EmbedInput> inputs, int32_t dimensions);
  // Classification scores (Embedder::classify).
  std::vector<std::vector<float>> classify(std::vector<EmbedInput> inputs);
  // Forwards run so far (tests: concurrent requests share them).
  int64_t forwards() const;

 private:
  struct Job {
    std::vector<EmbedInput> inputs;
    int32_t dimensions = 0;
    bool classify = false;
    std::promise<std::vector<std::vector<float>>> done;
  };
  std::vector<std::vector<float>> submit(std::unique_ptr<Job> job);
  void loop();
  void run_group(std::vector<std::unique_ptr<Job>>& jobs, bool classify);

  std::unique_ptr<Embedder> embedder_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Job>> queue_;
  bool stop_ = false;
  int64_t forwards_ = 0;
  std::thread worker_;
};

}  // namespace brisk
