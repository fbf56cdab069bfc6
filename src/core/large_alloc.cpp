#include "core/large_alloc.h"

#include <sys/mman.h>

#include <cstdlib>

#include "core/flags.h"

namespace brisk {

void* large_alloc(size_t bytes) {
  constexpr size_t kPage = 4096, kHuge = size_t(2) << 20;
  const size_t align = bytes >= kHuge && !flags().no_hugepages ? kHuge : kPage;
  // aligned_alloc needs a size that is a multiple of the alignment (and > 0).
  const size_t rounded = bytes == 0 ? align : (bytes + align - 1) / align * align;
  if (rounded < bytes) return nullptr;
  void* p = std::aligned_alloc(align, rounded);
  if (p && align == kHuge) ::madvise(p, rounded, MADV_HUGEPAGE);  // advice only: failure is harmless
  return p;
}

void large_free(void* p) { std::free(p); }

}  // namespace brisk
