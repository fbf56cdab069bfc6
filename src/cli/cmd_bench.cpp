// `brisk bench`: prompt-processing and decode speed of a model, llama-bench style, with the
// roofline beside it: bytes of weights read per decoded token, the machine's read bandwidth
// measured in the same run with the same thread count, and the fraction of it decode reaches.
// Each repetition runs on a fresh context (empty KV cache); --depth D first fills D tokens of
// context (not timed), so "tg128 @ d4096" is decode speed with 4096 tokens already cached.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/bandwidth.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "runtime/engine_api.h"

namespace {

using brisk::fail;
using Clock = std::chrono::steady_clock;

struct Args {
  std::string model;
  int32_t n_prompt = 512, n_gen = 128, threads = 0, reps = 3, depth = 0, n_batch = 512, bw_mib = 512;
  bool json = false, mmap = false;
};

int32_t parse_int(const std::string& flag, const std::string& v, int32_t lo, int32_t hi) {
  try {
    size_t used = 0;
    const long long x = std::stoll(v, &used);
    if (used == v.size() && x >= lo && x <= hi) return int32_t(x);
  } catch (const std::exception&) {
  }
  fail("bench: ", flag, ": '", v, "' is not an integer in [", lo, ", ", hi, "]");
}

Args parse(const std::vector<std::string>& argv) {
  Args a;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& f = argv[i];
    auto value = [&]() -> const std::string& {
      BRISK_CHECK(i + 1 < argv.size(), "bench: ", f, " needs a value");
      return argv[++i];
    };
    if (f == "-m" || f == "--model") a.model = value();
    else if (f == "-p" || f == "--n-prompt") a.n_prompt = parse_int(f, value(), 0, 1 << 20);
    else if (f == "-n" || f == "--n-gen") a.n_gen = parse_int(f, value(), 0, 1 << 20);
    else if (f == "-t" || f == "--threads") a.threads = parse_int(f, value(), 0, 1024);
    else if (f == "-r" || f == "--repetitions") a.reps = parse_int(f, value(), 1, 1000);
    else if (f == "-d" || f == "--depth") a.depth = parse_int(f, value(), 0, 1 << 20);
    else if (f == "-b" || f == "--batch") a.n_batch = parse_int(f, value(), 1, 1 << 16);
    else if (f == "--bw-mib") a.bw_mib = parse_int(f, value(), 1, 1 << 16);
    else if (f == "--json") a.json = true;
    else if (f == "--mmap") a.mmap = true;
    else if (f == "-h" || f == "--help") {
      std::printf(
          "usage: brisk bench --model M [-p 512] [-n 128] [-t N] [-r 3] [--depth D] [-b 512] [--json] [--mmap]\n"
          "       [--bw-mib 512]   size of the read-bandwidth probe buffer\n");
      std::exit(0);
    } else fail("bench: unknown argument '", f, "'");
  }
  BRISK_CHECK(!a.model.empty(), "bench: --model M is required");
  BRISK_CHECK(a.n_prompt > 0 || a.n_gen > 0, "bench: nothing to measure (-p 0 -n 0)");
  return a;
}

struct Stats {
  std::string name;
  std::vector<double> tps;
  double mean() const {
    double s = 0;
    for (double v : tps) s += v;
    return tps.empty() ? 0 : s / double(tps.size());
  }
  double sd() const {
    if (tps.size() < 2) return 0;
    const double m = mean();
    double s = 0;
    for (double v : tps) s += (v - m) * (v - m);
    return std::sqrt(s / double(tps.size() - 1));
  }
};

class Runner {
 public:
  Runner(std::shared_ptr<const brisk::Model> model, const Args& a) : model_(std::move(model)), a_(a) {
    const int32_t need = a.depth + std::max(a.n_prompt, a.n_gen) + 1;
    opts_ = {.n_ctx = need, .n_seq_max = 1, .n_batch = a.n_batch, .n_threads = a.threads};
  }

  // Fresh context with `depth` tokens already decoded (untimed; none for the warm-up).
  std::unique_ptr<brisk::Context> fresh(bool with_depth = true) {
    auto ctx = brisk::Context::create(model_, opts_);
    if (with_depth) feed(*ctx, a_.depth, false);
    return ctx;
  }

  // Decodes n tokens in batches of n_batch; logits only for the last of each batch.
  void feed(brisk::Context& ctx, int32_t n, bool last_logits) {
    int32_t pos = ctx.seq_length(0);
    for (int32_t done = 0; done < n;) {
      const int32_t m = std::min(a_.n_batch, n - done);
      std::vector<brisk::BatchToken> batch(static_cast<size_t>(m));
      for (int32_t i = 0; i < m; ++i)
        batch[size_t(i)] = {.token = next_token(), .pos = pos + i, .seq = 0, .want_logits = last_logits && i == m - 1};
      ctx.decode(batch);
      pos += m;
      done += m;
    }
  }

  double time_prompt() {
    auto ctx = fresh();
    const auto t0 = Clock::now();
    feed(*ctx, a_.n_prompt, true);
    return double(a_.n_prompt) / std::chrono::duration<double>(Clock::now() - t0).count();
  }

  double time_decode() {
    auto ctx = fresh();
    int32_t pos = ctx->seq_length(0);
    const auto t0 = Clock::now();
    for (int32_t i = 0; i < a_.n_gen; ++i)
      ctx->decode({{.token = next_token(), .pos = pos++, .seq = 0, .want_logits = true}});
    return double(a_.n_gen) / std::chrono::duration<double>(Clock::now() - t0).count();
  }

