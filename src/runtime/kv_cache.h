// Key/value cache of a Context, paged: per layer, K and V are pools of blocks
// [n_blocks, block_size, width] in F16 (default), F32, BF16 or Q8_0, in backend memory, shared
// by all sequences through a block table [n_seq, max_blocks] of block ids (-1: none) with
// reference-counted blocks (kv_blocks.h). The table lives in host memory and, on a device
// backend, in one device buffer allocated once (a stable address, so captured graphs stay
// valid) that prepare() refreshes before a forward.
//
// Layers differ (KvLayerSpec): each has its own width (head size and KV heads may differ per
// layer), a window (sliding-window layers attend to the last `window` positions only) and may
// own no cache at all, reading an earlier layer's instead (KV sharing). Layers are grouped by
// window; each group has its own allocator, table and block pools:
//   - a full group (window 0) keeps every position of a sequence;
//   - a windowed group keeps only the blocks its attention can still read: before a forward
//     that writes positions [len, end) of a sequence, the blocks wholly before position
//     len - window + 1 (the first one the token at len attends to) are released and reused for
//     new positions. The table keeps one entry per block of positions (pos / block_size), so
//     kernels address rows as before and only ever read live blocks; a sequence holds at most
//     (window + step - 2) / block_size + 2 blocks there, step being the positions one forward
//     adds to it (the context's n_batch).
//
// Growth: `capacity` (the bound on positions the kernels plan for) starts at 256 and doubles up
// to n_ctx; on the CPU each pool starts with enough blocks for that and doubles (copying) when
// blocks run out; on a device backend it is allocated whole up front (what plan_bytes counts),
// so it never moves.
//
// Prefix sharing: copy(src, dst, n) gives dst src's whole blocks (one more reference each) and
// a private copy of a partial last block; a forward that writes into a block another sequence
// also references copies it first (copy-on-write, in prepare(), before the forward).
// truncate() releases the blocks past the new length. A windowed group cannot give back
// positions it released: a copy or truncation to a length whose window reaches released blocks
// keeps nothing instead (the caller computes those positions again), never stale rows.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "backend/kv_table.h"
#include "runtime/kv_blocks.h"

namespace brisk {

// The cache element type named by a CLI / config value: "f16", "bf16", "f32" or "q8_0".
std::optional<QuantType> kv_cache_type_from_name(std::string_view name);

// What one layer needs from the cache.
struct KvLayerSpec {
  int32_t width = 0;     // n_head_kv * head_dim of its K (and V) rows
  int32_t window = 0;    // sliding window of its attention in positions; 0: the whole context
  int32_t source = -1;   // >= 0: reads that earlier layer's cache and owns none (KV sharing)
  bool tiled_k = false;  // K view tiled (KvView::tiled; F16 only)
  bool kv = true;        // false: a layer without attention (a hybrid model's linear-attention
                         // layers): no pool, empty views
};

struct KvCacheOptions {
  int32_t n_layer = 0;
  int32_t width = 0;             // n_head_kv * head_dim of every layer when `layers` is empty
  int32_t n_seq = 1;
  int32_t n_ctx = 0;             // most positions per sequence
  QuantType type = QuantType::F16;
  int32_t initial_capacity = 256;
  int32_t block_size = kKvDefaultBlockSize;  // positions per block: a power of two >= 16
  bool tiled_k = false;          // K views tiled (KvView::tiled; F16 only) when `layers` is empty
  std::vector<KvLayerSpec> layers{};  // [n_layer] per-layer needs; empty: n_layer full layers of `width`
  int32_t max_step = 0;          // most positions one prepare() adds to a sequence (sizes windowed
                                 // pools on a device); 0: n_ctx
};

class KvCache {
 public:
  KvCache(Backend& backend, const KvCacheOptions& opt);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  // Bytes of every pool at its largest (what a device backend allocates up front) and their
  // block tables; the memory plan counts this before a cache exists.
  static uint64_t plan_bytes(const KvCacheOptions& opt);
  // One line for the memory report: layers per group and what a sequence holds in each.
  static std::string plan_summary(const KvCacheOptions& opt);

