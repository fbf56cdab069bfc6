#include "runtime/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "core/checked_math.h"
#include "core/error.h"

namespace brisk {

std::optional<QuantType> kv_cache_type_from_name(std::string_view name) {
  if (name == "f16") return QuantType::F16;
  if (name == "bf16") return QuantType::BF16;
  if (name == "f32") return QuantType::F32;
  if (name == "q8_0") return QuantType::Q8_0;
  return std::nullopt;
}

namespace {

// The options resolved into layers, their owners and groups.
struct CacheLayout {
  std::vector<KvLayerSpec> layers;  // [n_layer]
  std::vector<int32_t> owner;       // [n_layer]
  std::vector<int32_t> group_of;    // [n_layer]
  std::vector<int32_t> windows;     // [n_groups]
  std::vector<int32_t> seq_blocks;  // [n_groups]
  std::vector<size_t> row_bytes;    // [n_layer] of the owner's rows
  int32_t max_blocks = 0;
};

// First position a token at position n attends to with this window.
int32_t window_start(int32_t n, int32_t window) { return window > 0 && n - window + 1 > 0 ? n - window + 1 : 0; }

CacheLayout kv_layout(const KvCacheOptions& opt) {
  BRISK_CHECK(opt.type == QuantType::F16 || opt.type == QuantType::BF16 || opt.type == QuantType::F32 ||
                  opt.type == QuantType::Q8_0,
              "KV cache type must be f16, bf16, f32 or q8_0, got ", quant_type_info(opt.type).name);
  BRISK_CHECK(opt.n_seq > 0 && opt.n_ctx > 0, "KV cache: sequences and context must be positive");
  BRISK_CHECK(opt.block_size >= 16 && opt.block_size <= (1 << 16) && (opt.block_size & (opt.block_size - 1)) == 0,
              "KV cache: block size ", opt.block_size, " is not a power of two in [16, 65536]");
  CacheLayout L;
  if (opt.layers.empty()) {
    BRISK_CHECK(opt.n_layer > 0 && opt.width > 0, "KV cache: layers and width must be positive");
    L.layers.assign(size_t(opt.n_layer), KvLayerSpec{.width = opt.width, .tiled_k = opt.tiled_k});
  } else {
    BRISK_CHECK(opt.n_layer == 0 || opt.n_layer == int32_t(opt.layers.size()), "KV cache: ", opt.layers.size(),
                " layer specs for ", opt.n_layer, " layers");
    L.layers = opt.layers;
  }
  const int32_t n_layer = int32_t(L.layers.size());
  BRISK_CHECK(n_layer > 0 && n_layer <= 65536, "KV cache: ", n_layer, " layers out of range");
  L.owner.resize(size_t(n_layer));
  L.row_bytes.resize(size_t(n_layer));
  // Owners and the window each owner's cache must keep: the widest window of the layers that
  // read it (0, the whole context, when any of them attends to everything).
  std::map<int32_t, int32_t> keep;  // owner -> window
  for (int32_t il = 0; il < n_layer; ++il) {
    const KvLayerSpec& s = L.layers[size_t(il)];
    BRISK_CHECK(s.window >= 0, "KV cache: layer ", il, " has a negative window");
    L.owner[size_t(il)] = il;
    if (!s.kv) {
      BRISK_CHECK(s.source < 0, "KV cache: layer ", il, " has no cache but reads layer ", s.source, "'s");
      continue;
    }
    int32_t o = il;
    if (s.source >= 0) {
      BRISK_CHECK(s.source < il && L.layers[size_t(s.source)].kv, "KV cache: layer ", il,
                  " reads the cache of layer ", s.source, ", which is not an earlier layer with a cache");
      o = L.owner[size_t(s.source)];
    }
    L.owner[size_t(il)] = o;
    const int32_t w = s.window;
    if (o == il) {
      BRISK_CHECK(s.width > 0, "KV cache: layer ", il, " has width ", s.width);
      BRISK_CHECK(!s.tiled_k || opt.type == QuantType::F16, "KV cache: tiled K needs f16, got ",
                  quant_type_info(opt.type).name);
      const auto rb = quant_row_bytes(opt.type, uint64_t(s.width));
      BRISK_CHECK(rb.has_value(), "KV cache: ", quant_type_info(opt.type).name, " needs a width that is a "
                  "multiple of its block size, got ", s.width, " (layer ", il, ")");
      keep[il] = w;
    } else {
      BRISK_CHECK(s.width == 0 || s.width == L.layers[size_t(o)].width, "KV cache: layer ", il, " has width ",
                  s.width, " but reads layer ", o, " of width ", L.layers[size_t(o)].width);
      int32_t& k = keep[o];
      k = (k == 0 || w == 0) ? 0 : std::max(k, w);
    }
  }
  for (int32_t il = 0; il < n_layer; ++il)
    if (L.layers[size_t(il)].kv)
      L.row_bytes[size_t(il)] = size_t(*quant_row_bytes(opt.type, uint64_t(L.layers[size_t(L.owner[size_t(il)])].width)));
  L.max_blocks = (opt.n_ctx + opt.block_size - 1) / opt.block_size;
  const int32_t step = opt.max_step > 0 ? std::min(opt.max_step, opt.n_ctx) : opt.n_ctx;
  std::map<int32_t, int32_t> group_of_window;
  L.group_of.assign(size_t(n_layer), -1);
  for (const auto& [o, w0] : keep) {
    const int32_t w = w0 >= opt.n_ctx ? 0 : w0;  // a window as long as the context keeps everything
    auto it = group_of_window.find(w);
    if (it == group_of_window.end()) {
      it = group_of_window.emplace(w, int32_t(L.windows.size())).first;
      L.windows.push_back(w);
      // Live blocks of a windowed sequence: [window_start(len) / bs, (len + step - 1) / bs].
      const int64_t live = w == 0 ? L.max_blocks : (int64_t(w) + step - 2) / opt.block_size + 2;
      L.seq_blocks.push_back(int32_t(std::min<int64_t>(live, L.max_blocks)));
    }
    L.group_of[size_t(o)] = it->second;
  }
  for (int32_t il = 0; il < n_layer; ++il) L.group_of[size_t(il)] = L.group_of[size_t(L.owner[size_t(il)])];
  BRISK_CHECK(!L.windows.empty(), "KV cache: no layer keeps keys and values");
  for (int32_t seq_blocks : L.seq_blocks)
    BRISK_CHECK(int64_t(seq_blocks) * int64_t(opt.n_seq) < int64_t(INT32_MAX), "KV cache size overflows");
  return L;
}

}  // namespace

uint64_t KvCache::plan_bytes(const KvCacheOptions& opt) {
  const CacheLayout L = kv_layout(opt);
  uint64_t total = 0;
  for (size_t g = 0; g < L.windows.size(); ++g) {
    uint64_t per_block = 0;  // K and V of every owner in the group
    for (size_t il = 0; il < L.layers.size(); ++il)
      if (L.owner[il] == int32_t(il) && L.group_of[il] == int32_t(g)) per_block += 2 * L.row_bytes[il];
    const uint64_t blocks = uint64_t(L.seq_blocks[g]) * uint64_t(opt.n_seq);
    const auto bytes = checked_mul<uint64_t>(blocks, per_block * uint64_t(opt.block_size));
    BRISK_CHECK(bytes.has_value(), "KV cache size overflows");
    total += *bytes + sizeof(int32_t) * uint64_t(opt.n_seq) * uint64_t(L.max_blocks);
  }
  return total;
}

std::string KvCache::plan_summary(const KvCacheOptions& opt) {
  const CacheLayout L = kv_layout(opt);
  std::string s;
  for (size_t g = 0; g < L.windows.size(); ++g) {
    int32_t n = 0;
    for (size_t il = 0; il < L.layers.size(); ++il) n += L.owner[il] == int32_t(il) && L.group_of[il] == int32_t(g);
    if (!s.empty()) s += ", ";
    s += str_cat(n, n == 1 ? " layer " : " layers ");
    s += L.windows[g] == 0 ? str_cat("of ", L.seq_blocks[g], " blocks")
                           : str_cat("of a ", L.windows[g], "-position window (", L.seq_blocks[g], " blocks)");
  }
  int32_t shared = 0;
  for (size_t il = 0; il < L.layers.size(); ++il) shared += L.owner[il] != int32_t(il);
  if (shared) s += str_cat(", ", shared, shared == 1 ? " layer reading another's" : " layers reading another's");
  return s + str_cat(" per sequence, blocks of ", opt.block_size);
}

KvCache::KvCache(Backend& backend, const KvCacheOptions& opt) : backend_(backend), opt_(opt) {
  CacheLayout L = kv_layout(opt);
  layers_ = std::move(L.layers);
  owner_ = std::move(L.owner);
  group_of_ = std::move(L.group_of);
  row_bytes_ = std::move(L.row_bytes);
  max_blocks_ = L.max_blocks;
  opt_.n_layer = int32_t(layers_.size());
  len_.assign(size_t(opt.n_seq), 0);
  capacity_ = std::min(opt.n_ctx, std::max(1, opt.initial_capacity));
  size_t free_b = 0, total_b = 0;
  device_ = backend_.memory_info(&free_b, &total_b);
  k_pool_.assign(layers_.size(), nullptr);
  v_pool_.assign(layers_.size(), nullptr);
  groups_.resize(L.windows.size());
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    Group& g = groups_[gi];
    g.window = L.windows[gi];
    g.seq_blocks = L.seq_blocks[gi];
    for (size_t il = 0; il < layers_.size(); ++il)
      if (owner_[il] == int32_t(il) && group_of_[il] == int32_t(gi)) g.layers.push_back(int32_t(il));
    g.table.assign(size_t(opt.n_seq) * size_t(max_blocks_), -1);
    g.first.assign(size_t(opt.n_seq), 0);
    if (device_) g.device_table = static_cast<int32_t*>(backend_.alloc(sizeof(int32_t) * g.table.size()));
    const int32_t per_seq =
        device_ ? g.seq_blocks : std::min(g.seq_blocks, (capacity_ + opt.block_size - 1) / opt.block_size);
    grow_pool(g, per_seq * opt.n_seq);
  }
}

