// The CUDA backend's steps (cuda_backend_impl.h): the per-step inputs in fixed device buffers,
// the launch queue collected between begin_step and end_step and run as a CUDA graph
// (cuda_graphs.h) or launch by launch, the replay of the previous step, per-batch host arrays
// staged to the device, and BRISK_CUDA_KERNEL_TIMES.
#include "backend/cuda/cuda_backend_impl.h"

namespace brisk::cuda {

void CudaBackend::begin_step(const StepInputs& in) {
  use_device();
  settle_epilogue();
  if (in_step_) {  // the previous step ended in an error: drop what it queued
    launches_.clear();
    names_.clear();
    in_step_ = false;
    free_retired();
  }
  BRISK_CHECK(in.n_tok >= 0 && in.n_out >= 0 && in.n_out <= in.n_tok, "cuda backend: bad step inputs");
  replay_ok_ = false;
  staged_other_ = false;
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t n = std::max<int64_t>(in.n_tok, 1);
  if (n > step_cap_) {
    cuda_check(cudaStreamSynchronize(stream_), "begin_step", "cudaStreamSynchronize");
    if (step_dev_) {
      cuda_check(cudaFree(step_dev_), "begin_step", "cudaFree");
      allocs_.erase(reinterpret_cast<uintptr_t>(step_dev_));
    }
    if (step_host_) cuda_check(cudaFreeHost(step_host_), "begin_step", "cudaFreeHost");
    step_cap_ = std::max<int64_t>(n, 64);
    step_dev_ = static_cast<int32_t*>(raw_alloc(sizeof(int32_t) * 4 * size_t(step_cap_), "begin_step"));
    cuda_check(cudaMallocHost(reinterpret_cast<void**>(&step_host_), sizeof(int32_t) * 4 * size_t(step_cap_)),
               "begin_step", "cudaMallocHost");
  }
  upload_step_inputs(in, "begin_step");
  in_step_ = true;
  step_eager_ = !graphs_ || in.n_tok > kGraphMaxTokens;
  forget_quant();
  key_.w.clear();
  key_.add(uint64_t(in.n_tok));
  key_.add(uint64_t(in.n_out));
}

void CudaBackend::upload_step_inputs(const StepInputs& in, const char* op) {
  // The pinned buffer is reused: wait for the previous step's copy out of it.
  cuda_check(cudaEventSynchronize(step_copied_), op, "cudaEventSynchronize");
  const int32_t* src[4] = {in.ids, in.pos, in.seq, in.out_rows};
  const int64_t cnt[4] = {in.n_tok, in.n_tok, in.n_tok, in.n_out};
  step_map_.clear();
  for (int k = 0; k < 4; ++k) {
    int32_t* h = step_host_ + k * step_cap_;
    if (src[k] && cnt[k] > 0) {
      std::memcpy(h, src[k], sizeof(int32_t) * size_t(cnt[k]));
      step_map_.push_back({src[k], step_dev_ + k * step_cap_, cnt[k]});
    }
  }
  cuda_check(cudaMemcpyAsync(step_dev_, step_host_, sizeof(int32_t) * 4 * size_t(step_cap_), cudaMemcpyHostToDevice,
                             stream_),
             op, "cudaMemcpyAsync");
  cuda_check(cudaEventRecord(step_copied_, stream_), op, "cudaEventRecord");
}

bool CudaBackend::replay_step(const StepInputs& in) {
  if (flags().no_cuda_step_replay || !replay_ok_ || in_step_ || in.n_tok != replay_n_tok_ ||
      in.n_out != replay_n_out_ || std::max<int64_t>(in.n_tok, 1) > step_cap_ || !graphs_cache_.last())
    return false;
  use_device();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    upload_step_inputs(in, "replay_step");
    step_map_.clear();
  }
  cuda_check(graphs_cache_.replay_last(stream_), "replay_step", "cudaGraphLaunch");
  return true;
}

void CudaBackend::end_step() {
  BRISK_CHECK(in_step_, "cuda backend: end_step without begin_step");
  settle_epilogue();
  in_step_ = false;
  step_map_.clear();
  forget_quant();
  last_step_launches_ = launches_.size();
  if (!launches_.empty() && flags().cuda_kernel_times) {
    time_launches();
  } else if (!launches_.empty()) {
    const char* what = "launch";
    const cudaError_t e = graphs_cache_.run(key_.w, launches_, names_, stream_, &what);
    launches_.clear();
    names_.clear();
    cuda_check(e, "end_step", what);
    // The next step may be this graph again (replay_step) when it ran as one graph and no op
    // read a host array other than the step's (such an array could change under it).
    replay_ok_ = !step_eager_ && !staged_other_ && graphs_cache_.last() != nullptr;
    replay_n_tok_ = key_.w.size() >= 2 ? int64_t(key_.w[0]) : -1;
    replay_n_out_ = key_.w.size() >= 2 ? int64_t(key_.w[1]) : -1;
  }
  free_retired();
}

void CudaBackend::enqueue(const char* op, cuda::Launch fn) {
  if (epi_.kind != 0) settle_epilogue();
  if (in_step_ && !step_eager_) {
    launches_.push_back(std::move(fn));
    names_.push_back(op);
    return;
  }
  key_.w.clear();
  if (flags().cuda_kernel_times) {
    time_eager_launch(op, fn);
    return;
  }
  cuda_check(fn(stream_), op, "kernel launch");
}

