#include "runtime/tp_context.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "backend/devices.h"
#include "backend/tp_comm.h"
#include "core/error.h"
#include "models/tp_shard.h"
#include "runtime/loaded_model.h"
#ifdef BRISK_HAVE_CUDA
#include "backend/cuda/cuda_nccl.h"
#endif

namespace brisk {

namespace {

// One host thread per rank, kept for the context's life (a CUDA rank's thread keeps its current
// device); run() hands every rank the same job and waits for all of them.
class TpWorkers {
 public:
  TpWorkers(int32_t n, std::function<void()> on_error) : errors_(size_t(n)), on_error_(std::move(on_error)) {
    for (int32_t r = 0; r < n; ++r) threads_.emplace_back([this, r] { loop(r); });
  }
  ~TpWorkers() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    start_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  // fn(r) on every rank's thread at once; rethrows the error of the lowest failed rank.
  void run(const std::function<void(int32_t)>& fn) {
    std::unique_lock<std::mutex> lock(mutex_);
    std::fill(errors_.begin(), errors_.end(), nullptr);
    job_ = &fn;
    pending_ = int32_t(threads_.size());
    ++job_id_;
    start_.notify_all();
    done_.wait(lock, [&] { return pending_ == 0; });
    job_ = nullptr;
    for (const std::exception_ptr& e : errors_)
      if (e) std::rethrow_exception(e);
  }

