// 64 bytes of a weight stream as two 32-byte loads. On the Zen 5 host of docs/performance.md a
// 512-bit load that straddles two cache lines held a DRAM stream to about 60 % of the rate the
// same loop reaches with two 256-bit loads (a Q4_0-like loop, one thread: 20 against 33.5 GB/s;
// 256-bit loads that straddle cost nothing measurable), so weight rows whose blocks do not start
// on 64-byte boundaries (18-, 34-, 210-byte blocks; 288- and 544-byte repacked groups) are read
// this way. Include after <immintrin.h>, in an AVX-512 translation unit.
#pragma once

namespace brisk::kernels {

__attribute__((always_inline)) inline __m512i load_weights_512(const void* p) {
  const auto* b = static_cast<const unsigned char*>(p);
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b))),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 32)), 1);
}

}  // namespace brisk::kernels