KvCache::~KvCache() {
  for (void* p : k_pool_) backend_.free(p);
  for (void* p : v_pool_) backend_.free(p);
  for (Group& g : groups_)
    if (g.device_table) backend_.free(g.device_table);
}

int32_t KvCache::cached_layer(int32_t layer) const {
  if (layer >= 0) return layer;
  for (size_t il = 0; il < group_of_.size(); ++il)
    if (group_of_[il] >= 0) return int32_t(il);
  return 0;  // unreachable: the layout has a layer with a cache
}

int32_t KvCache::block(int32_t seq, int32_t b, int32_t layer) const {
  const Group& g = groups_[size_t(group_of_[size_t(cached_layer(layer))])];
  return g.table[size_t(seq) * size_t(max_blocks_) + size_t(b)];
}

const KvBlockAllocator& KvCache::blocks(int32_t layer) const {
  return groups_[size_t(group_of_[size_t(cached_layer(layer))])].alloc;
}

size_t KvCache::block_bytes(int32_t layer) const {
  return row_bytes_[size_t(cached_layer(layer))] * size_t(opt_.block_size);
}

void KvCache::refresh_views() {
  k_.clear();
  v_.clear();
  for (size_t il = 0; il < layers_.size(); ++il) {
    if (group_of_[il] < 0) {  // a layer without attention
      k_.push_back(KvView{});
      v_.push_back(KvView{});
      continue;
    }
    const int32_t o = owner_[il];
    const Group& g = groups_[size_t(group_of_[il])];
    const int32_t* dt = g.device_table ? g.device_table : g.table.data();
    for (auto [dst, pool] : {std::pair{&k_, k_pool_[size_t(o)]}, std::pair{&v_, v_pool_[size_t(o)]}}) {
      dst->push_back(KvView{.type = opt_.type, .data = pool, .width = layers_[size_t(o)].width,
                            .row_bytes = row_bytes_[il], .capacity = capacity_, .n_seq = opt_.n_seq,
                            .block_size = opt_.block_size, .n_blocks = g.alloc.n_blocks(),
                            .table = g.table.data(), .device_table = dt, .table_stride = max_blocks_,
                            .tiled = dst == &k_ && layers_[size_t(o)].tiled_k});
    }
  }
}

