#include "runtime/kv_cache.h"

#include <algorithm>
#include <cstring>

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

KvCache::KvCache(Backend& backend, const KvCacheOptions& opt) : backend_(backend), opt_(opt) {
  BRISK_CHECK(opt.type == QuantType::F16 || opt.type == QuantType::BF16 || opt.type == QuantType::F32 ||
                  opt.type == QuantType::Q8_0,
              "KV cache type must be f16, bf16, f32 or q8_0, got ", quant_type_info(opt.type).name);
  BRISK_CHECK(opt.n_layer > 0 && opt.width > 0 && opt.n_seq > 0 && opt.n_ctx > 0,
              "KV cache: layers, width, sequences and context must be positive");
  BRISK_CHECK(opt.block_size >= 16 && opt.block_size <= (1 << 16) && (opt.block_size & (opt.block_size - 1)) == 0,
              "KV cache: block size ", opt.block_size, " is not a power of two in [16, 65536]");
  BRISK_CHECK(opt.layer_has_kv.empty() || int32_t(opt.layer_has_kv.size()) == opt.n_layer,
              "KV cache: a mask of ", opt.layer_has_kv.size(), " layers for ", opt.n_layer);
  BRISK_CHECK(!opt.tiled_k || opt.type == QuantType::F16, "KV cache: tiled K needs f16, got ",
              quant_type_info(opt.type).name);
  const auto rb = quant_row_bytes(opt.type, uint64_t(opt.width));
  BRISK_CHECK(rb.has_value(), "KV cache: ", quant_type_info(opt.type).name, " needs a width that is a "
              "multiple of its block size, got ", opt.width);
  row_bytes_ = size_t(*rb);
  max_blocks_ = (opt.n_ctx + opt.block_size - 1) / opt.block_size;
  const auto max_pool = checked_mul<uint64_t>(uint64_t(max_blocks_) * uint64_t(opt.n_seq), block_bytes());
  BRISK_CHECK(max_pool.has_value() && uint64_t(max_blocks_) * uint64_t(opt.n_seq) < uint64_t(INT32_MAX),
              "KV cache size overflows");
  len_.assign(size_t(opt.n_seq), 0);
  table_.assign(size_t(opt.n_seq) * size_t(max_blocks_), -1);
  capacity_ = std::min(opt.n_ctx, std::max(1, opt.initial_capacity));
  size_t free_b = 0, total_b = 0;
  device_ = backend_.memory_info(&free_b, &total_b);
  if (device_) device_table_ = static_cast<int32_t*>(backend_.alloc(sizeof(int32_t) * table_.size()));
  const int32_t per_seq = device_ ? max_blocks_ : (capacity_ + opt.block_size - 1) / opt.block_size;
  k_pool_.assign(size_t(opt.n_layer), nullptr);
  v_pool_.assign(size_t(opt.n_layer), nullptr);
  grow_pool(per_seq * opt.n_seq);
}

KvCache::~KvCache() {
  for (void* p : k_pool_) backend_.free(p);
  for (void* p : v_pool_) backend_.free(p);
  if (device_table_) backend_.free(device_table_);
}

void KvCache::refresh_views() {
  k_.clear();
  v_.clear();
  for (int32_t il = 0; il < opt_.n_layer; ++il) {
    if (!has_kv(il)) {
      k_.push_back(KvView{});
      v_.push_back(KvView{});
      continue;
    }
    for (auto [dst, pool] : {std::pair{&k_, k_pool_[size_t(il)]}, std::pair{&v_, v_pool_[size_t(il)]}}) {
      dst->push_back(KvView{.type = opt_.type, .data = pool, .width = opt_.width, .row_bytes = row_bytes_,
                            .capacity = capacity_, .n_seq = opt_.n_seq, .block_size = opt_.block_size,
                            .n_blocks = alloc_.n_blocks(), .table = table_.data(),
                            .device_table = device_table_ ? device_table_ : table_.data(),
                            .table_stride = max_blocks_, .tiled = dst == &k_ && opt_.tiled_k});
    }
  }
}

