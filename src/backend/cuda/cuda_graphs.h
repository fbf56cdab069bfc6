// A cache of CUDA graphs for the CUDA backend's queued steps. A step is keyed by the exact
// sequence of its launches (op kinds, device pointers, shapes, scalars: a vector of words
// that every op appends to); a key seen once runs launch by launch, the second time it is
// captured into a graph and launched, and later it is replayed. Replaying is exactly running
// the same launches: kernels read positions, lengths and ids from device buffers, so nothing
// that changes between decode steps is baked into a graph.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <list>
#include <unordered_map>
#include <vector>

namespace brisk::cuda {

using Launch = std::function<cudaError_t(cudaStream_t)>;

class GraphCache {
 public:
  explicit GraphCache(size_t max_graphs) : max_graphs_(max_graphs) {}
  ~GraphCache() { clear(); }
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

  // Runs `launches` on `stream` for the step `key` as described above. Returns the first
  // error (with `what` naming the failing launch or graph call).
  cudaError_t run(const std::vector<uint64_t>& key, const std::vector<Launch>& launches,
                  const std::vector<const char*>& names, cudaStream_t stream, const char** what);
  void clear();
  // The graph the last run() launched (nullptr when it ran launch by launch, or after clear()).
  cudaGraphExec_t last() const { return last_; }
  // Launches last() again (a replay).
  cudaError_t replay_last(cudaStream_t stream);
  size_t graphs() const { return entries_.size(); }
  uint64_t replays() const { return replays_; }
  uint64_t captures() const { return captures_; }

 private:
  struct Entry {
    std::vector<uint64_t> key;
    cudaGraphExec_t exec = nullptr;
  };
  static uint64_t hash(const std::vector<uint64_t>& key);
  size_t max_graphs_;
  std::list<Entry> entries_;                  // most recently used first
  std::unordered_map<uint64_t, int> seen_;    // key hash -> times seen without a graph
  uint64_t replays_ = 0, captures_ = 0;
  cudaGraphExec_t last_ = nullptr;
};

}  // namespace brisk::cuda
