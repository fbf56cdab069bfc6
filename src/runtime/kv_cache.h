// Key/value cache of a Context, paged: per layer, K and V are pools of blocks
// [n_blocks, block_size, n_head_kv * head_dim] in F16 (default), F32 or Q8_0, in backend memory,
// shared by all sequences through one block table [n_seq, max_blocks] of block ids (-1: none)
// with reference-counted blocks (kv_blocks.h). The table lives in host memory and, on a device
// backend, in one device buffer allocated once (a stable address, so captured graphs stay
// valid) that prepare() refreshes before a forward.
//
// Growth: `capacity` (the bound on positions the kernels plan for) starts at 256 and doubles up
// to n_ctx as today; on the CPU the pool starts with enough blocks for that and doubles
// (copying) when blocks run out; on a device backend it is allocated whole up front (n_seq *
// ceil(n_ctx / block_size) blocks: what the device memory plan counts), so it never moves.
// A pool of that size always suffices: a sequence references at most max_blocks blocks.
//
// Prefix sharing: copy(src, dst, n) gives dst src's whole blocks (one more reference each) and
// a private copy of a partial last block; a forward that writes into a block another sequence
// also references copies it first (copy-on-write, in prepare(), before the forward).
// truncate() releases the blocks past the new length.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "backend/kv_table.h"
#include "runtime/kv_blocks.h"

namespace brisk {

// The cache element type named by a CLI / config value: "f16", "bf16", "f32" or "q8_0".
std::optional<QuantType> kv_cache_type_from_name(std::string_view name);

struct KvCacheOptions {
  int32_t n_layer = 0;
  int32_t width = 0;             // n_head_kv * head_dim
  int32_t n_seq = 1;
  int32_t n_ctx = 0;             // most positions per sequence
  QuantType type = QuantType::F16;
  int32_t initial_capacity = 256;
  int32_t block_size = kKvDefaultBlockSize;  // positions per block: a power of two >= 16
  bool tiled_k = false;          // K views tiled (KvView::tiled; F16 only)
  // [n_layer] whether a layer keeps keys and values (a hybrid model's linear-attention layers
  // do not: their views stay empty and no pool is allocated for them); empty: every layer.
  std::vector<bool> layer_has_kv = {};
};

class KvCache {
 public:
  KvCache(Backend& backend, const KvCacheOptions& opt);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  // Raises the capacity to cover positions [0, n_pos) (n_pos <= n_ctx).
  void reserve(int32_t n_pos);
  // Before a forward after which sequence s holds new_len[s] positions ([n_seq]): blocks for
  // the positions it writes (fresh, or private copies of shared ones), a larger pool when
  // needed, and the table on the device. Call outside any graph capture.
  void prepare(const std::vector<int32_t>& new_len);
  int32_t capacity() const { return capacity_; }
  const KvCacheOptions& options() const { return opt_; }

  const std::vector<KvView>& k() const { return k_; }
  const std::vector<KvView>& v() const { return v_; }

  int32_t length(int32_t seq) const { return len_[size_t(seq)]; }
  void set_length(int32_t seq, int32_t n) { len_[size_t(seq)] = n; }
  // dst's first n positions := src's (every layer), sharing src's whole blocks; dst's length
  // becomes n.
  void copy(int32_t src, int32_t dst, int32_t n);
  // Keeps the first n positions of seq (n <= its length) and releases the blocks past them.
  void truncate(int32_t seq, int32_t n);

  int32_t block_size() const { return opt_.block_size; }
  int32_t max_blocks() const { return max_blocks_; }  // per sequence: ceil(n_ctx / block_size)
  int32_t block(int32_t seq, int32_t b) const { return table_[size_t(seq) * size_t(max_blocks_) + size_t(b)]; }
  const KvBlockAllocator& blocks() const { return alloc_; }
  size_t block_bytes() const { return row_bytes_ * size_t(opt_.block_size); }  // one layer's K (or V) block
  bool has_kv(int32_t layer) const { return opt_.layer_has_kv.empty() || opt_.layer_has_kv[size_t(layer)]; }

 private:
  int32_t& entry(int32_t seq, int32_t b) { return table_[size_t(seq) * size_t(max_blocks_) + size_t(b)]; }
  int32_t new_block();
  void grow_pool(int32_t n_blocks);
  // Rows [0, n) of block src into block dst, every layer's K and V.
  void copy_rows(int32_t dst, int32_t src, int32_t n);
  void release_from(int32_t seq, int32_t first_block);
  void refresh_views();
  Backend& backend_;
  KvCacheOptions opt_;
  size_t row_bytes_ = 0;
  int32_t capacity_ = 0;
  int32_t max_blocks_ = 0;
  bool device_ = false;               // the backend's memory is not host memory
  std::vector<void*> k_pool_, v_pool_;  // [n_layer]
  KvBlockAllocator alloc_;
  std::vector<int32_t> table_;        // [n_seq, max_blocks]
  int32_t* device_table_ = nullptr;   // [n_seq, max_blocks] on a device backend
  bool table_dirty_ = true;
  std::vector<KvView> k_, v_;   // [n_layer]
  std::vector<int32_t> len_;    // [n_seq]
};

}  // namespace brisk
