#include "runtime/embed_queue.h"

#include <exception>

namespace brisk {

EmbedQueue::EmbedQueue(std::unique_ptr<Embedder> embedder) : embedder_(std::move(embedder)) {
  worker_ = std::thread([this] { loop(); });
}

EmbedQueue::~EmbedQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

std::vector<std::vector<float>> EmbedQueue::embed(std::vector<EmbedInput> inputs, int32_t dimensions) {
  auto job = std::make_unique<Job>();
  job->inputs = std::move(inputs);
  job->dimensions = dimensions;
  return submit(std::move(job));
}

std::vector<std::vector<float>> EmbedQueue::classify(std::vector<EmbedInput> inputs) {
  auto job = std::make_unique<Job>();
  job->inputs = std::move(inputs);
  job->classify = true;
  return submit(std::move(job));
}

int64_t EmbedQueue::forwards() const {
  std::lock_guard<std::mutex> lock(mu_);
  return forwards_;
}

std::vector<std::vector<float>> EmbedQueue::submit(std::unique_ptr<Job> job) {
  std::future<std::vector<std::vector<float>>> f = job->done.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
  return f.get();
}

void EmbedQueue::run_group(std::vector<std::unique_ptr<Job>>& jobs, bool classify) {
  std::vector<EmbedInput> all;
  for (const auto& j : jobs)
    if (j->classify == classify) all.insert(all.end(), j->inputs.begin(), j->inputs.end());
  if (all.empty()) return;
  std::vector<std::vector<float>> out;
  try {
    const int32_t before = embedder_->stats().forwards;
    out = classify ? embedder_->classify(all) : embedder_->embed(all, 0);
    std::lock_guard<std::mutex> lock(mu_);
    forwards_ += embedder_->stats().forwards - before;
  } catch (...) {
    // One bad input fails the group: run each job alone so that only its own caller sees it.
    if (jobs.size() > 1) {
      for (auto& j : jobs) {
        if (j->classify != classify) continue;
        try {
          j->done.set_value(classify ? embedder_->classify(j->inputs) : embedder_->embed(j->inputs, j->dimensions));
        } catch (...) {
          j->done.set_exception(std::current_exception());
        }
        j.reset();
      }
    } else {
      jobs[0]->done.set_exception(std::current_exception());
      jobs[0].reset();
    }
    std::erase(jobs, nullptr);
    return;
  }
  size_t k = 0;
  for (auto& j : jobs) {
    if (j->classify != classify) continue;
    std::vector<std::vector<float>> part(out.begin() + int64_t(k), out.begin() + int64_t(k + j->inputs.size()));
    k += j->inputs.size();
    if (!classify && j->dimensions > 0)
      for (auto& v : part) v = truncate_dims(v, embedder_->dim(), j->dimensions, embedder_->pooling().normalize);
    j->done.set_value(std::move(part));
    j.reset();
  }
  std::erase(jobs, nullptr);
}

void EmbedQueue::loop() {
  for (;;) {
    std::vector<std::unique_ptr<Job>> jobs;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping
      while (!queue_.empty()) {
        jobs.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    run_group(jobs, false);
    run_group(jobs, true);
  }
}

}  // namespace brisk
