// `brisk bench`: prompt-processing and decode speed of a model, llama-bench style, with the
// roofline beside it: bytes read per decoded token (the weights, plus the recurrent state of
// linear-attention layers, read and written once per token), the machine's read bandwidth
// measured in the same run with the same thread count, and the fraction of it decode reaches.
// Each repetition runs on a fresh context (empty KV cache); --depth D first fills D tokens of
// context (not timed), so "tg128 @ d4096" is decode speed with 4096 tokens already cached.
// --depth takes a list (0,4096): the repetitions then alternate the depths, so that a ratio of
// two depths compares runs of the same moments. The bandwidth probe runs right before each
// timed decode and each repetition's fraction uses its own probe: on a shared host the
// bandwidth available moves over seconds, and both sides of the ratio should see the same.
// --device (default auto: the GPU when one is usable) runs the model there; on a GPU the
// probe is the device-to-device copy bandwidth (bytes read + written per second), the figure
// `brisk cuda-bench` compares decode with.
// --spec ngram|oracle|draft (with --draft-max K) adds greedy generation with speculative decoding
// beside the same generation without it ("tg128 plain", "tg128 spec-oracle k4": tokens after the
// first per second, acceptance beside), oracle replaying the model's own greedy output as the draft
// (every draft kept: the ceiling). --verify K[,K...] times one forward of K + 1 tokens with every
// row's logits (a verify step, then cut back) against a one-token decode step, as a ratio.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/model_arg.h"
#include "cli/spec_args.h"
#include "core/bandwidth.h"
#include "core/error.h"
#include "backend/backend.h"
#include "core/thread_pool.h"
#include "runtime/engine_api.h"
#include "runtime/generate.h"

namespace {

using brisk::fail;
using Clock = std::chrono::steady_clock;

struct Args {
  std::string model, device = "auto";
  int32_t n_prompt = 512, n_gen = 128, threads = 0, reps = 3, n_batch = 512, bw_mib = 512;
  int32_t tp = 0;  // --tp: tensor-parallel ranks (0: none)
  std::vector<int32_t> depths{0};
  std::vector<int32_t> verify;  // --verify: drafted tokens per verify step to time
  bool json = false, mmap = false;
  brisk::cli::SpecArgs spec;
};

std::vector<int32_t> parse_list(const std::string& what, const std::string& list, int32_t lo, int32_t hi) {
  std::vector<int32_t> out;
  for (size_t at = 0; at <= list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    out.push_back(int32_t(brisk::cli::parse_integer(what, list.substr(at, comma - at), lo, hi)));
    at = comma + 1;
  }
  if (out.size() > 16) brisk::cli::usage_fail(what, ": at most 16 values");
  return out;
}

// Returns false when --help was printed.
bool parse(const std::vector<std::string>& argv, Args& a) {
  brisk::cli::ArgParser p("bench", "MODEL [options]",
                          "Prompt (pp) and decode (tg) speed, llama-bench style, with the read bandwidth of the "
                          "same run beside it.");
  p.model(&a.model, "GGUF file, Hugging Face folder or Hub reference");
  p.integer({"-p", "--n-prompt"}, &a.n_prompt, 0, 1 << 20, "N", "prompt tokens per prefill test (default 512)");
  p.integer({"-n", "--n-gen"}, &a.n_gen, 0, 1 << 20, "N", "decoded tokens per decode test (default 128)");
  brisk::cli::add_threads_option(p, &a.threads);
  p.integer({"-r", "--repetitions"}, &a.reps, 1, 1000, "N", "repetitions of each test (default 3)");
  p.option({"-d", "--depth"}, "D[,D...]", "tokens already in the context (list: the repetitions alternate)",
           [&](const std::string& list) { a.depths = parse_list("--depth", list, 0, 1 << 20); });
  p.integer({"-b", "--batch"}, &a.n_batch, 1, 1 << 16, "N", "tokens per forward in the prefill (default 512)");
  p.integer({"--bw-mib"}, &a.bw_mib, 1, 1 << 16, "MIB", "size of the read-bandwidth probe buffer (a GPU's copy probe: at least 1024)");
  brisk::cli::add_device_option(p, &a.device, "auto: the GPU when one is usable");
  brisk::cli::add_tp_option(p, &a.tp);
  p.flag({"--json"}, &a.json, "machine-readable output");
  p.flag({"--mmap"}, &a.mmap, "memory-map the weights instead of reading them");
  p.option({"--verify"}, "K[,K...]", "time a verify step of K drafted tokens (K + 1 rows) against a decode step",
           [&](const std::string& list) { a.verify = parse_list("--verify", list, 1, 64); });
  brisk::cli::add_spec_options(p, &a.spec, "oracle | draft");
  if (!p.parse(argv)) return false;
  if (a.n_prompt == 0 && a.n_gen == 0) brisk::cli::usage_fail("nothing to measure (-p 0 -n 0)");
  return true;
}

struct Stats {
  std::string name;
  int32_t depth = 0;
  bool decode = false;
  std::vector<double> tps;
  std::vector<double> bw;  // decode: the probe (bytes/s) right before each repetition
  // Decode: mean over the repetitions of tok/s x bytes per token / that repetition's probe.
  double fraction(uint64_t bytes_per_token) const {
    double s = 0;
    for (size_t i = 0; i < tps.size() && i < bw.size(); ++i) s += bw[i] > 0 ? tps[i] * double(bytes_per_token) / bw[i] : 0;
    return bw.empty() ? 0 : s / double(bw.size());
  }
  double mean_bw() const {
    double s = 0;
    for (double v : bw) s += v;
    return bw.empty() ? 0 : s / double(bw.size());
  }
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
    const int32_t need = *std::max_element(a.depths.begin(), a.depths.end()) + std::max(a.n_prompt, a.n_gen) + 1;
    opts_ = {.n_ctx = need + 64 + *std::max_element(a.depths.begin(), a.depths.end()), .n_seq_max = 1,
             .n_batch = a.n_batch, .n_threads = a.threads, .device = a.device, .tp = a.tp,
             .state_checkpoints = brisk::cli::spec_requested(a.spec) || !a.verify.empty()};
  }
  const brisk::ContextOptions& options() const { return opts_; }

