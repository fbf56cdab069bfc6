// The in-process communicator of tensor-parallel CPU ranks (TpRank::comm for CPU backends):
// world ranks, each on its own host thread, meet in all_reduce. The sum is taken in rank order
// 0..world-1 for every element, so each rank ends with the same bits and a run is reproducible.
// A rank that fails calls abort(): every rank waiting in all_reduce (or arriving later) throws
// instead of waiting forever.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "core/tensor_view.h"

namespace brisk {

class HostComm {
 public:
  explicit HostComm(int32_t world);
  int32_t world() const { return world_; }
  // x := the sum of every rank's x (same shape on each rank); returns on every rank once all
  // have their sum. Throws brisk::Error when the group was aborted or the shapes differ.
  void all_reduce(int32_t rank, const Mat& x);
  void abort();
  bool aborted() const;

 private:
  // Waits until every rank has arrived (lock held on entry and exit); throws once aborted.
  void barrier(std::unique_lock<std::mutex>& lock);

  const int32_t world_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  int32_t arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
  std::vector<Mat> posted_;                 // [world] each rank's x of the current call
  std::vector<std::vector<float>> sums_;    // [world] each rank's result before it is copied back
};

}  // namespace brisk
