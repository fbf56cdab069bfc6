// Paged KV cache addressing on the device (backend.h KvView): position pos of sequence seq is
// row pos % block_size of block device_table[seq * table_stride + pos / block_size] of the pool.
// Kernels look a block up once per row (or per run of rows inside one block), never per element;
// the table is written by the host before the launch (or the graph replay) that reads it.
#pragma once
#include "core/op_args.h"
#include "quant/types.h"

namespace brisk::cuda {

__device__ __forceinline__ int kv_block_shift(const KvView& v) { return __ffs(v.block_size) - 1; }

// The pool row of (seq, pos).
__device__ __forceinline__ int64_t kv_slot(const KvView& v, int shift, int64_t seq, int64_t pos) {
  const int32_t b = __ldg(v.device_table + seq * v.table_stride + (pos >> shift));
  return (int64_t(b) << shift) | (pos & ((int64_t(1) << shift) - 1));
}

// Positions pos .. pos + kv_run(...) - 1 lie in one block.
__device__ __forceinline__ int64_t kv_run(int shift, int64_t pos) {
  return (int64_t(1) << shift) - (pos & ((int64_t(1) << shift) - 1));
}

}  // namespace brisk::cuda
