// GraphCache (see cuda_graphs.h).
#include "backend/cuda/cuda_graphs.h"

namespace brisk::cuda {

uint64_t GraphCache::hash(const std::vector<uint64_t>& key) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ key.size();
  for (uint64_t v : key) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
  }
  return h;
}

void GraphCache::clear() {
  for (Entry& e : entries_)
    if (e.exec) cudaGraphExecDestroy(e.exec);
  entries_.clear();
  seen_.clear();
  last_ = nullptr;
}

cudaError_t GraphCache::replay_last(cudaStream_t stream) {
  if (!last_) return cudaErrorInvalidValue;
  ++replays_;
  return cudaGraphLaunch(last_, stream);
}

cudaError_t GraphCache::run(const std::vector<uint64_t>& key, const std::vector<Launch>& launches,
                            const std::vector<const char*>& names, cudaStream_t stream, const char** what) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->key != key) continue;
    entries_.splice(entries_.begin(), entries_, it);
    ++replays_;
    *what = "cudaGraphLaunch";
    last_ = entries_.front().exec;
    return cudaGraphLaunch(last_, stream);
  }
  last_ = nullptr;
  const uint64_t h = hash(key);
  int& count = seen_[h];
  if (count++ == 0) {
    if (seen_.size() > 4096) seen_.clear();
    for (size_t i = 0; i < launches.size(); ++i) {
      const cudaError_t e = launches[i](stream);
      if (e != cudaSuccess) {
        *what = names[i];
        return e;
      }
    }
    return cudaSuccess;
  }
  seen_.erase(h);
  *what = "cudaStreamBeginCapture";
  cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  if (e != cudaSuccess) return e;
  cudaError_t launch_error = cudaSuccess;
  for (size_t i = 0; i < launches.size() && launch_error == cudaSuccess; ++i) {
    launch_error = launches[i](stream);
    if (launch_error != cudaSuccess) *what = names[i];
  }
  cudaGraph_t graph = nullptr;
  e = cudaStreamEndCapture(stream, &graph);
  if (launch_error != cudaSuccess) {
    if (graph) cudaGraphDestroy(graph);
    return launch_error;
  }
  if (e != cudaSuccess) {
    *what = "cudaStreamEndCapture";
    return e;
  }
  cudaGraphExec_t exec = nullptr;
  e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (e != cudaSuccess) {
    *what = "cudaGraphInstantiate";
    return e;
  }
  if (entries_.size() >= max_graphs_) {
    cudaGraphExecDestroy(entries_.back().exec);
    entries_.pop_back();
  }
  entries_.push_front(Entry{.key = key, .exec = exec});
  ++captures_;
  *what = "cudaGraphLaunch";
  last_ = exec;
  return cudaGraphLaunch(exec, stream);
}

}  // namespace brisk::cuda
