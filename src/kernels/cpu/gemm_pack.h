// Internal to the AVX-512 prefill GEMM (gemm_avx512.cpp, gemm_unpack_avx512.cpp): the unpacked
// weight layout every weight format is brought to before the integer tile kernel runs.
//
// A weight row of k elements becomes, for blocks of B elements (B = 32, or 16 for Q6_K):
//   codes: (k) uint8 in element order
//   scale: (k / B) float s_b
//   min:   (k / B) float m_b (formats with a per-block minimum only)
// so that element i of block b is   w_i = s_b * (code_i - offset)   (offset formats), or
//                                   w_i = s_b * code_i - m_b        (min formats).
// The codes are unsigned so that vpdpbusd can take them as its unsigned operand against the
// signed int8 activations; `offset` turns them back into the signed values exactly, in integers.
#pragma once
#include <cstdint>

#include "quant/types.h"

namespace brisk::kernels::avx512 {

// Unpacks one stored row of k elements (k a multiple of the format's block size).
using UnpackRowFn = void (*)(const void* row, int64_t k, uint8_t* codes, float* scale, float* min);

struct UnpackSpec {
  UnpackRowFn unpack = nullptr;  // nullptr: no GEMM for this format
  int block = 32;                // B: elements per scale
  int offset = 0;                // offset formats: the integer subtracted from every code
  bool has_min = false;          // min formats: w = s * code - m
};

UnpackSpec unpack_spec(QuantType weight_type);

}  // namespace brisk::kernels::avx512