 private:
  void loop(int32_t r) {
    uint64_t seen = 0;
    for (;;) {
      std::unique_lock<std::mutex> lock(mutex_);
      start_.wait(lock, [&] { return stop_ || job_id_ != seen; });
      if (stop_) return;
      seen = job_id_;
      const std::function<void(int32_t)>* job = job_;
      lock.unlock();
      std::exception_ptr err;
      try {
        (*job)(r);
      } catch (...) {
        err = std::current_exception();
        on_error_();  // wakes ranks waiting for this one
      }
      lock.lock();
      errors_[size_t(r)] = err;
      if (--pending_ == 0) done_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable start_, done_;
  const std::function<void(int32_t)>* job_ = nullptr;
  uint64_t job_id_ = 0;
  int32_t pending_ = 0;
  bool stop_ = false;
  std::vector<std::exception_ptr> errors_;
  std::function<void()> on_error_;
  std::vector<std::thread> threads_;  // last: started once the rest is built
};

// "cuda:0,1,3" -> {0, 1, 3}.
std::vector<int> tp_parse_device_list(const std::string& device) {
  BRISK_CHECK(device.rfind("cuda:", 0) == 0, "device '", device, "': a device list is cuda:I,J,... (one GPU per rank)");
  std::vector<int> out;
  size_t at = 5;
  for (;;) {
    const size_t comma = device.find(',', at);
    const std::string item = device.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    BRISK_CHECK(!item.empty() && end && *end == '\0' && v >= 0 && v < 1024, "device '", device, "': '", item,
                "' is not a GPU index");
    BRISK_CHECK(std::find(out.begin(), out.end(), int(v)) == out.end(), "device '", device, "' names GPU ", v, " twice");
    out.push_back(int(v));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

std::vector<std::string> tp_cuda_devices(const std::vector<int>& gpus, const std::string& asked) {
  require_cuda_device(asked);
  const size_t have = list_devices().size();
  for (int g : gpus)
    BRISK_CHECK(size_t(g) < have, "--device ", asked, ": GPU ", g, " does not exist (",
                have, " CUDA device", have == 1 ? "" : "s", " on this machine)");
  std::vector<std::string> out;
  for (int g : gpus) out.push_back(str_cat("cuda:", g));
  return out;
}

class TpContext final : public Context {
 public:
  TpContext(std::shared_ptr<const LoadedModel> model, const ContextOptions& options)
      : model_(std::move(model)), devices_(tp_rank_devices(options)) {
    const int32_t world = int32_t(devices_.size());
    tp_check_split(model_->config(), world);
    const bool cpu = devices_[0] == "cpu";
    // CPU ranks share the threads asked for (all cores by default).
    const int32_t total = options.n_threads > 0 ? options.n_threads : int32_t(std::max(1u, std::thread::hardware_concurrency()));
    const int32_t per_rank = std::max(1, total / world);
    std::vector<void*> comms(size_t(world), nullptr);
    if (cpu) {
      host_ = std::make_unique<HostComm>(world);
      for (void*& c : comms) c = host_.get();
    } else if (world > 1) {
#ifdef BRISK_HAVE_CUDA
      std::vector<int> gpus;
      for (const std::string& d : devices_) gpus.push_back(std::atoi(d.c_str() + 5));
      nccl_ = cuda::nccl_group_create(gpus);
      for (int32_t r = 0; r < world; ++r) comms[size_t(r)] = nccl_->comm(r);
#endif
    }
    for (int32_t r = 0; r < world; ++r) {
      auto s = std::make_shared<LoadedModel>();
      s->info_ = model_->info_;
      s->config_ = tp_shard_config(model_->config(), world);
      s->entry_ = model_->entry_;
      s->weights_ = tp_shard_weights(*model_->weights_, model_->config(), r, world);
      s->arch_ = s->entry_->build(s->config_, *s->weights_);
      s->shard_of_ = model_;
      shards_.push_back(std::move(s));
    }
    ranks_.resize(size_t(world));
    workers_ = std::make_unique<TpWorkers>(world, [this] {
      if (host_) host_->abort();
    });
    workers_->run([&](int32_t r) {
      ContextOptions o = options;
      o.tp = 0;
      o.device = devices_[size_t(r)];
      o.n_threads = per_rank;
      const TpRank tp{.rank = r, .world = world, .comm = comms[size_t(r)]};
      ranks_[size_t(r)] = context_create_rank(shards_[size_t(r)], o, make_backend(o.device, per_rank), tp);
      // Only rank 0's logits are read: the others pick ids on the device where they can,
      // which skips their logits' copy back.
      if (r > 0) ranks_[size_t(r)]->set_device_greedy(true);
    });
    opt_ = ranks_[0]->options();
    opt_.tp = world;
    opt_.device = cpu ? "cpu" : "cuda:";
    opt_.n_threads = 0;
    for (int32_t r = 0; r < world; ++r) {
      if (!cpu) opt_.device += (r ? "," : "") + devices_[size_t(r)].substr(5);
      opt_.n_threads += ranks_[size_t(r)]->options().n_threads;
    }
  }

  ~TpContext() override {
    if (workers_) {
      try {
        workers_->run([&](int32_t r) { ranks_[size_t(r)].reset(); });
      } catch (...) {
      }
    }
    workers_.reset();
  }

  void decode(const std::vector<BatchToken>& batch) override {
    check_usable();
    validate(batch);
    on_all([&](Context& c, int32_t) { c.decode(batch); });
  }
  const float* logits(int32_t i) const override { return ranks_[0]->logits(i); }
  int32_t n_vocab() const override { return ranks_[0]->n_vocab(); }
  bool set_device_greedy(bool on) override {
    bool ok = false;
    on_rank0([&](Context& c) { ok = c.set_device_greedy(on); });
    return ok;
  }
  bool set_device_sampler(Sampler* sampler) override {
    bool ok = false;
    on_rank0([&](Context& c) { ok = c.set_device_sampler(sampler); });
    return ok;
  }
  bool set_next_device_samplers(std::vector<Sampler*> rows) override {
    bool ok = false;
    on_rank0([&](Context& c) { ok = c.set_next_device_samplers(std::move(rows)); });
    return ok;
  }
  const int32_t* device_ids() const override { return ranks_[0]->device_ids(); }
  bool set_keep_hidden(bool on) override {
    bool ok = false;
    on_rank0([&](Context& c) { ok = c.set_keep_hidden(on); });
    return ok;
  }
  const float* hidden(int32_t i) const override { return ranks_[0]->hidden(i); }
  int32_t seq_length(int32_t seq) const override { return ranks_[0]->seq_length(seq); }
  void seq_truncate(int32_t seq, int32_t n_keep) override {
    check_usable();
    on_all([&](Context& c, int32_t) { c.seq_truncate(seq, n_keep); });
  }
  void seq_copy(int32_t src, int32_t dst, int32_t n) override {
    check_usable();
    on_all([&](Context& c, int32_t) { c.seq_copy(src, dst, n); });
  }
  int32_t seq_restorable(int32_t seq, int32_t n) const override { return ranks_[0]->seq_restorable(seq, n); }
  bool seq_checkpoint(int32_t seq) override {
    bool ok = true;
    on_all([&](Context& c, int32_t r) {
      const bool k = c.seq_checkpoint(seq);
      if (r == 0) ok = k;
    });
    return ok;
  }
  const ContextOptions& options() const override { return opt_; }
  // The taps of rank 0: its slice of the heads and MLP rows (Qcur, ffn_act, ...), the summed
  // outputs of the blocks (attn_out, ffn_out, l_out) and the logits.
  void set_tap(TapFn tap) override {
    on_rank0([&](Context& c) { c.set_tap(std::move(tap)); });
  }

 private:
  void check_usable() const {
    BRISK_CHECK(failure_.empty(), "tensor-parallel context: a rank failed in an earlier step (", failure_,
                "); make a new context");
  }

  // fn(rank context, rank) on every rank's thread at once. A failure leaves the ranks out of
  // step (a forward half done on some), so the context refuses later work.
  void on_all(const std::function<void(Context&, int32_t)>& fn) {
    try {
      workers_->run([&](int32_t r) { fn(*ranks_[size_t(r)], r); });
    } catch (const std::exception& e) {
      failure_ = e.what();
      throw;
    }
  }
  void on_rank0(const std::function<void(Context&)>& fn) {
    workers_->run([&](int32_t r) {
      if (r == 0) fn(*ranks_[0]);
    });
  }

  // The checks of a model context's decode, made once here so that a bad batch fails before any
  // rank starts (the ranks would all fail alike, but a failure inside run() ends the context).
  void validate(const std::vector<BatchToken>& batch) const {
    const int32_t n_seq = opt_.n_seq_max;
    std::vector<int32_t> next(static_cast<size_t>(n_seq));
    for (int32_t s = 0; s < n_seq; ++s) next[size_t(s)] = ranks_[0]->seq_length(s);
    for (size_t i = 0; i < batch.size(); ++i) {
      const BatchToken& t = batch[i];
      BRISK_CHECK(t.token >= 0 && t.token < n_vocab(), "batch token ", i, ": id ", t.token, " out of range [0, ",
                  n_vocab(), ")");
      BRISK_CHECK(t.seq >= 0 && t.seq < n_seq, "batch token ", i, ": sequence ", t.seq, " out of range [0, ", n_seq, ")");
      BRISK_CHECK(t.pos == next[size_t(t.seq)], "batch token ", i, ": position ", t.pos, " of sequence ", t.seq,
                  " must be its next position ", next[size_t(t.seq)]);
      BRISK_CHECK(t.pos < opt_.n_ctx, "batch token ", i, ": position ", t.pos, " exceeds the context size ", opt_.n_ctx);
      ++next[size_t(t.seq)];
    }
  }

  std::shared_ptr<const LoadedModel> model_;
  std::vector<std::string> devices_;  // [world] each rank's device
  std::unique_ptr<HostComm> host_;    // CPU ranks
#ifdef BRISK_HAVE_CUDA
  std::shared_ptr<cuda::NcclGroup> nccl_;  // CUDA ranks (world > 1)
#endif
  std::vector<std::shared_ptr<const LoadedModel>> shards_;  // [world]
  std::vector<std::unique_ptr<Context>> ranks_;              // [world]
  std::unique_ptr<TpWorkers> workers_;
  ContextOptions opt_;
  std::string failure_;  // a rank's error that ended the context
};

}  // namespace

bool tp_requested(const ContextOptions& o) { return o.tp != 0 || o.device.find(',') != std::string::npos; }

std::vector<std::string> tp_rank_devices(const ContextOptions& o) {
  BRISK_CHECK(o.tp >= 0 && o.tp <= 1024, "--tp ", o.tp, ": expected a number of ranks from 1 to 1024");
  const std::string dev = o.device.empty() ? "cpu" : o.device;
  if (dev.find(',') != std::string::npos) {
    const std::vector<int> gpus = tp_parse_device_list(dev);
    BRISK_CHECK(o.tp == 0 || o.tp == int32_t(gpus.size()), "--tp ", o.tp, " with --device ", dev, ", which names ",
                gpus.size(), " GPUs (one per rank)");
    return tp_cuda_devices(gpus, dev);
  }
  const int32_t n = std::max(1, o.tp);
  if (dev == "cpu" || (dev == "auto" && !auto_device_is_cuda())) return std::vector<std::string>(size_t(n), "cpu");
  if (dev == "cuda" || dev == "auto") {
    std::vector<int> gpus;
    for (int32_t r = 0; r < n; ++r) gpus.push_back(int(r));
    if (dev == "cuda") require_cuda_device(dev);
    const size_t have = list_devices().size();
    BRISK_CHECK(size_t(n) <= have, "--tp ", n, " needs ", n, " GPUs, this machine has ", have);
    return tp_cuda_devices(gpus, "cuda");
  }
  BRISK_CHECK(dev.rfind("cuda:", 0) == 0, "unknown device '", dev, "' (use auto, cpu, cuda, cuda:N or cuda:I,J,...)");
  BRISK_CHECK(n == 1, "--tp ", n, " with --device ", dev, ", one GPU: list one per rank (--device cuda:0,1,...) or use "
              "--device cuda for GPUs 0..", n - 1);
  return tp_cuda_devices(tp_parse_device_list(dev), dev);
}

std::unique_ptr<Context> tp_context_create(std::shared_ptr<const LoadedModel> model, const ContextOptions& options) {
  BRISK_CHECK(model != nullptr, "tp_context_create: no model");
  return std::make_unique<TpContext>(std::move(model), options);
}

}  // namespace brisk