  // The backend the contexts run on ("auto" resolved once, so that it warns once). On a GPU
  // one context serves every repetition, emptied in between: a context's backend uploads the
  // weights at their first use, which a fresh context per repetition would time.
  void set_device(const std::string& d) {
    opts_.device = d;
    reuse_ = d != "cpu";
  }

  // A context with an empty KV cache and then `depth` tokens decoded (untimed).
  brisk::Context& fresh(int32_t depth) {
    if (reuse_ && ctx_) ctx_->seq_truncate(0, 0);
    else ctx_ = brisk::Context::create(model_, opts_);
    feed(*ctx_, depth, false);
    return *ctx_;
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

  double time_prompt(int32_t depth) {
    brisk::Context& ctx = fresh(depth);
    const auto t0 = Clock::now();
    feed(ctx, a_.n_prompt, true);
    return double(a_.n_prompt) / std::chrono::duration<double>(Clock::now() - t0).count();
  }

  // One forward of k + 1 tokens with every row's logits, cut back after each (a verify step
  // whose drafts are all rejected), over `steps` steps; k = 0 is the plain decode step.
  // Returns steps per second.
  double time_verify(int32_t depth, int32_t k, int32_t steps) {
    brisk::Context& ctx = fresh(depth + 1);
    const int32_t pos = ctx.seq_length(0);
    std::vector<brisk::BatchToken> batch;
    for (int32_t i = 0; i <= k; ++i) batch.push_back({.token = next_token(), .pos = pos + i, .seq = 0, .want_logits = true});
    const auto t0 = Clock::now();
    for (int32_t s = 0; s < steps; ++s) {
      ctx.seq_checkpoint(0);
      ctx.decode(batch);
      ctx.seq_truncate(0, pos);
    }
    return double(steps) / std::chrono::duration<double>(Clock::now() - t0).count();
  }

  // Greedy generation of n_gen tokens after a prompt of max(depth, 16) tokens, with `spec` or
  // without; tokens after the first per second (the first comes from the prompt).
  brisk::GenerateResult generate(int32_t depth, const brisk::SpecOptions& spec, std::vector<int32_t>* prompt_out = nullptr) {
    fresh(0);
    std::vector<int32_t> prompt;
    rng_ = 7;  // the same prompt every time
    for (int32_t i = 0; i < std::max(depth, 16); ++i) prompt.push_back(next_token());
    if (prompt_out) *prompt_out = prompt;
    brisk::GenerateParams gp{.max_tokens = a_.n_gen, .sampling = {.temperature = 0.0f}, .spec = spec};
    return brisk::generate(*ctx_, nullptr, prompt, gp);
  }

  double time_decode(int32_t depth) {
    brisk::Context& ctx = fresh(depth);
    int32_t pos = ctx.seq_length(0);
    const auto t0 = Clock::now();
    for (int32_t i = 0; i < a_.n_gen; ++i)
      ctx.decode({{.token = next_token(), .pos = pos++, .seq = 0, .want_logits = true}});
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
  bool reuse_ = false;
  std::unique_ptr<brisk::Context> ctx_;
  uint64_t rng_ = 42;
};

std::string fmt(const char* f, double a, double b = 0) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, a, b);
  return buf;
}