  // Raises the capacity to cover positions [0, n_pos) (n_pos <= n_ctx).
  void reserve(int32_t n_pos);
  // Before a forward after which sequence s holds new_len[s] positions ([n_seq]): windowed
  // groups release the blocks the new positions no longer attend to, then blocks for the
  // positions it writes (fresh, or private copies of shared ones), a larger pool when needed,
  // and the tables on the device. Call outside any graph capture.
  void prepare(const std::vector<int32_t>& new_len);
  int32_t capacity() const { return capacity_; }
  const KvCacheOptions& options() const { return opt_; }

  // [n_layer] views; a layer that shares another's cache has that layer's views.
  const std::vector<KvView>& k() const { return k_; }
  const std::vector<KvView>& v() const { return v_; }

  int32_t length(int32_t seq) const { return len_[size_t(seq)]; }
  void set_length(int32_t seq, int32_t n) { len_[size_t(seq)] = n; }
  // dst's first n positions := src's (every layer), sharing src's whole blocks. Returns dst's
  // new length: n, or 0 when a windowed group of src no longer holds the window before n.
  int32_t copy(int32_t src, int32_t dst, int32_t n);
  // Keeps the first n positions of seq (at most its length) and releases the blocks past them.
  // Returns the new length: that, or 0 when a windowed group no longer holds its window.
  int32_t truncate(int32_t seq, int32_t n);

  int32_t block_size() const { return opt_.block_size; }
  int32_t max_blocks() const { return max_blocks_; }  // table entries per sequence: ceil(n_ctx / block_size)
  // Block b of seq in the group whose cache `layer` reads (-1: none); layer -1: the first layer
  // with a cache.
  int32_t block(int32_t seq, int32_t b, int32_t layer = -1) const;
  const KvBlockAllocator& blocks(int32_t layer = -1) const;
  // One layer's K (or V) block in bytes.
  size_t block_bytes(int32_t layer = -1) const;
  // Whether `layer` reads another layer's cache.
  bool shares(int32_t layer) const { return owner_[size_t(layer)] != layer; }
  // Whether `layer` keeps (or reads) keys and values.
  bool has_kv(int32_t layer) const { return group_of_[size_t(layer)] >= 0; }

 private:
  struct Group {
    int32_t window = 0;            // 0: keeps every position
    int32_t seq_blocks = 0;        // most blocks one sequence holds at once
    std::vector<int32_t> layers;   // the layers owning pools in this group
    KvBlockAllocator alloc;
    std::vector<int32_t> table;    // [n_seq, max_blocks]
    int32_t* device_table = nullptr;  // [n_seq, max_blocks] on a device backend
    bool dirty = true;
    std::vector<int32_t> first;    // [n_seq] first block index still held (windowed groups)
  };
  int32_t& entry(Group& g, int32_t seq, int32_t b) { return g.table[size_t(seq) * size_t(max_blocks_) + size_t(b)]; }
  int32_t new_block(Group& g);
  void grow_pool(Group& g, int32_t n_blocks);
  // Rows [0, n) of block src into block dst, K and V of every layer of the group.
  void copy_rows(const Group& g, int32_t dst, int32_t src, int32_t n);
  void release_range(Group& g, int32_t seq, int32_t first_block, int32_t end_block);
  // Whether every windowed group of seq still holds the positions a token at n attends to.
  bool holds_window(int32_t seq, int32_t n) const;
  void refresh_views();
  int32_t cached_layer(int32_t layer) const;  // layer, or for -1 the first layer with a cache

  Backend& backend_;
  KvCacheOptions opt_;
  std::vector<KvLayerSpec> layers_;   // [n_layer] resolved (source chains followed)
  std::vector<int32_t> owner_;        // [n_layer] the layer whose pools it reads (itself or its source)
  std::vector<int32_t> group_of_;     // [n_layer] group of the cache it reads
  std::vector<size_t> row_bytes_;     // [n_layer] bytes per position of the cache it reads
  std::vector<Group> groups_;
  int32_t capacity_ = 0;
  int32_t max_blocks_ = 0;
  bool device_ = false;               // the backend's memory is not host memory
  std::vector<void*> k_pool_, v_pool_;  // [n_layer]; nullptr for layers that own no cache
  std::vector<KvView> k_, v_;         // [n_layer]
  std::vector<int32_t> len_;          // [n_seq]
};

}  // namespace brisk
