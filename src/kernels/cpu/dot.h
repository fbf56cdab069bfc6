// CPU dot products and the decode GEMV built on them.
//
// The hot path of decode is y[r] = dot(W[r, :], x) over all rows r of a weight matrix, with the
// activation x quantized once to the weight format's vec_dot_type (Q8_0, Q8_1, Q8_K, or the
// float type itself; see quant/format.h). select_vec_dot() picks the best kernel for this CPU:
// AVX-512 (with VNNI), else AVX2 with AVX-VNNI, else AVX2, else the scalar reference, honouring
// the kill switches in core/flags.def (BRISK_NO_SIMD, BRISK_NO_AVX512, BRISK_NO_AVX_VNNI,
// BRISK_NO_AVX2, BRISK_NO_SIMD_DOT_<FORMAT>, BRISK_NO_SIMD_QUANTIZE_ACT) and BRISK_CPU_MASK.
// Threading is the caller's: split rows across threads and call gemv_rows() on each slice.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/cpu_features.h"
#include "quant/format.h"

namespace brisk::kernels {

// The kernel builds: each runs where cpu_has_level() reports its ISA level (core/isa_levels.def).
enum class Isa { scalar, avx2, avx2_vnni, avx512 };
const char* isa_name(Isa isa);  // "scalar", "avx2", "avx2-vnni", "avx512"
IsaLevel isa_level(Isa isa);

// Best available dot product for weights of this format (paired with its vec_dot_type).
// Throws brisk::Error for a format without any dot product.
VecDotFn select_vec_dot(QuantType weight_type);
// Best available quantizer for an activation format (Q8_0 / Q8_1 / Q8_K / F16 / BF16 / F32).
QuantizeRowFn select_quantize_activation(QuantType activation_type);

// The ISA whose kernel select_vec_dot() returns for this format (scalar: the reference).
Isa dot_isa(QuantType weight_type);

// The kernel of one ISA (ignores kill switches; nullptr when this CPU, as BRISK_CPU_MASK leaves
// it, lacks the ISA or the format has no kernel for it). For tests and benchmarks that compare
// variants.
VecDotFn vec_dot_variant(QuantType weight_type, Isa isa);
QuantizeRowFn quantize_activation_variant(QuantType activation_type, Isa isa);

// The in-memory layout (quant/repack.h) this CPU's decode kernels read fastest for matmul
// weights stored as `stored`, or nullopt to keep the stored layout (no faster kernel here,
// BRISK_NO_REPACK, BRISK_REF_OPS).
std::optional<QuantType> cpu_weight_layout(QuantType stored);

// Activation format and bytes of a quantized activation row of k elements for this weight format.
QuantType activation_type(QuantType weight_type);
size_t activation_row_bytes(QuantType weight_type, int64_t k);

// y[r] = dot(W[r, 0..k), x) for r in [0, n_rows). W rows start every row_bytes bytes; x_quant is
// one row of k elements already quantized to activation_type(wt).
//   w:       (n_rows, row_bytes) raw blocks of format wt
//   x_quant: (activation_row_bytes(wt, k)) bytes
//   y:       (n_rows) floats
void gemv_rows(QuantType wt, const void* w, size_t row_bytes, int64_t n_rows, int64_t k,
               const void* x_quant, float* y);

// Several tokens at once (1..8): y[t * y_stride + r] = dot(W[r, :], x_t), x_t at
// x_quant + t * x_stride bytes. Each weight row is read once from memory for all tokens; for
// Q8_0, Q4_0, Q4_K, Q5_K and Q6_K the SIMD kernels also decode each weight block once for all tokens.
// Every result is bit-identical to gemv_rows() on that token alone.
struct GemvMultiParams {
  QuantType weight_type;
  const void* w;         // (n_rows, row_bytes)
  size_t row_bytes;
  int64_t n_rows;
  int64_t k;
  const void* x_quant;   // (n_tokens, x_stride) bytes
  size_t x_stride;
  int n_tokens;          // 1..8
  float* y;              // (n_tokens, y_stride) floats
  int64_t y_stride;
  // Nonzero: x_quant keeps these contents for as long as calls carry this epoch (one from
  // new_activation_epoch), so a kernel that prepares its activations (the 512-bit Q8_0 / Q4_0 /
  // Q5_0 ones) may reuse what it prepared on this thread for an earlier call of the epoch.
  uint64_t x_epoch = 0;
};
// A fresh epoch (never 0) for activations just quantized.
uint64_t new_activation_epoch();
void gemv_rows_multi(const GemvMultiParams& p);

}  // namespace brisk::kernels
