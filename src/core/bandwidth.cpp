#include "core/bandwidth.h"

#include <emmintrin.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/large_alloc.h"
#include "core/thread_pool.h"

namespace brisk {

uint64_t sum_words_avx512(const uint64_t* p, size_t n);  // bandwidth_avx512.cpp

namespace {

// Sums 64-bit words, 64 bytes per step into four 128-bit accumulators (SSE2, the baseline ISA),
// with a software prefetch 2 KiB ahead. On AVX-512 machines sum_words_avx512 (512-bit loads,
// bandwidth_avx512.cpp) runs instead: the probe must measure the most the memory can deliver,
// and wider loads reached more here (~33 against ~30 GB/s with two threads).
uint64_t sum_words_sse2(const uint64_t* p, size_t n) {
  __m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __builtin_prefetch(p + i + 256, 0, 3);
    a0 = _mm_add_epi64(a0, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i)));
    a1 = _mm_add_epi64(a1, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 2)));
    a2 = _mm_add_epi64(a2, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 4)));
    a3 = _mm_add_epi64(a3, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 6)));
  }
  alignas(16) uint64_t lanes[2];
  _mm_store_si128(reinterpret_cast<__m128i*>(lanes), _mm_add_epi64(_mm_add_epi64(a0, a1), _mm_add_epi64(a2, a3)));
  uint64_t s = lanes[0] + lanes[1];
  for (; i < n; ++i) s += p[i];
  return s;
}

uint64_t sum_words(const uint64_t* p, size_t n) {
  static const bool wide = cpu_has_level(IsaLevel::avx512);
  return wide ? sum_words_avx512(p, n) : sum_words_sse2(p, n);
}

}  // namespace

BandwidthResult measure_read_bandwidth(const BandwidthParams& params) {
  BRISK_CHECK(params.n_threads >= 1 && params.reps >= 1 && params.buffer_bytes >= (uint64_t(1) << 20),
              "bandwidth probe: bad parameters");
  const size_t n_words = size_t(params.buffer_bytes / 8);
  struct Free {
    void operator()(uint64_t* p) const { large_free(p); }
  };
  // The same kind of memory as weights read into memory (huge pages unless BRISK_NO_HUGEPAGES).
  std::unique_ptr<uint64_t, Free> buf(static_cast<uint64_t*>(large_alloc(n_words * 8)));
  BRISK_CHECK(buf != nullptr, "bandwidth probe: cannot allocate ", params.buffer_bytes, " bytes");
  ThreadPool pool(params.n_threads);
  const int nth = pool.size();
  std::vector<uint64_t> sink(size_t(nth) * 8, 0);  // one cache line per thread
  auto part = [&](int ith, size_t& b, size_t& e) {
    const size_t chunk = (n_words + size_t(nth) - 1) / size_t(nth);
    b = std::min(n_words, chunk * size_t(ith));
    e = std::min(n_words, b + chunk);
  };
  // Touch every page once so that the timed passes read resident memory.
  pool.run([&](int ith, int) {
    size_t b, e;
    part(ith, b, e);
    for (size_t i = b; i < e; ++i) buf.get()[i] = i * 0x9E3779B97F4A7C15ULL;
  });
  BandwidthResult r{.n_threads = nth, .buffer_bytes = uint64_t(n_words) * 8};
  double total = 0;
  for (int rep = 0; rep < params.reps; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.run([&](int ith, int) {
      size_t b, e;
      part(ith, b, e);
      sink[size_t(ith) * 8] += sum_words(buf.get() + b, e - b);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double bps = double(r.buffer_bytes) / s;
    total += bps;
    if (bps > r.bytes_per_s) r.bytes_per_s = bps;
  }
  r.mean_bytes_per_s = total / params.reps;
  volatile uint64_t keep = 0;
  for (uint64_t v : sink) keep = keep + v;
  (void)keep;
  return r;
}

}  // namespace brisk
