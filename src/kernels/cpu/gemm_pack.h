// Internal to the prefill GEMM (gemm_avx512.cpp, gemm_avx2.cpp and their unpackers): the
// unpacked weight layout every weight format is brought to before an integer tile kernel runs,
// and the packed activation layout both ISAs read.
//
// A weight row of k elements becomes, for blocks of B elements (B = 32, or 16 for Q6_K):
//   codes: (k) uint8 in element order, each <= code_max
//   scale: (k / B) float s_b
//   min:   (k / B) float m_b (formats with a per-block minimum only)
// so that element i of block b is   w_i = s_b * (code_i - offset)   (offset formats), or
//                                   w_i = s_b * code_i - m_b        (min formats).
// The codes are unsigned so that vpdpbusd / vpmaddubsw can take them as their unsigned operand
// against the signed int8 activations; `offset` turns them back into the signed values exactly,
// in integers.
//
// Activations (already quantized to Q8_0 / Q8_1 / Q8_K) are packed by groups of kGemmGroup
// tokens, 4 bytes of each token side by side (GemmGroupLayout):
//   xa:  (k / 4, 16) int32     bytes 4i..4i+3 of tokens 0..15
//   dx:  (k / B, 16) float     the token's scale for weight block b
//   aux: (k / B, 16)           -offset * sum(x in block) as int32 (offset formats), or
//                              dx * sum(x in block) as float (min formats)
// Tokens past the end of the last group are zero.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/gemm.h"
#include "quant/types.h"

namespace brisk::kernels {

// The code representation of a weight format (independent of the ISA).
struct GemmCodeSpec {
  int block = 0;         // B: elements per scale; 0: no GEMM for this format
  int offset = 0;        // offset formats: the integer subtracted from every code
  bool has_min = false;  // min formats: w = s * code - m
  int code_max = 0;      // every code is in [0, code_max]
};
GemmCodeSpec gemm_code_spec(QuantType weight_type);

// Unpacks one stored row of k elements (k a multiple of the format's block size).
using UnpackRowFn = void (*)(const void* row, int64_t k, uint8_t* codes, float* scale, float* min);

struct UnpackSpec : GemmCodeSpec {
  UnpackRowFn unpack = nullptr;  // nullptr: no GEMM for this format
};

// Byte layout of one packed token group for rows of k elements and blocks of B.
struct GemmGroupLayout {
  int64_t k = 0, nblk = 0;
  size_t xa = 0, dx = 0, aux = 0, bytes = 0;
  GemmGroupLayout(int64_t k_, int block);
};

// Bytes of the packed activations of n_tokens tokens (whole groups).
size_t gemm_group_packed_bytes(QuantType weight_type, int64_t k, int64_t n_tokens);
// Packs groups [group_begin, group_end) of p's activations into packed (group g at g * bytes).
void gemm_pack_groups(const GemmParams& p, void* packed, int64_t group_begin, int64_t group_end);

// Per-thread scratch of one GEMM call, grown and reused (valid until the thread's next call):
// the packed activations of all tokens (p.x_packed when the caller packed them, else packed
// here), and room for the unpacked codes, scales and minima of one row block.
struct GemmScratch {
  const uint8_t* packed;  // (n_groups, L.bytes)
  uint8_t* codes;         // (row_block, code_stride)
  float* scale;           // (row_block, L.nblk)
  float* min;             // (row_block, L.nblk)
};
GemmScratch gemm_scratch(const GemmParams& p, const GemmGroupLayout& L, int64_t row_block, int64_t code_stride);

// Rows unpacked at once: their codes (row_block * k * bytes_per_element) stay in L2 while every
// token group passes, so the activations stream from L3 once per row block: 3/8 of the L2 in
// codes (768 KB on a 2 MB L2), 16..128 rows rounded down to a multiple of `multiple` (<= 16).
int64_t gemm_row_block(int64_t k, int bytes_per_element, int multiple);

}  // namespace brisk::kernels

namespace brisk::kernels::avx512 {
UnpackSpec unpack_spec(QuantType weight_type);  // gemm_unpack_avx512.cpp
}  // namespace brisk::kernels::avx512

namespace brisk::kernels::avx2 {
UnpackSpec unpack_spec(QuantType weight_type);  // gemm_unpack_avx2.cpp
}  // namespace brisk::kernels::avx2
