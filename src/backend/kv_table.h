// Block tables for callers that own flat KV pools themselves (tests, benchmarks) rather than a
// runtime KvCache, and the default block size. Sequence s's block b is s * blocks_per_seq + b
// (the pool then reads as contiguous [n_seq, capacity] storage), or, interleaved,
// b * n_seq + s (every sequence's blocks strided through the pool, as a long-running cache
// holds them).
#pragma once
#include <cstdint>
#include <vector>

namespace brisk {

// 256 positions: the CPU decode's 256-position chunks and the CUDA kernels' tiles (128) and
// staged chunks (64) mostly lie in one block, and a partial block copied by prefix sharing is
// small next to a prompt.
constexpr int32_t kKvDefaultBlockSize = 256;

inline std::vector<int32_t> kv_block_table(int64_t n_seq, int64_t blocks_per_seq, bool interleave = false) {
  std::vector<int32_t> t(size_t(n_seq * blocks_per_seq));
  for (int64_t s = 0; s < n_seq; ++s)
    for (int64_t b = 0; b < blocks_per_seq; ++b)
      t[size_t(s * blocks_per_seq + b)] = int32_t(interleave ? b * n_seq + s : s * blocks_per_seq + b);
  return t;
}

}  // namespace brisk