void KvCache::grow_pool(Group& g, int32_t n_blocks) {
  const size_t old_blocks = size_t(g.alloc.n_blocks());
  for (int32_t il : g.layers) {
    const size_t bb = block_bytes(il);
    for (auto* pools : {&k_pool_, &v_pool_}) {
      void*& p = (*pools)[size_t(il)];
      void* np = backend_.alloc(size_t(n_blocks) * bb);
      if (p) {
        backend_.copy(np, p, old_blocks * bb);
        backend_.free(p);
      }
      p = np;
    }
  }
  g.alloc.grow(n_blocks);
  refresh_views();
}

int32_t KvCache::new_block(Group& g) {
  int32_t b = g.alloc.alloc();
  if (b < 0) {
    const int32_t most = g.seq_blocks * opt_.n_seq;
    BRISK_CHECK(g.alloc.n_blocks() < most, "KV cache: all ", most, " blocks are in use");
    grow_pool(g, std::min(most, std::max(1, g.alloc.n_blocks() * 2)));
    b = g.alloc.alloc();
  }
  return b;
}

void KvCache::copy_rows(const Group& g, int32_t dst, int32_t src, int32_t n) {
  if (n <= 0) return;
  // Whole tiles (a tiled view keeps 16 positions in the bytes of 16 rows); the rows past n are
  // rewritten before they are read.
  n = std::min(opt_.block_size, (n + KvView::kKvTile - 1) / KvView::kKvTile * KvView::kKvTile);
  for (int32_t il : g.layers) {
    const size_t bb = block_bytes(il);
    for (void* p : {k_pool_[size_t(il)], v_pool_[size_t(il)]}) {
      auto* base = static_cast<uint8_t*>(p);
      backend_.copy(base + size_t(dst) * bb, base + size_t(src) * bb, size_t(n) * row_bytes_[size_t(il)]);
    }
  }
}

