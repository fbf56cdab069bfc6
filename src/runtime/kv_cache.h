// Key/value cache of a Context: per layer, K and V of [n_seq, capacity, n_head_kv * head_dim]
// in F16 (default), F32 or Q8_0, in backend memory. Capacity starts small and doubles (copying
// what is stored) up to n_ctx when a batch needs more positions; reserve() is called before a
// forward, never inside one. Each sequence has its own length.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace brisk {

struct KvCacheOptions {
  int32_t n_layer = 0;
  int32_t width = 0;             // n_head_kv * head_dim
  int32_t n_seq = 1;
  int32_t n_ctx = 0;             // most positions per sequence
  QuantType type = QuantType::F16;
  int32_t initial_capacity = 256;
};

class KvCache {
 public:
  KvCache(Backend& backend, const KvCacheOptions& opt);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  // Makes room for positions [0, n_pos) in every sequence (n_pos <= n_ctx).
  void reserve(int32_t n_pos);
  int32_t capacity() const { return capacity_; }
  const KvCacheOptions& options() const { return opt_; }

  const std::vector<KvView>& k() const { return k_; }
  const std::vector<KvView>& v() const { return v_; }

  int32_t length(int32_t seq) const { return len_[size_t(seq)]; }
  void set_length(int32_t seq, int32_t n) { len_[size_t(seq)] = n; }
  // dst's first n positions := src's (every layer); dst's length becomes n.
  void copy(int32_t src, int32_t dst, int32_t n);

 private:
  void allocate(int32_t capacity);
  Backend& backend_;
  KvCacheOptions opt_;
  size_t row_bytes_ = 0;
  int32_t capacity_ = 0;
  std::vector<KvView> k_, v_;   // [n_layer]
  std::vector<int32_t> len_;    // [n_seq]
};

}  // namespace brisk
