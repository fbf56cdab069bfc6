// A block format as a trait: dequantize, reference quantize, and the dot product with the
// activation format it pairs with (as GGUF consumers expect: e.g. Q4_K weights pair with Q8_K
// activations, Q8_0/Q4_0 with Q8_0, F16 with F16, F32 with F32).
//
// Row functions take n elements (a multiple of the format's block size) and raw block bytes.
#pragma once
#include <cstdint>

#include "quant/types.h"

namespace brisk {

using DequantizeRowFn = void (*)(const void* src, float* dst, int64_t n);
using QuantizeRowFn = void (*)(const float* src, void* dst, int64_t n);
// *out = dot(w[0..n), a[0..n)) with w in the weight format and a in its vec_dot_type.
using VecDotFn = void (*)(int64_t n, float* out, const void* w, const void* a);

struct FormatTraits {
  QuantType type;
  DequantizeRowFn dequantize_row = nullptr;    // every format
  QuantizeRowFn quantize_row_ref = nullptr;    // nullptr when there is no reference quantizer
  QuantType vec_dot_type = QuantType::F32;     // activation format for vec_dot
  VecDotFn vec_dot = nullptr;                  // scalar reference dot product
};

// Throws brisk::Error for a format without an implementation.
const FormatTraits& format_traits(QuantType t);

}  // namespace brisk