void KvCache::release_range(Group& g, int32_t seq, int32_t first_block, int32_t end_block) {
  for (int32_t b = std::max(0, first_block); b < std::min(end_block, max_blocks_); ++b) {
    int32_t& e = entry(g, seq, b);
    if (e < 0) continue;
    g.alloc.release(e);
    e = -1;
    g.dirty = true;
  }
}

bool KvCache::holds_window(int32_t seq, int32_t n) const {
  if (n <= 0) return true;
  for (const Group& g : groups_)
    if (g.window > 0 && window_start(n, g.window) < g.first[size_t(seq)] * opt_.block_size) return false;
  return true;
}

void KvCache::reserve(int32_t n_pos) {
  BRISK_CHECK(n_pos <= opt_.n_ctx, "KV cache: ", n_pos, " positions exceed the context size ", opt_.n_ctx);
  if (n_pos <= capacity_) return;
  int64_t cap = capacity_;
  while (cap < n_pos) cap *= 2;
  capacity_ = int32_t(std::min<int64_t>(cap, opt_.n_ctx));
  refresh_views();
}

void KvCache::prepare(const std::vector<int32_t>& new_len) {
  const int32_t bs = opt_.block_size;
  for (Group& g : groups_) {
    for (int32_t s = 0; s < opt_.n_seq; ++s) {
      const int32_t len = len_[size_t(s)], end = new_len[size_t(s)];
      if (end <= len) continue;
      if (g.window > 0) {
        // Blocks wholly before the first position the token at `len` attends to: never read again.
        const int32_t keep_from = window_start(len, g.window) / bs;
        release_range(g, s, g.first[size_t(s)], keep_from);
        g.first[size_t(s)] = std::max(g.first[size_t(s)], keep_from);
      }
      for (int32_t b = len / bs; b <= (end - 1) / bs; ++b) {
        const int32_t old = entry(g, s, b);
        if (old >= 0 && g.alloc.refs(old) == 1) continue;
        const int32_t fresh = new_block(g);  // may move the pools, never the block ids
        if (old >= 0) {                      // shared: copy the rows this sequence holds, then write
          copy_rows(g, fresh, old, len - b * bs);
          g.alloc.release(old);
        }
        entry(g, s, b) = fresh;
        g.dirty = true;
      }
    }
    if (g.dirty && device_) backend_.copy(g.device_table, g.table.data(), sizeof(int32_t) * g.table.size());
    g.dirty = false;
  }
}

int32_t KvCache::copy(int32_t src, int32_t dst, int32_t n) {
  BRISK_CHECK(n >= 0 && n <= len_[size_t(src)], "seq_copy: ", n, " positions but sequence ", src,
              " holds ", len_[size_t(src)]);
  if (src == dst) return truncate(dst, n);
  for (Group& g : groups_) {
    release_range(g, dst, 0, max_blocks_);
    g.first[size_t(dst)] = 0;
  }
  len_[size_t(dst)] = 0;
  if (!holds_window(src, n)) return 0;
  const int32_t bs = opt_.block_size;
  const int32_t full = n / bs, rest = n % bs;
  for (Group& g : groups_) {
    const int32_t from = g.window > 0 ? window_start(n, g.window) / bs : 0;
    for (int32_t b = from; b < full; ++b) {
      const int32_t e = entry(g, src, b);
      g.alloc.retain(e);
      entry(g, dst, b) = e;
    }
    if (rest > 0) {
      const int32_t fresh = new_block(g);
      copy_rows(g, fresh, entry(g, src, full), rest);
      entry(g, dst, full) = fresh;
    }
    g.first[size_t(dst)] = from;
    g.dirty = true;
  }
  len_[size_t(dst)] = n;
  return n;
}

int32_t KvCache::truncate(int32_t seq, int32_t n) {
  BRISK_CHECK(n >= 0, "seq_truncate: negative length ", n);
  n = std::min(n, len_[size_t(seq)]);
  if (n < len_[size_t(seq)] && !holds_window(seq, n)) n = 0;
  for (Group& g : groups_) {
    release_range(g, seq, (n + opt_.block_size - 1) / opt_.block_size, max_blocks_);
    if (n == 0) g.first[size_t(seq)] = 0;
  }
  len_[size_t(seq)] = n;
  return n;
}

}  // namespace brisk
