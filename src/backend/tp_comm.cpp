#include "backend/tp_comm.h"

#include <cstring>

#include "core/error.h"

namespace brisk {

HostComm::HostComm(int32_t world) : world_(world), posted_(size_t(world)), sums_(size_t(world)) {
  BRISK_CHECK(world >= 1, "HostComm: a group of ", world, " ranks");
}

void HostComm::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  aborted_ = true;
  cv_.notify_all();
}

bool HostComm::aborted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return aborted_;
}

void HostComm::barrier(std::unique_lock<std::mutex>& lock) {
  BRISK_CHECK(!aborted_, "tensor parallelism: another rank failed; this step is abandoned");
  const uint64_t gen = generation_;
  if (++arrived_ == world_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != gen || aborted_; });
  BRISK_CHECK(generation_ != gen, "tensor parallelism: another rank failed; this step is abandoned");
}

void HostComm::all_reduce(int32_t rank, const Mat& x) {
  BRISK_CHECK(rank >= 0 && rank < world_, "all_reduce: rank ", rank, " outside [0, ", world_, ")");
  if (world_ == 1) return;
  std::unique_lock<std::mutex> lock(mutex_);
  posted_[size_t(rank)] = x;
  barrier(lock);
  for (const Mat& m : posted_)
    if (m.rows != x.rows || m.cols != x.cols) {
      aborted_ = true;
      cv_.notify_all();
      fail("all_reduce: ranks passed [", posted_[0].rows, ", ", posted_[0].cols, "] and [", m.rows, ", ", m.cols, "]");
    }
  lock.unlock();
  // Every rank sums the whole matrix in rank order into its own buffer (the posted inputs stay
  // unchanged until the next barrier), then copies it back.
  std::vector<float>& sum = sums_[size_t(rank)];
  sum.resize(size_t(x.rows * x.cols));
  for (int64_t r = 0; r < x.rows; ++r) {
    float* s = sum.data() + size_t(r * x.cols);
    std::memcpy(s, posted_[0].row(r), sizeof(float) * size_t(x.cols));
    for (int32_t k = 1; k < world_; ++k) {
      const float* p = posted_[size_t(k)].row(r);
      for (int64_t c = 0; c < x.cols; ++c) s[c] += p[c];
    }
  }
  lock.lock();
  barrier(lock);
  lock.unlock();
  for (int64_t r = 0; r < x.rows; ++r) std::memcpy(x.row(r), sum.data() + size_t(r * x.cols), sizeof(float) * size_t(x.cols));
}

}  // namespace brisk
