// Paged KV pools for kernel tests: a block table [n_seq, per_seq] in one of three layouts and
// host pools [n_seq * per_seq, block_size, width] behind a KvView pair.
//   contiguous  sequence s's block b is s * per_seq + b
//   scrambled   a fixed permutation of the pool: each sequence's blocks out of order and apart
//   shared      scrambled, and sequence 1's first n_shared blocks are sequence 0's
#pragma once
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "quant/types.h"

namespace brisk::testing {

enum class KvLayout { contiguous, scrambled, shared };

inline std::vector<int32_t> test_kv_table(int64_t n_seq, int64_t per_seq, KvLayout layout, int64_t n_shared = 0) {
  std::vector<int32_t> ids(size_t(n_seq * per_seq));
  std::iota(ids.begin(), ids.end(), 0);
  if (layout != KvLayout::contiguous) {
    std::mt19937 rng(12345);
    std::shuffle(ids.begin(), ids.end(), rng);
  }
  if (layout == KvLayout::shared && n_seq > 1)
    for (int64_t b = 0; b < std::min(n_shared, per_seq); ++b) ids[size_t(per_seq + b)] = ids[size_t(b)];
  return ids;
}

struct HostKv {
  std::vector<int32_t> table;   // [n_seq, per_seq]
  std::vector<uint8_t> k, v;    // [n_seq * per_seq, block_size, width] each
  KvView kc, vc;
  HostKv() = default;
  HostKv(const HostKv&) = delete;
  HostKv& operator=(const HostKv&) = delete;
  HostKv(HostKv&&) = default;
};

// Pools for n_seq sequences of cap positions in blocks of block_size (zero-filled); tiled_k:
// the K view tiled (KvView::tiled, F16 only).
inline HostKv make_host_kv(QuantType type, int64_t width, int64_t cap, int64_t n_seq, int32_t block_size,
                           KvLayout layout, int64_t n_shared = 0, bool tiled_k = false) {
  HostKv h;
  const int64_t per_seq = (cap + block_size - 1) / block_size;
  h.table = test_kv_table(n_seq, per_seq, layout, n_shared);
  const size_t rb = size_t(quant_row_bytes(type, uint64_t(width)).value());
  h.k.assign(rb * size_t(n_seq * per_seq * block_size), 0);
  h.v.assign(h.k.size(), 0);
  h.kc = KvView{.type = type, .data = h.k.data(), .width = width, .row_bytes = rb, .capacity = cap, .n_seq = n_seq,
                .block_size = block_size, .n_blocks = n_seq * per_seq, .table = h.table.data(),
                .device_table = h.table.data(), .table_stride = per_seq};
  h.vc = h.kc;
  h.vc.data = h.v.data();
  h.kc.tiled = tiled_k && type == QuantType::F16;
  return h;
}

}  // namespace brisk::testing