int cmd_bench(const std::vector<std::string>& argv) {
  Args a;
  if (!parse(argv, a)) return 0;
  a.model = brisk::cli::resolve_model(a.model);
  const int32_t n_threads = a.threads > 0 ? a.threads : brisk::ThreadPool::default_threads();
  const auto t_load = Clock::now();
  std::shared_ptr<const brisk::Model> model =
      brisk::cli::load_model({.path = a.model, .use_mmap = a.mmap, .n_threads = n_threads});
  const double load_s = std::chrono::duration<double>(Clock::now() - t_load).count();
  const auto& info = model->info();
  BRISK_CHECK(info.n_vocab > 0, a.model, " has no vocabulary");

  Runner run(model, a);
  std::string device;  // the backend's name: "cpu", "cuda:0"
  {  // warm-up: first touch of weights and scratch buffers (on a GPU: the uploads)
    brisk::Context& ctx = run.fresh(0);
    device = ctx.options().device;
    run.set_device(device);
    run.feed(ctx, std::min(a.n_prompt > 0 ? a.n_prompt : 1, 32), true);
    run.feed(ctx, 1, true);
    if (device != "cpu" && a.n_prompt > 32) {  // the prompt's batch shape (scratch buffers)
      run.fresh(0);
      run.feed(ctx, a.n_prompt, true);
    }
  }
  const bool on_device = device != "cpu";
  std::vector<Stats> results;
  for (int32_t d : a.depths) {
    const std::string at = d > 0 ? " @ d" + std::to_string(d) : "";
    if (a.n_prompt > 0) results.push_back({.name = "pp" + std::to_string(a.n_prompt) + at, .depth = d, .decode = false, .tps = {}, .bw = {}});
    if (a.n_gen > 0) results.push_back({.name = "tg" + std::to_string(a.n_gen) + at, .depth = d, .decode = true, .tps = {}, .bw = {}});
  }
  // Best of 5 passes over the probe buffer with the bench's thread count, after the model is
  // loaded so that both see the same memory pressure.
  // On a GPU: best of 5 device-to-device copies of at least 1 GiB (read + write bytes).
  // (Tensor-parallel GPUs "cuda:0,1,...": the probe runs on the first.)
  const std::string probe_device = device.find(',') == std::string::npos ? device : device.substr(0, device.find(','));
  std::unique_ptr<brisk::Backend> dev_be = on_device ? brisk::make_backend(probe_device, 1) : nullptr;
  const auto probe = [&] {
    if (!on_device)
      return brisk::measure_read_bandwidth({.n_threads = n_threads, .buffer_bytes = uint64_t(a.bw_mib) << 20, .reps = 5});
    const size_t bytes = size_t(std::max(a.bw_mib, 1024)) << 20;
    void* src = dev_be->alloc(bytes);
    void* dst = dev_be->alloc(bytes);
    dev_be->copy(dst, src, bytes);  // first touch
    double best = 1e30, sum = 0;
    for (int i = 0; i < 5; ++i) {
      const auto t0 = Clock::now();
      dev_be->copy(dst, src, bytes);
      const double t = std::chrono::duration<double>(Clock::now() - t0).count();
      best = std::min(best, t);
      sum += t;
    }
    dev_be->free(src);
    dev_be->free(dst);
    return brisk::BandwidthResult{.bytes_per_s = 2.0 * double(bytes) / best, .mean_bytes_per_s = 2.0 * double(bytes) * 5 / sum,
                                  .n_threads = 0, .buffer_bytes = uint64_t(bytes)};
  };
  std::vector<brisk::BandwidthResult> probes;
  for (int r = 0; r < a.reps; ++r) {
    for (Stats& s : results) {
      if (!s.decode) {
        s.tps.push_back(run.time_prompt(s.depth));
        continue;
      }
      probes.push_back(probe());
      s.bw.push_back(probes.back().bytes_per_s);
      s.tps.push_back(run.time_decode(s.depth));
    }
  }
  // Speculative decoding: greedy generation with and without the draft source, alternating.
  struct SpecRow {
    std::string name;
    std::vector<double> tps;
    uint64_t steps = 0, drafted = 0, accepted = 0;
  };
  std::vector<SpecRow> spec_rows;
  std::string spec_source;
  if (brisk::cli::spec_requested(a.spec) && a.n_gen > 1) {
    brisk::SpecOptions spec;
    if (a.spec.spec == "oracle") {
      std::vector<int32_t> prompt;
      const brisk::GenerateResult plain = run.generate(a.depths.front(), {}, &prompt);
      prompt.insert(prompt.end(), plain.tokens.begin(), plain.tokens.end());
      spec = {.source = brisk::draft_source_oracle(prompt), .draft_max = a.spec.draft_max,
              .draft_min = a.spec.draft_min, .adaptive = !a.spec.no_adaptive};
    } else {
      spec = brisk::cli::make_spec_options(a.spec, model, a.model, run.options());
    }
    spec_source = spec.source->name();
    const std::string tg = "tg" + std::to_string(a.n_gen);
    spec_rows.resize(2);
    spec_rows[0].name = tg + " plain";
    spec_rows[1].name = tg + " spec-" + spec_source + " k" + std::to_string(a.spec.draft_max);
    for (int r = 0; r < a.reps; ++r) {
      for (int v = 0; v < 2; ++v) {
        const brisk::GenerateResult g = run.generate(a.depths.front(), v ? spec : brisk::SpecOptions{});
        SpecRow& row = spec_rows[size_t(v)];
        row.tps.push_back(g.decode_seconds > 0 ? double(g.n_decoded) / g.decode_seconds : 0.0);
        row.steps += uint64_t(g.spec_steps);
        row.drafted += uint64_t(g.spec_drafted);
        row.accepted += uint64_t(g.spec_accepted);
      }
    }
  }
  // Verify steps of k + 1 tokens against the one-token step, alternating.
  std::vector<std::pair<int32_t, std::vector<double>>> verify_rows;
  if (!a.verify.empty()) {
    verify_rows.push_back({0, {}});
    for (int32_t k : a.verify) verify_rows.push_back({k, {}});
    const int32_t steps = std::max(4, a.n_gen / 4);
    for (int r = 0; r < a.reps; ++r)
      for (auto& [k, tps] : verify_rows) tps.push_back(run.time_verify(a.depths.front(), k, steps));
  }
  auto mean_of = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / double(v.size());
  };
  if (probes.empty()) probes.push_back(probe());
  brisk::BandwidthResult bw{};  // means over the probes
  for (const auto& p : probes) {
    bw.bytes_per_s += p.bytes_per_s / double(probes.size());
    bw.mean_bytes_per_s += p.mean_bytes_per_s / double(probes.size());
  }

  const double gb = 1e9;
  uint64_t file_bytes = 0;
  std::error_code ec;
  if (std::filesystem::is_regular_file(a.model, ec)) file_bytes = std::filesystem::file_size(a.model, ec);
  const Stats* first_tg = nullptr;
  for (const Stats& s : results)
    if (s.decode && !first_tg) first_tg = &s;
  // A decoded token streams every weight once and reads and writes each recurrent layer's state.
  const uint64_t token_bytes = info.weight_bytes + info.state_bytes;
  const double tg_bps = first_tg ? first_tg->mean() * double(token_bytes) : 0;
  const double frac = first_tg ? first_tg->fraction(token_bytes) : 0;

  if (a.json) {
    nlohmann::json j = {
        {"model", a.model},
        {"architecture", info.architecture},
        {"file_bytes", file_bytes},
        {"n_params", info.n_params},
        {"weight_bytes_per_token", info.weight_bytes},
        {"state_bytes_per_token", info.state_bytes},
        {"bytes_per_token", token_bytes},
        {"threads", n_threads},
        {"device", device},
        {"tp", a.tp},  // tensor-parallel ranks (0: none)
        {"bandwidth_probe", on_device ? "device copy (read + write)" : "host read"},
        {"mmap", a.mmap},
        {"n_prompt", a.n_prompt},
        {"n_gen", a.n_gen},
        {"depth", a.depths.front()},
        {"depths", a.depths},
        {"repetitions", a.reps},
        {"load_seconds", load_s},
        {"read_bandwidth_bytes_per_s", bw.bytes_per_s},
        {"read_bandwidth_mean_bytes_per_s", bw.mean_bytes_per_s},
        {"decode_bytes_per_s", tg_bps},
        {"decode_bandwidth_fraction", frac},  // of the first decode test
        {"roofline_tokens_per_s", token_bytes ? bw.bytes_per_s / double(token_bytes) : 0.0},
    };
    nlohmann::json tests = nlohmann::json::array();
    for (const auto& s : results) {
      nlohmann::json t = {{"test", s.name}, {"depth", s.depth}, {"tokens_per_s", s.mean()}, {"sd", s.sd()}, {"samples", s.tps}};
      if (s.decode) {
        t["read_bandwidth_samples"] = s.bw;
        t["bandwidth_fraction"] = s.fraction(token_bytes);
      }
      tests.push_back(t);
    }
    j["tests"] = tests;
    if (!spec_rows.empty()) {
      nlohmann::json sj = nlohmann::json::array();
      for (const SpecRow& r : spec_rows)
        sj.push_back({{"test", r.name}, {"tokens_per_s", mean_of(r.tps)}, {"samples", r.tps}, {"verify_steps", r.steps},
                      {"drafted", r.drafted}, {"accepted", r.accepted},
                      {"acceptance_rate", r.drafted ? double(r.accepted) / double(r.drafted) : 0.0},
                      {"mean_accepted", r.steps ? double(r.accepted) / double(r.steps) : 0.0}});
      j["speculative"] = sj;
    }
    if (!verify_rows.empty()) {
      nlohmann::json vj = nlohmann::json::array();
      const double base = mean_of(verify_rows.front().second);
      for (const auto& [k, tps] : verify_rows)
        vj.push_back({{"drafted", k}, {"steps_per_s", mean_of(tps)}, {"cost_over_decode", mean_of(tps) > 0 ? base / mean_of(tps) : 0.0}});
      j["verify"] = vj;
    }
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("| model | size | params | %s | mmap | test | t/s | B/token | %s | of BW |\n",
              on_device ? "device" : "threads", on_device ? "copy BW" : "read BW");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  const std::string name = info.architecture + " " + std::filesystem::path(a.model).filename().string();
  for (const auto& s : results) {
    std::printf("| %s | %s | %s | %s | %d | %s | %s | %s | %s | %s |\n", name.c_str(),
                fmt("%.2f MiB", double(file_bytes) / 1048576.0).c_str(),
                fmt("%.2f M", double(info.n_params) / 1e6).c_str(),
                on_device ? device.c_str() : std::to_string(n_threads).c_str(), a.mmap ? 1 : 0, s.name.c_str(),
                fmt("%.2f ± %.2f", s.mean(), s.sd()).c_str(),
                fmt("%.1f MB", double(token_bytes) / 1e6).c_str(),
                fmt("%.2f GB/s", (s.decode ? s.mean_bw() : bw.bytes_per_s) / gb).c_str(),
                s.decode ? fmt("%.1f %%", 100.0 * s.fraction(token_bytes)).c_str() : "");
  }
  if (info.state_bytes > 0)
    std::printf("B/token: %.1f MB of weights + %.1f MB of recurrent state (read and written once per token)\n",
                double(info.weight_bytes) / 1e6, double(info.state_bytes) / 1e6);
  std::printf("decode ceiling at %.2f GB/s: %.1f tok/s; decode reads %.2f GB/s; load %.2f s\n", bw.bytes_per_s / gb,
              token_bytes ? bw.bytes_per_s / double(token_bytes) : 0.0, tg_bps / gb, load_s);
  for (const auto& s : results)
    if (s.decode && first_tg && &s != first_tg && first_tg->mean() > 0)
      std::printf("%s / %s: %.1f %%\n", s.name.c_str(), first_tg->name.c_str(), 100.0 * s.mean() / first_tg->mean());
  for (const SpecRow& r : spec_rows) {
    std::printf("%s: %.2f tok/s", r.name.c_str(), mean_of(r.tps));
    if (r.steps > 0)
      std::printf("; %s", brisk::cli::spec_summary(spec_source.c_str(), r.steps, r.drafted, r.accepted).c_str());
    std::printf("\n");
  }
  if (spec_rows.size() == 2 && mean_of(spec_rows[0].tps) > 0)
    std::printf("speculative / plain: %.2fx\n", mean_of(spec_rows[1].tps) / mean_of(spec_rows[0].tps));
  if (!verify_rows.empty()) {
    const double base = mean_of(verify_rows.front().second);
    for (const auto& [k, tps] : verify_rows)
      std::printf("verify k=%d (%d tokens): %.2f steps/s, %.3fx the decode step\n", k, k + 1, mean_of(tps),
                  mean_of(tps) > 0 ? base / mean_of(tps) : 0.0);
  }
  return 0;
}

}  // namespace

BRISK_COMMAND("bench", "measure prompt and decode speed against the machine's read bandwidth (a GPU's copy bandwidth)",
              cmd_bench);