 private:
  int32_t next_token() {  // deterministic spread over the vocabulary
    rng_ = rng_ * 6364136223846793005ULL + 1442695040888963407ULL;
    return int32_t((rng_ >> 33) % uint64_t(model_->info().n_vocab));
  }
  std::shared_ptr<const brisk::Model> model_;
  Args a_;
  brisk::ContextOptions opts_;
  uint64_t rng_ = 42;
};

std::string fmt(const char* f, double a, double b = 0) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, a, b);
  return buf;
}

int cmd_bench(const std::vector<std::string>& argv) {
  const Args a = parse(argv);
  const int32_t n_threads = a.threads > 0 ? a.threads : brisk::ThreadPool::default_threads();
  const auto t_load = Clock::now();
  std::shared_ptr<const brisk::Model> model =
      brisk::Model::load({.path = a.model, .use_mmap = a.mmap, .n_threads = n_threads});
  const double load_s = std::chrono::duration<double>(Clock::now() - t_load).count();
  const auto& info = model->info();
  BRISK_CHECK(info.n_vocab > 0, "bench: ", a.model, " has no vocabulary");

  Runner run(model, a);
  {  // warm-up: first touch of weights and scratch buffers
    auto ctx = run.fresh(false);
    run.feed(*ctx, std::min(a.n_prompt > 0 ? a.n_prompt : 1, 32), true);
    run.feed(*ctx, 1, true);
  }
  const std::string at = a.depth > 0 ? " @ d" + std::to_string(a.depth) : "";
  std::vector<Stats> results;
  if (a.n_prompt > 0) results.push_back({"pp" + std::to_string(a.n_prompt) + at, {}});
  if (a.n_gen > 0) results.push_back({"tg" + std::to_string(a.n_gen) + at, {}});
  for (int r = 0; r < a.reps; ++r) {
    size_t k = 0;
    if (a.n_prompt > 0) results[k++].tps.push_back(run.time_prompt());
    if (a.n_gen > 0) results[k++].tps.push_back(run.time_decode());
  }
  // The probe runs after the model so that both see the same memory pressure.
  const auto bw = brisk::measure_read_bandwidth(
      {.n_threads = n_threads, .buffer_bytes = uint64_t(a.bw_mib) << 20, .reps = 5});

  const double gb = 1e9;
  uint64_t file_bytes = 0;
  std::error_code ec;
  if (std::filesystem::is_regular_file(a.model, ec)) file_bytes = std::filesystem::file_size(a.model, ec);
  const double tg = a.n_gen > 0 ? results.back().mean() : 0;
  const double tg_bps = tg * double(info.weight_bytes);
  const double frac = bw.bytes_per_s > 0 ? tg_bps / bw.bytes_per_s : 0;

  if (a.json) {
    nlohmann::json j = {
        {"model", a.model},
        {"architecture", info.architecture},
        {"file_bytes", file_bytes},
        {"n_params", info.n_params},
        {"weight_bytes_per_token", info.weight_bytes},
        {"threads", n_threads},
        {"mmap", a.mmap},
        {"n_prompt", a.n_prompt},
        {"n_gen", a.n_gen},
        {"depth", a.depth},
        {"repetitions", a.reps},
        {"load_seconds", load_s},
        {"read_bandwidth_bytes_per_s", bw.bytes_per_s},
        {"read_bandwidth_mean_bytes_per_s", bw.mean_bytes_per_s},
        {"decode_bytes_per_s", tg_bps},
        {"decode_bandwidth_fraction", frac},
        {"roofline_tokens_per_s", info.weight_bytes ? bw.bytes_per_s / double(info.weight_bytes) : 0.0},
    };
    nlohmann::json tests = nlohmann::json::array();
    for (const auto& s : results)
      tests.push_back({{"test", s.name}, {"tokens_per_s", s.mean()}, {"sd", s.sd()}, {"samples", s.tps}});
    j["tests"] = tests;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("| model | size | params | threads | mmap | test | t/s | B/token | read BW | of BW |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  const std::string name = info.architecture + " " + std::filesystem::path(a.model).filename().string();
  for (const auto& s : results) {
    const bool is_tg = s.name.rfind("tg", 0) == 0;
    std::printf("| %s | %s | %s | %d | %d | %s | %s | %s | %s | %s |\n", name.c_str(),
                fmt("%.2f MiB", double(file_bytes) / 1048576.0).c_str(),
                fmt("%.2f M", double(info.n_params) / 1e6).c_str(), n_threads, a.mmap ? 1 : 0, s.name.c_str(),
                fmt("%.2f ± %.2f", s.mean(), s.sd()).c_str(),
                fmt("%.1f MB", double(info.weight_bytes) / 1e6).c_str(),
                fmt("%.2f GB/s", bw.bytes_per_s / gb).c_str(), is_tg ? fmt("%.1f %%", 100.0 * frac).c_str() : "");
  }
  std::printf("decode ceiling at %.2f GB/s: %.1f tok/s; decode reads %.2f GB/s; load %.2f s\n", bw.bytes_per_s / gb,
              info.weight_bytes ? bw.bytes_per_s / double(info.weight_bytes) : 0.0, tg_bps / gb, load_s);
  return 0;
}

}  // namespace

BRISK_COMMAND("bench", "measure prompt and decode speed against the machine's read bandwidth", cmd_bench);
