// `brisk embed-bench`: throughput of an encoder on a batch of inputs (default 256 x 128 tokens,
// packed into forwards of --batch tokens) and the latency of one short query, on a random-weight
// model of a known shape (models/random_model.h: bge-small, bge-m3, bert-tiny) or a model file.
// Beside it, in the same run and with the same threads, the backend's GEMM rate on the model's
// MLP shape (x [rows, n_embd] times W [n_ff, n_embd]), so that the encoder's achieved FLOP/s reads
// as a fraction of what its largest matmul reaches alone.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/model_arg.h"
#include "core/error.h"
#include "kernels/cpu/ops.h"
#include "models/random_model.h"
#include "quant/types.h"
#include "runtime/embedder.h"
#include "runtime/engine_parts.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

int cmd_embed_bench(const std::vector<std::string>& argv) {
  std::string model_path, shape = "bge-small", type_name = "f32";
  int32_t n_inputs = 256, len = 128, threads = 0, batch = 8192, reps = 3, query = 16;
  brisk::cli::ArgParser p("embed-bench", "[MODEL] [options]",
                          "Encoder throughput (tokens/s, FLOP/s) on a batch of inputs and the latency of one query, "
                          "with the GEMM rate of the model's MLP shape in the same run.");
  p.model(&model_path, "embedding model file or folder (default: a random model of --shape)", false);
  p.text({"--shape"}, &shape, "S", "bge-small (default) | bge-m3 | bert-tiny, or a decoder (qwen3-0.6b ...) as an "
         "embedding model: random weights of that shape");
  p.text({"--type"}, &type_name, "T", "weights of the random model: f32 (default) | f16 | bf16 | q8_0");
  p.integer({"-n", "--inputs"}, &n_inputs, 1, 1 << 20, "N", "inputs per batch (default 256)");
  p.integer({"-l", "--length"}, &len, 1, 1 << 16, "L", "tokens per input (default 128)");
  p.integer({"-q", "--query"}, &query, 1, 1 << 16, "L", "tokens of the latency query (default 16)");
  p.integer({"-b", "--batch"}, &batch, 1, 1 << 20, "N", "tokens per forward (default 8192)");
  p.integer({"-r", "--repetitions"}, &reps, 1, 100, "N", "repetitions (default 3)");
  p.integer({"-t", "--threads"}, &threads, 0, 1024, "N", "CPU threads (default: all cores)");
  if (!p.parse(argv)) return 0;
  std::shared_ptr<const brisk::Model> model;
  if (model_path.empty()) {
    brisk::RandomModelParams rp = brisk::random_model_preset(shape);
    const auto t = brisk::quant_type_from_name(type_name);
    if (!t) brisk::cli::usage_fail("--type '", type_name, "': use f32, f16, bf16 or q8_0");
    rp.type = *t;
    rp.n_threads = threads;
    rp.distinct_rows = 64;  // the bytes matter here, not the values
    if (rp.arch != "bert") rp.pooling_type = 3;  // a decoder shape: an embedding model, last-token pooling
    model = brisk::model_load_gguf_bytes(brisk::random_model_gguf(rp));
  } else {
    model = brisk::cli::load_model({.path = brisk::cli::resolve_model(model_path), .n_threads = threads});
  }
  brisk::Embedder e(model, {.device = "cpu", .n_threads = threads, .n_batch = batch});
  const brisk::ModelInfo& mi = model->info();
  len = std::min(len, e.max_tokens());
  std::mt19937 rng(1);
  std::vector<brisk::EmbedInput> inputs(static_cast<size_t>(n_inputs));
  for (auto& in : inputs)
    for (int32_t t = 0; t < len; ++t) in.ids.push_back(int32_t(rng() % uint32_t(e.vocab_size())));
  // FLOPs per input: per layer the q/k/v/o and MLP matmuls (2 n_embd (4 n_embd + 2 n_ff) per
  // token) and attention (2 x 2 len n_embd per token).
  const double d = mi.n_embd, n_ff = double(brisk::Embedder::mlp_width(*model));
  const double flops_per_input = double(mi.n_layer) * len * (2.0 * d * (4.0 * d + 2.0 * n_ff) + 4.0 * len * d);
  e.embed({inputs[0]});  // warm up (allocation)
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    e.embed(inputs);
    const double s = seconds(t0, Clock::now());
    best = best == 0 ? s : std::min(best, s);
  }
  const double tok_s = double(n_inputs) * len / best, flop_s = double(n_inputs) * flops_per_input / best;
  const int32_t forwards_per_batch = (e.stats().forwards - 1) / reps;  // less the warm-up
  // One short query, alone.
  brisk::EmbedInput q{.ids = std::vector<int32_t>(inputs[0].ids.begin(), inputs[0].ids.begin() + std::min(query, len))};
  std::vector<double> lat;
  for (int r = 0; r < std::max(5, reps); ++r) {
    const auto t0 = Clock::now();
    e.embed({q});
    lat.push_back(seconds(t0, Clock::now()));
  }
  std::sort(lat.begin(), lat.end());
  // The GEMM of the model's MLP up-projection on the same threads, in the random model's weight
  // format (F32 for a model file), over one forward's rows.
  auto be = brisk::make_backend("cpu", threads);
  const brisk::QuantType wt = model_path.empty() ? *brisk::quant_type_from_name(type_name) : brisk::QuantType::F32;
  const int64_t rows = std::min<int64_t>(int64_t(batch), int64_t(n_inputs) * len);
  std::vector<float> x(size_t(rows * mi.n_embd), 0.5f), wrow(size_t(mi.n_embd)), out(size_t(rows * n_ff));
  const size_t rb = size_t(brisk::quant_row_bytes(wt, uint64_t(mi.n_embd)).value());
  std::vector<uint8_t> w(rb * size_t(n_ff));
  for (int64_t r = 0; r < int64_t(n_ff); ++r) {
    for (int64_t i = 0; i < mi.n_embd; ++i) wrow[size_t(i)] = 0.01f * float((r * 7 + i * 3) % 17 - 8);
    brisk::cpu::row_from_f32(wt, wrow.data(), w.data() + size_t(r) * rb, mi.n_embd);
  }
  const brisk::Weight W{.type = wt, .n_in = mi.n_embd, .n_out = int64_t(n_ff), .row_bytes = rb, .data = w.data()};
  const brisk::MatmulArgs mm{.out = {.data = out.data(), .rows = rows, .cols = int64_t(n_ff)},
                             .x = {.data = x.data(), .rows = rows, .cols = mi.n_embd}, .w = W};
  be->matmul(mm);
  double gemm_best = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    be->matmul(mm);
    const double s = seconds(t0, Clock::now());
    gemm_best = gemm_best == 0 ? s : std::min(gemm_best, s);
  }
  const double gemm_flop_s = 2.0 * double(rows) * n_ff * d / gemm_best;
  std::printf("model %s: %d layers, n_embd %d, n_ff %.0f, %s weights; %d threads\n",
              model_path.empty() ? shape.c_str() : mi.architecture.c_str(), mi.n_layer, mi.n_embd, n_ff,
              model_path.empty() ? type_name.c_str() : "stored", be->n_threads());
  std::printf("batch %d x %d tokens: %.3f s, %.0f tokens/s, %.1f GFLOP/s (%d forwards of <= %d tokens)\n", n_inputs, len,
              best, tok_s, flop_s * 1e-9, forwards_per_batch, batch);
  std::printf("gemm %s [%lld x %d] x [%.0f x %d]: %.1f GFLOP/s; the encoder reaches %.0f %% of it\n",
              std::string(brisk::quant_type_info(wt).name).c_str(), static_cast<long long>(rows), mi.n_embd, n_ff, mi.n_embd, gemm_flop_s * 1e-9,
              100.0 * flop_s / gemm_flop_s);
  std::printf("query of %zu tokens: %.2f ms (median of %zu)\n", q.ids.size(), lat[lat.size() / 2] * 1e3, lat.size());
  return 0;
}

}  // namespace

BRISK_COMMAND("embed-bench", "encoder throughput and query latency (random model of a shape, or a file)", cmd_embed_bench);
