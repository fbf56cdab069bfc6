// Decode GEMV microbenchmark: y = W x for a 4096 x 4096 weight matrix in each block format,
// single thread, x already quantized to the format's activation type. Reports the weight bytes
// streamed per second (bytes_per_second = GB/s of W). Variants: the selected kernel ("best")
// and, for formats with SIMD kernels, each ISA and the scalar reference.
// One 4096 x 4096 matrix (3-67 MB) stays in this machine's 260 MB L3, so those runs measure the
// kernels' compute speed; the gemv_dram/ runs cycle through copies totalling over 512 MB so that
// every pass streams from DRAM, to compare with the measured single-thread read bandwidth
// (about 13.5 GB/s here); gemv_dram_2t/ does the same on two threads, as decode does.
//   build/release/bench/brisk_microbench --benchmark_filter=gemv
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/dot.h"
#include "quant/format.h"
#include "quant/types.h"

namespace {

using brisk::QuantType;
using brisk::VecDotFn;
using namespace brisk::kernels;

constexpr int64_t kRows = 4096, kCols = 4096;

struct Problem {
  std::vector<uint8_t> w;  // (kRows, row_bytes)
  size_t row_bytes = 0;
  std::vector<uint8_t> x;  // one quantized activation row
};

// Weights: a pool of valid random blocks (finite, no denormal-range values) tiled over the
// matrix, so every format is built quickly and reads realistic bytes.
const Problem& problem(QuantType t) {
  static std::map<QuantType, Problem> cache;
  auto it = cache.find(t);
  if (it != cache.end()) return it->second;
  const auto& info = brisk::quant_type_info(t);
  const auto& f = brisk::format_traits(t);
  std::mt19937 rng(1);
  std::normal_distribution<float> gauss(0.f, 1.f);
  const int pool = 64;
  std::vector<uint8_t> blocks(size_t(pool) * info.type_size);
  std::vector<float> tmp(info.block_size);
  for (int b = 0; b < pool; ++b) {
    uint8_t* blk = blocks.data() + size_t(b) * info.type_size;
    if (info.block_size == 1) {
      float v = gauss(rng);
      f.quantize_row_ref(&v, blk, 1);
      continue;
    }
    for (;;) {
      for (size_t k = 0; k < info.type_size; ++k) blk[k] = uint8_t(rng());
      f.dequantize_row(blk, tmp.data(), info.block_size);
      bool ok = true;
      for (float v : tmp) ok &= std::isfinite(v) && std::fabs(v) < 1e3f && (v == 0.f || std::fabs(v) > 1e-4f);
      if (ok) break;
    }
  }
  Problem p;
  p.row_bytes = size_t(*brisk::quant_row_bytes(t, kCols));
  p.w.resize(p.row_bytes * size_t(kRows));
  const size_t nb = p.w.size() / info.type_size;
  for (size_t b = 0; b < nb; ++b)
    std::memcpy(p.w.data() + b * info.type_size, blocks.data() + (b * 7919 % pool) * info.type_size,
                info.type_size);
  std::vector<float> xf(kCols);
  for (float& v : xf) v = gauss(rng);
  p.x.resize(activation_row_bytes(t, kCols));
  select_quantize_activation(activation_type(t))(xf.data(), p.x.data(), kCols);
  return cache.emplace(t, std::move(p)).first->second;
}

void run_gemv(benchmark::State& state, QuantType t, VecDotFn dot) {
  const Problem& p = problem(t);
  std::vector<float> y(kRows);
  for (auto _ : state) {
    if (dot) {
      for (int64_t r = 0; r < kRows; ++r) dot(kCols, &y[size_t(r)], p.w.data() + size_t(r) * p.row_bytes, p.x.data());
    } else {
      gemv_rows(t, p.w.data(), p.row_bytes, kRows, kCols, p.x.data(), y.data());
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(p.w.size()));
  state.counters["weight_MB"] = double(p.w.size()) / 1e6;
}

// Same GEMV, each iteration on the next of enough copies of W to exceed the last-level cache.
// cols < kCols: the same bytes as rows of that length (as gemv_l2). threads > 1: the rows split
// over a pool in contiguous parts, as decode splits them.
void run_gemv_dram(benchmark::State& state, QuantType t, int64_t cols, int threads) {
  const Problem& p = problem(t);
  const size_t copies = (size_t(512) << 20) / p.w.size() + 1;
  std::vector<uint8_t> big(p.w.size() * copies);
  for (size_t c = 0; c < copies; ++c) std::memcpy(big.data() + c * p.w.size(), p.w.data(), p.w.size());
  const size_t row_bytes = size_t(*brisk::quant_row_bytes(t, uint64_t(cols)));
  const int64_t rows = int64_t(p.w.size() / row_bytes);
  std::vector<float> y(static_cast<size_t>(rows));
  brisk::ThreadPool pool(threads);
  size_t c = 0;
  for (auto _ : state) {
    const uint8_t* w = big.data() + c * p.w.size();
    pool.run([&](int ith, int nth) {
      const int64_t per = (rows + nth - 1) / nth, r0 = std::min(rows, per * ith), r1 = std::min(rows, r0 + per);
      if (r0 < r1) gemv_rows(t, w + size_t(r0) * row_bytes, row_bytes, r1 - r0, cols, p.x.data(), y.data() + r0);
    });
    c = (c + 1) % copies;
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * rows * int64_t(row_bytes));
}

// The first rows of W (about 512 KB, so they stay in L2) swept repeatedly: the kernel's compute
// rate with no memory stalls, to compare with the per-core share of DRAM bandwidth.
// cols < kCols: the same bytes read as shorter rows (real models have rows of 896-2048 elements,
// where the per-row work of a kernel weighs more).
void run_gemv_l2(benchmark::State& state, QuantType t, int64_t cols) {
  const Problem& p = problem(t);
  const size_t row_bytes = size_t(*brisk::quant_row_bytes(t, uint64_t(cols)));
  const int64_t rows = std::max<int64_t>(1, int64_t((size_t(512) << 10) / row_bytes));
  std::vector<float> y(static_cast<size_t>(rows));
  for (auto _ : state) {
    gemv_rows(t, p.w.data(), row_bytes, rows, cols, p.x.data(), y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * rows * int64_t(row_bytes));
}

// As gemv_l2 for several tokens at once (gemv_rows_multi; bytes are the weights read once).
void run_gemv_l2_tokens(benchmark::State& state, QuantType t, int n_tokens, int64_t cols) {
  const Problem& p = problem(t);
  const size_t row_bytes = size_t(*brisk::quant_row_bytes(t, uint64_t(cols)));
  const int64_t rows = std::max<int64_t>(1, int64_t((size_t(512) << 10) / row_bytes));
  const size_t xb = brisk::kernels::activation_row_bytes(t, cols);
  std::vector<uint8_t> x(xb * size_t(n_tokens));
  for (int i = 0; i < n_tokens; ++i) std::copy(p.x.begin(), p.x.begin() + std::ptrdiff_t(xb), x.begin() + std::ptrdiff_t(xb * size_t(i)));
  std::vector<float> y(static_cast<size_t>(rows * n_tokens));
  for (auto _ : state) {
    brisk::kernels::gemv_rows_multi({.weight_type = t, .w = p.w.data(), .row_bytes = row_bytes, .n_rows = rows,
                                     .k = cols, .x_quant = x.data(), .x_stride = xb, .n_tokens = n_tokens,
                                     .y = y.data(), .y_stride = rows});
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * rows * int64_t(row_bytes));
}

const QuantType kAll[] = {
    QuantType::F32,   QuantType::F16,    QuantType::BF16,   QuantType::Q8_0,   QuantType::Q4_0,
    QuantType::Q4_1,  QuantType::Q5_0,   QuantType::Q5_1,   QuantType::IQ4_NL, QuantType::MXFP4,
    QuantType::Q2_K,  QuantType::Q3_K,   QuantType::Q4_K,   QuantType::Q5_K,   QuantType::Q6_K,
    QuantType::IQ4_XS, QuantType::IQ2_XXS, QuantType::IQ2_XS, QuantType::IQ2_S, QuantType::IQ3_XXS,
    QuantType::IQ3_S, QuantType::IQ1_S,  QuantType::IQ1_M,  QuantType::TQ1_0,  QuantType::TQ2_0};

int register_all() {
  for (QuantType t : {QuantType::F16, QuantType::BF16, QuantType::Q8_0, QuantType::Q4_0, QuantType::Q5_0, QuantType::Q4_K,
                      QuantType::Q5_K, QuantType::Q6_K, QuantType::IQ4_XS, QuantType::Q4_0_R16, QuantType::Q5_0_R16,
                      QuantType::Q8_0_R16}) {
    benchmark::RegisterBenchmark(
        (std::string("gemv_dram_4096x4096/") + std::string(brisk::quant_type_info(t).name)).c_str(),
        run_gemv_dram, t, kCols, 1)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(
        (std::string("gemv_dram_2t/") + std::string(brisk::quant_type_info(t).name) + "/cols:4096").c_str(),
        run_gemv_dram, t, kCols, 2)
        ->Unit(benchmark::kMillisecond)->UseRealTime();
    if (brisk::quant_row_bytes(t, 896)) {  // not the 256-element K-quant blocks
      benchmark::RegisterBenchmark(
          (std::string("gemv_dram_2t/") + std::string(brisk::quant_type_info(t).name) + "/cols:896").c_str(),
          run_gemv_dram, t, int64_t(896), 2)
          ->Unit(benchmark::kMillisecond)->UseRealTime();
      benchmark::RegisterBenchmark((std::string("gemv_dram/") + std::string(brisk::quant_type_info(t).name) + "/cols:896").c_str(),
                                   run_gemv_dram, t, int64_t(896), 1)
          ->Unit(benchmark::kMillisecond);
    }
    for (int64_t cols : {kCols, int64_t(4864), int64_t(1024), int64_t(896)}) {
      if (!brisk::quant_row_bytes(t, uint64_t(cols))) continue;  // K-quant blocks are 256 elements
      benchmark::RegisterBenchmark((std::string("gemv_l2/") + std::string(brisk::quant_type_info(t).name) + "/cols:" +
                                    std::to_string(cols)).c_str(),
                                   run_gemv_l2, t, cols)
          ->Unit(benchmark::kMicrosecond);
    }
  }
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_K, QuantType::Q5_K, QuantType::Q6_K})
    for (int n_tokens : {2, 4, 8})
      benchmark::RegisterBenchmark((std::string("gemv_l2_tokens/") + std::string(brisk::quant_type_info(t).name) +
                                    "/tokens:" + std::to_string(n_tokens)).c_str(),
                                   run_gemv_l2_tokens, t, n_tokens, kCols)
          ->Unit(benchmark::kMicrosecond);
  // The speculative verify step's shapes: Qwen2.5-0.5B's rows of 896 and 4864, 1..8 tokens.
  for (int64_t cols : {int64_t(896), int64_t(4864)})
    for (int n_tokens = 1; n_tokens <= 8; ++n_tokens)
      benchmark::RegisterBenchmark(("gemv_l2_tokens/Q8_0_R16/cols:" + std::to_string(cols) + "/tokens:" +
                                    std::to_string(n_tokens)).c_str(),
                                   run_gemv_l2_tokens, QuantType::Q8_0_R16, n_tokens, cols)
          ->Unit(benchmark::kMicrosecond);
  for (QuantType t : kAll) {
    const std::string name = std::string("gemv_4096x4096/") + std::string(brisk::quant_type_info(t).name);
    benchmark::RegisterBenchmark((name + "/best").c_str(), run_gemv, t, VecDotFn{nullptr})->Unit(benchmark::kMillisecond);
    if (!vec_dot_variant(t, Isa::avx2)) continue;
    for (Isa isa : {Isa::avx512, Isa::avx2_vnni, Isa::avx2, Isa::scalar})
      if (VecDotFn fn = vec_dot_variant(t, isa))
        benchmark::RegisterBenchmark((name + "/" + isa_name(isa)).c_str(), run_gemv, t, fn)
            ->Unit(benchmark::kMillisecond);
  }
  return 0;
}

const int registered = register_all();

}  // namespace
