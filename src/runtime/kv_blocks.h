// Block allocator of the paged KV cache: ids 0 .. n_blocks-1 with a reference count each.
// A block is free at count 0; alloc() hands out the lowest free id (so a fresh cache fills its
// pool in order) with count 1, retain() adds a sharer (prefix sharing), release() drops one and
// frees the block at 0. grow() adds free ids at the top (the pool was enlarged).
#pragma once
#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

namespace brisk {

class KvBlockAllocator {
 public:
  explicit KvBlockAllocator(int32_t n_blocks = 0) { grow(n_blocks); }

  // A free block with count 1, or -1 when every block is in use.
  int32_t alloc();
  void retain(int32_t block);
  // Drops one reference; true when that freed the block.
  bool release(int32_t block);
  void grow(int32_t n_blocks);

  int32_t refs(int32_t block) const { return refs_[size_t(block)]; }
  int32_t n_blocks() const { return int32_t(refs_.size()); }
  int32_t n_free() const { return int32_t(free_.size()); }
  int32_t n_used() const { return n_blocks() - n_free(); }

 private:
  void check(int32_t block, const char* what) const;
  std::vector<int32_t> refs_;  // [n_blocks]
  std::priority_queue<int32_t, std::vector<int32_t>, std::greater<int32_t>> free_;
};

}  // namespace brisk
