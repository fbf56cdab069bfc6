// Decode attention microbenchmark: one query token over a KV cache of `positions` F16 rows
// (Qwen2.5-0.5B heads: 14 query heads, 2 KV heads, head_dim 64), through the CPU backend's
// attention op (AVX-512 kernel where available) with 1 and 2 threads. Reports the KV bytes
// read per second. attention_decode has its K/V in cache; attention_decode_dram cycles through
// copies of them totalling 400 MiB on huge pages (more than the last-level cache), as a decode
// step finds them after streaming the weights. The third argument lays the cache's 256-position
// blocks out in order (0) or in reverse (1: every block boundary a jump, as a paged cache
// shared by many sequences holds them). The fifth tiles the K cache (KvView::tiled).
//   build/release/bench/brisk_microbench --benchmark_filter=attention
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/kv_table.h"
#include "core/fp16.h"
#include "core/cpu_features.h"
#include "core/large_alloc.h"
#include "kernels/cpu/ops.h"

namespace {

void run_attention(benchmark::State& st, bool dram, bool part_only) {
  const int64_t positions = st.range(0);
  const int threads = int(st.range(1));
  const bool reversed = st.range(2) != 0;
  // Fourth argument 1: one KV head with its 7 query heads (half the work, rows of one head
  // contiguous), as a cache laid out head by head would be read in each pass.
  const bool one_head = st.range(3) != 0;
  // Fifth argument 1: the K cache tiled (KvView::tiled; the data is random either way).
  const bool tiled = st.range(4) != 0;
  const int32_t n_head = one_head ? 7 : 14, n_head_kv = one_head ? 1 : 2, hd = 64;
  const int64_t width = int64_t(n_head_kv) * hd;
  std::vector<uint16_t> k(size_t(positions * width)), v(k.size());
  std::mt19937 rng(1);
  std::normal_distribution<float> g(0.f, 1.f);
  for (auto& x : k) x = brisk::f32_to_fp16(g(rng));
  for (auto& x : v) x = brisk::f32_to_fp16(g(rng));
  std::vector<float> q(size_t(n_head * hd)), out(q.size());
  for (auto& x : q) x = g(rng);
  auto be = brisk::make_cpu_backend(threads);
  // The positions as blocks of a paged cache, in order or reversed.
  const int64_t per_seq = (positions + brisk::kKvDefaultBlockSize - 1) / brisk::kKvDefaultBlockSize;
  std::vector<int32_t> table = brisk::kv_block_table(1, per_seq);
  if (reversed) std::reverse(table.begin(), table.end());
  const brisk::KvView kc{.type = brisk::QuantType::F16, .data = k.data(), .width = width,
                         .row_bytes = size_t(width) * 2, .capacity = positions, .n_seq = 1,
                         .block_size = brisk::kKvDefaultBlockSize, .n_blocks = per_seq, .table = table.data(),
                         .device_table = table.data(), .table_stride = per_seq};
  brisk::KvView vc = kc;
  vc.data = v.data();
  brisk::KvView kt = kc;
  kt.tiled = tiled;
  const int32_t seq = 0, pos = int32_t(positions - 1);
  const brisk::AttentionArgs a{.out = {.data = out.data(), .rows = 1, .cols = n_head * hd},
                               .q = {.data = q.data(), .rows = 1, .cols = n_head * hd},
                               .k_cache = kt, .v_cache = vc, .seq = &seq, .pos = &pos,
                               .n_head = n_head, .n_head_kv = n_head_kv, .head_dim = hd,
                               .scale = 1.0f / std::sqrt(float(hd))};
  const size_t kv_bytes = k.size() * sizeof(uint16_t);
  const size_t copies = dram ? (size_t(400) << 20) / (2 * kv_bytes) + 1 : 0;
  auto* pool = static_cast<uint8_t*>(dram ? brisk::large_alloc(2 * kv_bytes * copies) : nullptr);
  for (size_t c = 0; c < copies; ++c) {
    std::memcpy(pool + 2 * kv_bytes * c, k.data(), kv_bytes);
    std::memcpy(pool + 2 * kv_bytes * c + kv_bytes, v.data(), kv_bytes);
  }
  if (part_only && !(brisk::cpu_features().avx512 && brisk::cpu::attention_avx512_supports(hd, n_head / n_head_kv))) {
    st.SkipWithError("no AVX-512 attention kernel");
    return;
  }
  std::vector<float> scratch(part_only ? size_t(brisk::cpu::attention_avx512_scratch_floats(n_head / n_head_kv, hd)) : 0);
  std::vector<float> partials(part_only ? size_t(2 * brisk::cpu::attention_split_partial_floats(a)) : 0);
  size_t c = 0;
  for (auto _ : st) {
    brisk::AttentionArgs ac = a;
    if (dram) {
      ac.k_cache.data = pool + 2 * kv_bytes * c;
      ac.v_cache.data = pool + 2 * kv_bytes * c + kv_bytes;
      c = (c + 1) % copies;
    }
    if (part_only) {
      // One thread's share of a two-thread split decode (CPU time of one core, free of the
      // other thread's scheduling).
      brisk::cpu::attention_split_avx512(ac, scratch.data(), partials.data(), 0, 2);
      benchmark::DoNotOptimize(partials.data());
    } else {
      be->attention(ac);
    }
    benchmark::DoNotOptimize(out.data());
  }
  if (pool) brisk::large_free(pool);
  st.SetBytesProcessed(int64_t(st.iterations()) * positions * width * 2 * 2);
}

BENCHMARK_CAPTURE(run_attention, cache, false, false)->Name("attention_decode")->Args({256, 1, 0, 0, 0})->Args({1024, 1, 0, 0, 0})
    ->Args({4096, 1, 0, 0, 0})->Args({4096, 2, 0, 0, 0})->Args({4096, 2, 1, 0, 0})->Args({512, 2, 0, 0, 0})->Args({4096, 2, 0, 0, 1})->Args({4096, 1, 0, 0, 1})->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(run_attention, dram, true, false)->Name("attention_decode_dram")->Args({4096, 2, 0, 0, 0})->Args({4096, 2, 1, 0, 0})->Args({4096, 2, 0, 1, 0})->Args({4096, 2, 0, 0, 1})
    ->Unit(benchmark::kMicrosecond);
// The first of the two threads' parts of the split decode, on this thread alone.
BENCHMARK_CAPTURE(run_attention, part, false, true)->Name("attention_split_part")->Args({4096, 1, 0, 0, 0})->Args({4096, 1, 0, 1, 0})->Args({4096, 1, 0, 0, 1})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(run_attention, part_dram, true, true)->Name("attention_split_part_dram")->Args({4096, 1, 0, 0, 0})->Args({4096, 1, 0, 1, 0})->Args({4096, 1, 0, 0, 1})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
