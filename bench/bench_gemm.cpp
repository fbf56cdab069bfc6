// Prefill matmul microbenchmark: Y = X W^T for 512 tokens, single thread, activations already
// quantized. Compares the GEMM tile kernels (kernels/cpu/gemm.h) with the multi-token GEMV path
// the matmul driver used before (blocks of 64 rows swept over the tokens 8 at a time), in the
// same run. Counters: GFLOP/s (2 * rows * k * tokens per second) and tok/s.
//   build/release/bench/brisk_microbench --benchmark_filter=prefill
#include <benchmark/benchmark.h>

#include <algorithm>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/cpu/dot.h"
#include "kernels/cpu/gemm.h"
#include "quant/format.h"
#include "quant/types.h"

namespace {

using brisk::QuantType;
using namespace brisk::kernels;

constexpr int64_t kTokens = 512;

struct Problem {
  std::vector<uint8_t> w, x;
  size_t w_row = 0, x_row = 0;
  std::vector<float> y;
};

std::vector<uint8_t> random_rows(QuantType t, int64_t rows, int64_t k, size_t stride, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<uint8_t> m(size_t(rows) * stride);
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : row) v = g(rng);
    brisk::format_traits(t).quantize_row_ref(row.data(), m.data() + size_t(r) * stride, k);
  }
  return m;
}

Problem& problem(QuantType t, int64_t n_out, int64_t n_in) {
  static std::map<std::tuple<QuantType, int64_t, int64_t>, Problem> cache;
  auto key = std::make_tuple(t, n_out, n_in);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Problem p;
  p.w_row = size_t(*brisk::quant_row_bytes(t, uint64_t(n_in)));
  p.x_row = activation_row_bytes(t, n_in);
  p.w = random_rows(t, n_out, n_in, p.w_row, 1);
  p.x = random_rows(activation_type(t), kTokens, n_in, p.x_row, 2);
  p.y.assign(size_t(kTokens * n_out), 0.f);
  return cache.emplace(key, std::move(p)).first->second;
}

void run(benchmark::State& st, QuantType t, bool gemm) {
  const int64_t n_out = st.range(0), n_in = st.range(1);
  if (n_in % int64_t(brisk::quant_type_info(t).block_size) != 0) {
    st.SkipWithError("row length is not a whole number of blocks");
    return;
  }
  if (gemm && !gemm_available(t)) {
    st.SkipWithError("no GEMM kernel on this CPU");
    return;
  }
  Problem& p = problem(t, n_out, n_in);
  for (auto _ : st) {
    if (gemm) {
      gemm_rows({.weight_type = t, .w = p.w.data(), .row_bytes = p.w_row, .n_rows = n_out, .k = n_in,
                 .x_quant = p.x.data(), .x_stride = p.x_row, .n_tokens = kTokens, .y = p.y.data(),
                 .y_stride = n_out});
    } else {
      for (int64_t r0 = 0; r0 < n_out; r0 += 64) {
        const int64_t r1 = std::min(n_out, r0 + 64);
        for (int64_t t0 = 0; t0 < kTokens; t0 += 8)
          gemv_rows_multi({.weight_type = t, .w = p.w.data() + size_t(r0) * p.w_row, .row_bytes = p.w_row,
                           .n_rows = r1 - r0, .k = n_in, .x_quant = p.x.data() + size_t(t0) * p.x_row,
                           .x_stride = p.x_row, .n_tokens = 8, .y = p.y.data() + t0 * n_out + r0,
                           .y_stride = n_out});
      }
    }
    benchmark::DoNotOptimize(p.y.data());
  }
  const double flop = 2.0 * double(n_out) * double(n_in) * double(kTokens);
  st.counters["GFLOP/s"] = benchmark::Counter(flop * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["tok/s"] = benchmark::Counter(double(kTokens), benchmark::Counter::kIsIterationInvariantRate);
}

void shapes(benchmark::internal::Benchmark* b) {
  b->Args({4864, 896})->Args({896, 4864})->Args({4096, 4096})->Unit(benchmark::kMillisecond);
}

BENCHMARK_CAPTURE(run, prefill_gemm_q8_0, QuantType::Q8_0, true)->Apply(shapes);
BENCHMARK_CAPTURE(run, prefill_gemv8_q8_0, QuantType::Q8_0, false)->Apply(shapes);
BENCHMARK_CAPTURE(run, prefill_gemm_q4_0, QuantType::Q4_0, true)->Apply(shapes);
BENCHMARK_CAPTURE(run, prefill_gemv8_q4_0, QuantType::Q4_0, false)->Apply(shapes);
BENCHMARK_CAPTURE(run, prefill_gemm_q4_k, QuantType::Q4_K, true)->Apply(shapes);
BENCHMARK_CAPTURE(run, prefill_gemv8_q4_k, QuantType::Q4_K, false)->Apply(shapes);
BENCHMARK_CAPTURE(run, prefill_gemm_q5_k, QuantType::Q5_K, true)->Apply(shapes);
BENCHMARK_CAPTURE(run, prefill_gemv8_q5_k, QuantType::Q5_K, false)->Apply(shapes);
BENCHMARK_CAPTURE(run, prefill_gemm_q6_k, QuantType::Q6_K, true)->Apply(shapes);
BENCHMARK_CAPTURE(run, prefill_gemv8_q6_k, QuantType::Q6_K, false)->Apply(shapes);

}  // namespace
