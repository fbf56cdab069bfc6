// Row layouts of Q4_0 / Q5_0 / Q8_0 weights rearranged at load for the CPU decode kernels
// (kernels/cpu/dot_nibble_avx512vbmi.cpp, dot_q32_avx512.cpp), with the same bytes per row as
// the stored format.
//
// A stored row is nb blocks {d, [qh,] qs[16]} (18 or 22 bytes each). Its repacked form
// (QuantType::Q4_0_R16 / Q5_0_R16) cuts the row into groups of 16 blocks; a group is 4 "quads"
// of 4 consecutive blocks, block L (0..3) of quad j (0..3) being block 4j + L of the group:
//   codes  (4 quads, 64 B)  quad j byte 16L + i = qs[i] of block L, so that one 64-byte load
//                           gives each block's 16 code bytes in its own 128-bit lane;
//   qh     (Q5_0 only; 4 quads, 16 B) quad j u16 word L = the fifth bits of elements 0..15 of
//                           block L (bits 0-15 of its stored qh), word 4 + L those of elements
//                           16..31, so that bytes 0-7 are the 64-bit mask of the low-nibble code
//                           bytes (bit 16L + i for code byte 16L + i) and bytes 8-15 that of the
//                           high-nibble ones, loaded straight into mask registers;
//   scales (16 x f16)       word l = d of block 4 (l % 4) + l / 4 of the group (the order of
//                           the kernel's reduced block sums).
// A last partial group of m = 4q + r blocks keeps this layout for its q whole quads (codes,
// qh, then the 4q scales in block order) followed by its r last blocks as stored.
//
// Q8_0 (QuantType::Q8_0_R16, for kernels/cpu/dot_q32_avx512.cpp): a group of m blocks {d,
// qs[32]} (m = 16, or fewer in a row's last group) puts block B(l) in int32 lane l, where
// B(l) = {0,2,4,6,1,3,5,7,8,10,12,14,9,11,13,15}[l] in a whole group (the lane order of the
// stored Q8_0 kernel's block sums, so both kernels give the same bits) and B(l) = l in a
// partial one:
//   codes  (8 steps x m x 4 B) step j, lane l at byte 4 (m j + l) = qs[4j..4j+3] of block B(l),
//                           each byte xor 0x80 (the code + 128, unsigned), so that one 64-byte
//                           load of a whole group's step j (a masked load of 4m bytes in a
//                           partial group) is one vpdpbusd operand of 16 lanes = 16 blocks;
//   scales (m x f16)        word l = d of block B(l).
// Rows of the same length have the same layout; repack_row / unrepack_row convert one row
// either way.
#pragma once
#include <cstdint>
#include <optional>

#include "quant/types.h"

namespace brisk::quant {

// The repacked layout of a stored format (Q4_0 -> Q4_0_R16, Q5_0 -> Q5_0_R16, Q8_0 ->
// Q8_0_R16), if any.
std::optional<QuantType> repacked_type(QuantType stored);
// The stored format of a repacked layout; any other format is its own.
QuantType stored_type(QuantType t);
inline bool is_repacked(QuantType t) { return stored_type(t) != t; }

// One row of nb blocks: stored -> repacked (t = the stored format) and back (t = the repacked
// layout). src and dst must not overlap.
void repack_row(QuantType stored, const void* src, void* dst, int64_t nb);
void unrepack_row(QuantType repacked, const void* src, void* dst, int64_t nb);

// Converts every row of a matrix in place (rows of row_bytes bytes, nb blocks each).
void repack_rows_in_place(QuantType stored, void* data, int64_t n_rows, size_t row_bytes, int64_t nb);

}  // namespace brisk::quant
