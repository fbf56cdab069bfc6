// The bandwidth probe's read loop with 512-bit loads (core/bandwidth.cpp picks it on AVX-512).
// GCC 12's AVX-512 headers trip its own uninitialized warnings (false positives).
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace brisk {

uint64_t sum_words_avx512(const uint64_t* p, size_t n) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm512_add_epi64(a0, _mm512_loadu_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_loadu_si512(p + i + 8));
    a2 = _mm512_add_epi64(a2, _mm512_loadu_si512(p + i + 16));
    a3 = _mm512_add_epi64(a3, _mm512_loadu_si512(p + i + 24));
  }
  // The lanes summed as unsigned words (wrapping): _mm512_reduce_add_epi64 adds signed ones,
  // which overflow (undefined behaviour) on the probe's arbitrary contents.
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
  uint64_t s = 0;
  for (uint64_t w : lanes) s += w;
  for (; i < n; ++i) s += p[i];
  return s;
}

}  // namespace brisk