void KvCache::grow_pool(int32_t n_blocks) {
  const size_t old_bytes = size_t(alloc_.n_blocks()) * block_bytes();
  const size_t bytes = size_t(n_blocks) * block_bytes();
  for (auto* pools : {&k_pool_, &v_pool_}) {
    for (int32_t il = 0; il < opt_.n_layer; ++il) {
      if (!has_kv(il)) continue;
      void*& p = (*pools)[size_t(il)];
      void* np = backend_.alloc(bytes);
      if (p) {
        backend_.copy(np, p, old_bytes);
        backend_.free(p);
      }
      p = np;
    }
  }
  alloc_.grow(n_blocks);
  refresh_views();
}

int32_t KvCache::new_block() {
  int32_t b = alloc_.alloc();
  if (b < 0) {
    const int32_t most = max_blocks_ * opt_.n_seq;
    BRISK_CHECK(alloc_.n_blocks() < most, "KV cache: all ", most, " blocks are in use");
    grow_pool(std::min(most, std::max(1, alloc_.n_blocks() * 2)));
    b = alloc_.alloc();
  }
  return b;
}

void KvCache::copy_rows(int32_t dst, int32_t src, int32_t n) {
  if (n <= 0) return;
  // Whole tiles (a tiled view keeps 16 positions in the bytes of 16 rows); the rows past n are
  // rewritten before they are read.
  n = std::min(opt_.block_size, (n + KvView::kKvTile - 1) / KvView::kKvTile * KvView::kKvTile);
  for (auto* pools : {&k_pool_, &v_pool_}) {
    for (void* p : *pools) {
      if (!p) continue;  // a layer without K/V
      auto* base = static_cast<uint8_t*>(p);
      backend_.copy(base + size_t(dst) * block_bytes(), base + size_t(src) * block_bytes(), size_t(n) * row_bytes_);
    }
  }
}

void KvCache::release_from(int32_t seq, int32_t first_block) {
  for (int32_t b = std::max(0, first_block); b < max_blocks_; ++b) {
    int32_t& e = entry(seq, b);
    if (e < 0) continue;
    alloc_.release(e);
    e = -1;
    table_dirty_ = true;
  }
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
  for (int32_t s = 0; s < opt_.n_seq; ++s) {
    const int32_t len = len_[size_t(s)], end = new_len[size_t(s)];
    if (end <= len) continue;
    for (int32_t b = len / bs; b <= (end - 1) / bs; ++b) {
      const int32_t old = entry(s, b);
      if (old >= 0 && alloc_.refs(old) == 1) continue;
      const int32_t fresh = new_block();  // may move the pools, never the block ids
      if (old >= 0) {                     // shared: copy the rows this sequence holds, then write
        copy_rows(fresh, old, len - b * bs);
        alloc_.release(old);
      }
      entry(s, b) = fresh;
      table_dirty_ = true;
    }
  }
  if (table_dirty_ && device_) backend_.copy(device_table_, table_.data(), sizeof(int32_t) * table_.size());
  table_dirty_ = false;
}

void KvCache::copy(int32_t src, int32_t dst, int32_t n) {
  BRISK_CHECK(n >= 0 && n <= len_[size_t(src)], "seq_copy: ", n, " positions but sequence ", src,
              " holds ", len_[size_t(src)]);
  if (src == dst) {
    truncate(dst, n);
    return;
  }
  release_from(dst, 0);
  const int32_t full = n / opt_.block_size, rest = n % opt_.block_size;
  for (int32_t b = 0; b < full; ++b) {
    const int32_t e = entry(src, b);
    alloc_.retain(e);
    entry(dst, b) = e;
  }
  if (rest > 0) {
    const int32_t fresh = new_block();
    copy_rows(fresh, entry(src, full), rest);
    entry(dst, full) = fresh;
  }
  table_dirty_ = true;
  len_[size_t(dst)] = n;
}

void KvCache::truncate(int32_t seq, int32_t n) {
  BRISK_CHECK(n >= 0, "seq_truncate: negative length ", n);
  n = std::min(n, len_[size_t(seq)]);
  release_from(seq, (n + opt_.block_size - 1) / opt_.block_size);
  len_[size_t(seq)] = n;
}

}  // namespace brisk
