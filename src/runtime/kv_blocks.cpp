#include "runtime/kv_blocks.h"

#include "core/error.h"

namespace brisk {

void KvBlockAllocator::check(int32_t block, const char* what) const {
  BRISK_CHECK(block >= 0 && block < n_blocks() && refs_[size_t(block)] > 0, "KV blocks: ", what, " of block ", block,
              ", which is not in use (", n_blocks(), " blocks)");
}

int32_t KvBlockAllocator::alloc() {
  if (free_.empty()) return -1;
  const int32_t b = free_.top();
  free_.pop();
  refs_[size_t(b)] = 1;
  return b;
}

void KvBlockAllocator::retain(int32_t block) {
  check(block, "retain");
  ++refs_[size_t(block)];
}

bool KvBlockAllocator::release(int32_t block) {
  check(block, "release");
  if (--refs_[size_t(block)] > 0) return false;
  free_.push(block);
  return true;
}

void KvBlockAllocator::grow(int32_t n_blocks) {
  BRISK_CHECK(n_blocks >= this->n_blocks(), "KV blocks: cannot shrink the pool from ", this->n_blocks(), " to ", n_blocks);
  for (int32_t b = this->n_blocks(); b < n_blocks; ++b) free_.push(b);
  refs_.resize(size_t(n_blocks), 0);
}

}  // namespace brisk