void CudaBackend::time_eager_launch(const char* op, const cuda::Launch& fn) {
  while (time_events_.size() < 2) {
    cudaEvent_t e = nullptr;
    cuda_check(cudaEventCreate(&e), op, "cudaEventCreate");
    time_events_.push_back(e);
  }
  cuda_check(cudaEventRecord(time_events_[0], stream_), op, "cudaEventRecord");
  cuda_check(fn(stream_), op, "kernel launch");
  cuda_check(cudaEventRecord(time_events_[1], stream_), op, "cudaEventRecord");
  cuda_check(cudaEventSynchronize(time_events_[1]), op, "cudaEventSynchronize");
  float ms = 0.0f;
  cuda_check(cudaEventElapsedTime(&ms, time_events_[0], time_events_[1]), op, "cudaEventElapsedTime");
  EagerTimes& t = eager_times_[op];
  t.ms += ms;
  ++t.launches;
}

void CudaBackend::flush(const char* op) {
  if (!in_step_ || step_eager_) return;
  step_eager_ = true;
  for (size_t i = 0; i < launches_.size(); ++i) cuda_check(launches_[i](stream_), op, names_[i]);
  launches_.clear();
  names_.clear();
  producer_.kind = 0;
}

void CudaBackend::time_launches() {
  const size_t n = launches_.size();
  while (time_events_.size() < n + 1) {
    cudaEvent_t e = nullptr;
    cuda_check(cudaEventCreate(&e), "end_step", "cudaEventCreate");
    time_events_.push_back(e);
  }
  cuda_check(cudaEventRecord(time_events_[0], stream_), "end_step", "cudaEventRecord");
  for (size_t i = 0; i < n; ++i) {
    cuda_check(launches_[i](stream_), "end_step", names_[i]);
    cuda_check(cudaEventRecord(time_events_[i + 1], stream_), "end_step", "cudaEventRecord");
  }
  launches_.clear();
  cuda_check(cudaStreamSynchronize(stream_), "end_step", "cudaStreamSynchronize");
  KernelTimes& kt = kernel_times_[n];
  kt.names.resize(n);
  kt.ms.resize(n, 0.0);
  ++kt.steps;
  for (size_t i = 0; i < n; ++i) {
    float ms = 0.0f;
    cuda_check(cudaEventElapsedTime(&ms, time_events_[i], time_events_[i + 1]), "end_step", "cudaEventElapsedTime");
    kt.names[i] = names_[i];
    kt.ms[i] += ms;
  }
  names_.clear();
}

void CudaBackend::print_kernel_times() const {
  for (const auto& [n, kt] : kernel_times_) {
    std::fprintf(stderr, "cuda kernel times: steps of %zu launches, mean of %d steps (us)\n", n, kt.steps);
    double total = 0.0;
    for (size_t i = 0; i < n; ++i) {
      const double us = 1000.0 * kt.ms[i] / kt.steps;
      total += us;
      std::fprintf(stderr, "%4zu %-40s %9.2f\n", i, kt.names[i], us);
    }
    std::fprintf(stderr, "     total %9.2f\n", total);
  }
  if (eager_times_.empty()) return;
  std::vector<std::pair<double, std::string>> by_time;
  double total = 0.0;
  for (const auto& [op, t] : eager_times_) {
    by_time.emplace_back(t.ms, op);
    total += t.ms;
  }
  std::sort(by_time.rbegin(), by_time.rend());
  std::fprintf(stderr, "cuda kernel times: eager launches, summed per op (ms, launches, %% of %.3f ms)\n", total);
  for (const auto& [ms, op] : by_time)
    std::fprintf(stderr, "  %-48s %10.3f %8lld %5.1f %%\n", op.c_str(), ms,
                 static_cast<long long>(eager_times_.at(op).launches), 100.0 * ms / total);
}

const int32_t* CudaBackend::stage(const int32_t* p, int64_t n, const char* op) {
  BRISK_CHECK(p != nullptr || n == 0, op, ": missing array");
  if (n == 0) return p;
  for (const StepArray& s : step_map_) {
    if (s.host != p) continue;
    BRISK_CHECK(n <= s.n, op, ": ", n, " entries asked of a step array of ", s.n);
    return s.dev;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (is_device(p)) return p;
  staged_other_ = true;
  Staged& s = staged_[p];
  if (s.cap >= n && int64_t(s.last.size()) == n &&
      std::memcmp(s.last.data(), p, sizeof(int32_t) * size_t(n)) == 0)
    return s.dev;
  // The buffer changes: queued launches that read it must run first (and a waiting epilogue:
  // the dense attention reads its sequence starts).
  mutex_.unlock();
  settle_epilogue();
  flush(op);
  mutex_.lock();
  if (s.cap < n) {
    if (s.dev) release(s.dev, op);
    const int64_t cap = n < 64 ? 64 : n;
    s.dev = static_cast<int32_t*>(raw_alloc(sizeof(int32_t) * size_t(cap), op));
    s.cap = cap;
  }
  s.last.assign(p, p + n);
  cuda_check(cudaMemcpyAsync(s.dev, s.last.data(), sizeof(int32_t) * size_t(n), cudaMemcpyHostToDevice, stream_),
             op, "cudaMemcpyAsync");
  // The source (s.last) may be reassigned by a later call before this copy runs.
  cuda_check(cudaStreamSynchronize(stream_), op, "cudaStreamSynchronize");
  return s.dev;
}

}  // namespace brisk::cuda
