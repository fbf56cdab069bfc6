#include "runtime/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "core/checked_math.h"
#include "core/error.h"

namespace brisk {

KvCache::KvCache(Backend& backend, const KvCacheOptions& opt) : backend_(backend), opt_(opt) {
  BRISK_CHECK(opt.type == QuantType::F16 || opt.type == QuantType::F32 || opt.type == QuantType::Q8_0,
              "KV cache type must be f16, f32 or q8_0, got ", quant_type_info(opt.type).name);
  BRISK_CHECK(opt.n_layer > 0 && opt.width > 0 && opt.n_seq > 0 && opt.n_ctx > 0,
              "KV cache: layers, width, sequences and context must be positive");
  const auto rb = quant_row_bytes(opt.type, uint64_t(opt.width));
  BRISK_CHECK(rb.has_value(), "KV cache: ", quant_type_info(opt.type).name, " needs a width that is a "
              "multiple of its block size, got ", opt.width);
  row_bytes_ = size_t(*rb);
  len_.assign(size_t(opt.n_seq), 0);
  allocate(std::min(opt.n_ctx, std::max(1, opt.initial_capacity)));
}

KvCache::~KvCache() {
  for (auto& x : k_) backend_.free(x.data);
  for (auto& x : v_) backend_.free(x.data);
}

void KvCache::allocate(int32_t capacity) {
  const auto per_layer = checked_mul<uint64_t>(uint64_t(row_bytes_) * uint64_t(capacity), uint64_t(opt_.n_seq));
  BRISK_CHECK(per_layer.has_value(), "KV cache size overflows");
  std::vector<KvView> nk, nv;
  for (int32_t il = 0; il < opt_.n_layer; ++il) {
    for (auto* dst : {&nk, &nv}) {
      KvView view{.type = opt_.type, .data = backend_.alloc(size_t(*per_layer)), .width = opt_.width,
                  .row_bytes = row_bytes_, .capacity = capacity, .n_seq = opt_.n_seq};
      dst->push_back(view);
    }
  }
  // Copy what the old buffers hold (through the backend: host or device memory).
  for (size_t il = 0; il < k_.size(); ++il) {
    for (int32_t s = 0; s < opt_.n_seq; ++s) {
      const size_t n = size_t(len_[size_t(s)]) * row_bytes_;
      if (n == 0) continue;
      backend_.copy(nk[il].row(s, 0), k_[il].row(s, 0), n);
      backend_.copy(nv[il].row(s, 0), v_[il].row(s, 0), n);
    }
    backend_.free(k_[il].data);
    backend_.free(v_[il].data);
  }
  k_ = std::move(nk);
  v_ = std::move(nv);
  capacity_ = capacity;
}

void KvCache::reserve(int32_t n_pos) {
  BRISK_CHECK(n_pos <= opt_.n_ctx, "KV cache: ", n_pos, " positions exceed the context size ", opt_.n_ctx);
  if (n_pos <= capacity_) return;
  int64_t cap = capacity_;
  while (cap < n_pos) cap *= 2;
  allocate(int32_t(std::min<int64_t>(cap, opt_.n_ctx)));
}

void KvCache::copy(int32_t src, int32_t dst, int32_t n) {
  BRISK_CHECK(n >= 0 && n <= len_[size_t(src)], "seq_copy: ", n, " positions but sequence ", src,
              " holds ", len_[size_t(src)]);
  if (src != dst && n > 0) {
    for (size_t il = 0; il < k_.size(); ++il) {
      backend_.copy(k_[il].row(dst, 0), k_[il].row(src, 0), size_t(n) * row_bytes_);
      backend_.copy(v_[il].row(dst, 0), v_[il].row(src, 0), size_t(n) * row_bytes_);
    }
  }
  len_[size_t(dst)] = n;
}

}  // namespace brisk
