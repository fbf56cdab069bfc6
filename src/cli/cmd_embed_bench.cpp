// `brisk embed-bench`: throughput of an encoder on a batch of inputs (default 256 x 128 tokens,
// packed into forwards of --batch tokens) and the latency of one short query, on a random-weight
// model of a known shape (models/random_model.h: bge-small, bge-m3, bert-tiny) or a model file.
// Beside it, in the same run and on the same device, the backend's GEMM rate on the model's MLP
// shape (x [rows, n_embd] times W [n_ff, n_embd]: on the CPU in the weights' format with the same
// threads, on CUDA the BF16 tensor-core GEMM that the encoder's matmuls run on), so that the
// encoder's achieved FLOP/s reads as a fraction of what its largest matmul reaches alone.
#include <algorithm>
#include <chrono>
#include <cstring>
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
#ifdef BRISK_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Best seconds of one call of `f` over `reps` timed calls (after one untimed call).
template <class F>
double best_seconds(int reps, F&& f) {
  f();
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    f();
    const double s = seconds(t0, Clock::now());
    best = best == 0 ? s : std::min(best, s);
  }
  return best;
}

// GEMM FLOP/s of out [rows, n] = x [rows, k] . W [n, k]^T on `be`: the weights in `wt` on the CPU;
// on CUDA the BF16 tensor-core GEMM (BF16 operands, F32 out).
double gemm_flop_s(brisk::Backend& be, brisk::QuantType wt, int64_t rows, int64_t n, int64_t k, int reps) {
  const double flops = 2.0 * double(rows) * double(n) * double(k);
  if (be.name() != "cpu") {
#ifdef BRISK_HAVE_CUDA
    BRISK_CHECK(brisk::cuda_has_gemm(be), "embed-bench: the CUDA GEMM rate needs the tensor-core GEMM (cuBLAS build)");
    // Random operands in [-1, 1): a constant matrix toggles few bits in the tensor cores, draws
    // less power and runs faster than any model's activations and weights do.
    std::vector<uint16_t> host(size_t(std::max(rows, n) * k));
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (uint16_t& v : host) {
      const float f = u(rng);
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof bits);
      v = uint16_t(bits >> 16);  // BF16 (truncated)
    }
    auto* x = static_cast<uint16_t*>(be.alloc(sizeof(uint16_t) * size_t(rows * k)));
    auto* w = static_cast<uint16_t*>(be.alloc(sizeof(uint16_t) * size_t(n * k)));
    auto* out = static_cast<float*>(be.alloc(sizeof(float) * size_t(rows * n)));
    be.copy(x, host.data(), sizeof(uint16_t) * size_t(rows * k));
    be.copy(w, host.data(), sizeof(uint16_t) * size_t(n * k));
    const int inner = 20;  // launches per timed call: a single GEMM is a few microseconds
    const double s = best_seconds(reps, [&] {
      for (int i = 0; i < inner; ++i) brisk::cuda_gemm_bf16(be, x, w, out, rows, n, k);
      be.synchronize();
    });
    be.free(x);
    be.free(w);
    be.free(out);
    return flops * inner / s;
#else
    BRISK_CHECK(false, "embed-bench: this build has no CUDA backend");
    return 0;
#endif
  }
  std::vector<float> x(size_t(rows * k), 0.5f), wrow(static_cast<size_t>(k)), out(size_t(rows * n));
  const size_t rb = size_t(brisk::quant_row_bytes(wt, uint64_t(k)).value());
  std::vector<uint8_t> w(rb * size_t(n));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < k; ++i) wrow[size_t(i)] = 0.01f * float((r * 7 + i * 3) % 17 - 8);
    brisk::cpu::row_from_f32(wt, wrow.data(), w.data() + size_t(r) * rb, k);
  }
  const brisk::Weight W{.type = wt, .n_in = k, .n_out = n, .row_bytes = rb, .data = w.data()};
  const brisk::MatmulArgs mm{.out = {.data = out.data(), .rows = rows, .cols = n},
                             .x = {.data = x.data(), .rows = rows, .cols = k}, .w = W};
  return flops / best_seconds(reps, [&] { be.matmul(mm); });
}

int cmd_embed_bench(const std::vector<std::string>& argv) {
  std::string model_path, shape = "bge-small", type_name = "f32", device = "cpu";
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
  p.text({"--device"}, &device, "D", "cpu (default), cuda or cuda:N");
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
  brisk::Embedder e(model, {.device = device, .n_threads = threads, .n_batch = batch});
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
  // The GEMM of the model's MLP up-projection on the same device, over one forward's rows: in
  // the random model's weight format on the CPU (F32 for a model file), BF16 on CUDA.
  auto be = brisk::make_backend(device, threads);
  const bool cpu = be->name() == "cpu";
  const brisk::QuantType wt = !cpu ? brisk::QuantType::BF16
                              : model_path.empty() ? *brisk::quant_type_from_name(type_name) : brisk::QuantType::F32;
  const int64_t rows = std::min<int64_t>(int64_t(batch), int64_t(n_inputs) * len);
  const double gemm_rate = gemm_flop_s(*be, wt, rows, int64_t(n_ff), mi.n_embd, reps);
  std::printf("model %s: %d layers, n_embd %d, n_ff %.0f, %s weights; %s\n",
              model_path.empty() ? shape.c_str() : mi.architecture.c_str(), mi.n_layer, mi.n_embd, n_ff,
              model_path.empty() ? type_name.c_str() : "stored",
              cpu ? (std::to_string(be->n_threads()) + " threads").c_str() : device.c_str());
  std::printf("batch %d x %d tokens: %.3f s, %.0f tokens/s, %.1f GFLOP/s (%d forwards of <= %d tokens)\n", n_inputs, len,
              best, tok_s, flop_s * 1e-9, forwards_per_batch, batch);
  std::printf("gemm %s [%lld x %d] x [%.0f x %d]: %.1f GFLOP/s; the encoder reaches %.0f %% of it\n",
              std::string(brisk::quant_type_info(wt).name).c_str(), static_cast<long long>(rows), mi.n_embd, n_ff, mi.n_embd, gemm_rate * 1e-9,
              100.0 * flop_s / gemm_rate);
  std::printf("query of %zu tokens: %.2f ms (median of %zu)\n", q.ids.size(), lat[lat.size() / 2] * 1e3, lat.size());
  return 0;
}

}  // namespace

BRISK_COMMAND("embed-bench", "encoder throughput and query latency (random model of a shape, or a file)", cmd_embed_bench);
