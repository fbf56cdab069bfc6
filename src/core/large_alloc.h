// Large read-mostly buffers (model weights read into memory, the bandwidth probe's buffer):
// 2 MiB-aligned and advised as transparent huge pages (madvise MADV_HUGEPAGE) when they span
// at least one huge page, so that streaming them does not restart the hardware prefetchers at
// every 4 KiB page and misses fewer TLB entries. On this kind of machine a sequential read
// reached ~17 GB/s per core on huge pages against ~13.5 GB/s on 4 KiB pages.
// Kill switch: BRISK_NO_HUGEPAGES (4 KiB-aligned, no advice). Free with large_free.
#pragma once
#include <cstddef>

namespace brisk {

// nullptr when the allocation fails. The memory is uninitialized.
void* large_alloc(size_t bytes);
void large_free(void* p);

}  // namespace brisk
