// Plain views of tensors, the vocabulary every layer from the kernels up speaks. A view owns
// nothing; whoever made it (the weight store, an arena, the KV cache) keeps the bytes alive.
//
// Layouts (all row-major, innermost dimension last in the comments):
//   Mat      float32 activations [rows, cols], row r at data + r * stride
//   Weight   a 2-D weight in its stored format: [n_out, n_in], one row per output feature
//            (GGUF ne = {n_in, n_out}); rows are row_bytes apart
//   KvView   one layer's K or V cache, paged: a pool of blocks [n_blocks, block_size, width]
//            in F32 / F16 / BF16 / Q8_0 and a block table [n_seq, table_stride] of block ids;
//            position pos of sequence seq is row pos % block_size of block
//            table[seq * table_stride + pos / block_size]; a tiled F16 view (the CPU
//            backend's K cache) stores each 16 positions of a block column-major instead,
//            [width, 16] in the bytes of their 16 rows (KvView::tiled)
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/quant_type.h"

namespace brisk {

struct Mat {
  float* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t stride = 0;  // floats between rows (>= cols); 0 means cols
  float* row(int64_t r) const { return data + r * (stride ? stride : cols); }
  int64_t row_stride() const { return stride ? stride : cols; }
};

struct Weight {
  QuantType type = QuantType::F32;
  int64_t n_in = 0;    // elements per row (GGUF ne[0])
  int64_t n_out = 0;   // rows (GGUF ne[1])
  size_t row_bytes = 0;
  const void* data = nullptr;
  bool empty() const { return data == nullptr; }
  const uint8_t* row(int64_t r) const { return static_cast<const uint8_t*>(data) + size_t(r) * row_bytes; }
};

struct KvView {
  QuantType type = QuantType::F16;
  void* data = nullptr;     // the pool: [n_blocks, block_size, width]
  int64_t width = 0;        // n_head_kv * head_dim elements per position
  size_t row_bytes = 0;     // bytes per position
  int64_t capacity = 0;     // positions a sequence may hold now (<= table_stride * block_size)
  int64_t n_seq = 0;
  int32_t block_size = 0;   // positions per block: a power of two >= 16
  int64_t n_blocks = 0;     // blocks in the pool
  const int32_t* table = nullptr;         // [n_seq, table_stride] block ids, host memory
  const int32_t* device_table = nullptr;  // the same in the backend's memory (== table on the CPU)
  int64_t table_stride = 0;               // block ids per sequence row of the table
  // F16 only: each tile of kKvTile positions of a block (tile_start(seq, pos), the bytes of
  // its kKvTile rows) holds element c of position p at (c * kKvTile + p % kKvTile) halves, so
  // one column's 16 positions are one 32-byte vector (the CPU attention's score pass). Read
  // and write rows of any view with cpu::kv_read_f32 / kv_write_f32 (kernels/cpu/ops.h).
  bool tiled = false;
  static constexpr int kKvTile = 16;
  int block_shift() const { return __builtin_ctz(unsigned(block_size)); }
  // The pool row of (seq, pos): block * block_size + pos % block_size.
  int64_t slot(int64_t seq, int64_t pos) const {
    const int sh = block_shift();
    return (int64_t(table[seq * table_stride + (pos >> sh)]) << sh) | (pos & (block_size - 1));
  }
  uint8_t* row(int64_t seq, int64_t pos) const {
    return static_cast<uint8_t*>(data) + size_t(slot(seq, pos)) * row_bytes;
  }
  // Positions pos .. pos + run(pos) - 1 lie in one block: their rows are row_bytes apart.
  int64_t run(int64_t pos) const { return block_size - (pos & (block_size - 1)); }
  // The first byte of the tile of kKvTile positions that holds (seq, pos) (tiled views).
  uint8_t* tile_start(int64_t seq, int64_t pos) const { return row(seq, pos & ~int64_t(kKvTile - 1)); }
};

// Recurrent state of linear-attention layers (Gated DeltaNet), kept per sequence beside the KV
// cache: one F32 buffer per layer and kind, [n_slots, slot_floats]; slot s < n_seq is sequence
// s's live state, the slots past them hold snapshots the runtime copies to and from (whole slots,
// so any backend's copy() moves them). Ops address the slot of each token through the step's
// sequence ids (device-side on a device backend), and a token at position 0 starts from a zero
// state, so a step needs no host decision about which state to reset.
struct StateView {
  float* data = nullptr;    // [n_slots, slot_floats]
  int64_t slot_floats = 0;
  int32_t n_slots = 0;
  float* slot(int64_t s) const { return data + s * slot_floats; }
};

}  // namespace brisk
