// Internal: the per-ISA kernel tables (dot_avx2.cpp, dot_avxvnni.cpp, dot_avx512.cpp and the
// 512-bit dot_*_avx512*.cpp). Each returns nullptr for a format it has no kernel for. Only call
// an ISA's functions where cpu_has_level() reports its level (core/isa_levels.def).
#pragma once
#include <cstddef>

#include "kernels/cpu/dot.h"
#include "quant/format.h"

namespace brisk::kernels {
// How far ahead of the weight block being decoded the GEMV kernels prefetch (bytes). Tuned on
// this machine's decode (2 threads, huge pages): 1 KiB left a third of the bandwidth unused,
// 4-8 KiB were best.
constexpr size_t kWeightPrefetchBytes = 6144;

// out[t * out_stride] = dot(w, a_t) for t in [0, nt), a_t at a + t * a_stride bytes: the weight
// blocks are decoded once for all nt tokens; each result is bit-identical to the same ISA's
// 1-token kernel.
using VecDotMultiFn = void (*)(int64_t n, float* out, size_t out_stride, const void* w, const void* a,
                               size_t a_stride);

// The calling thread's buffer for activations prepared by a GEMV kernel (dot_q32_avx512.cpp,
// dot_nibble_avx512vbmi.cpp): at least `bytes` bytes, 64-byte aligned, reused by later calls.
uint8_t* prepared_activation_buffer(size_t bytes);
// What that buffer holds: nt tokens of x (stride bytes apart, nb blocks) prepared by the kernel
// family `family` for activation epoch `epoch` (GemvMultiParams::x_epoch; 0: not reusable).
struct PreparedActivationKey {
  const void* x = nullptr;
  uint64_t epoch = 0;
  int64_t nb = 0;
  int nt = 0;
  size_t stride = 0;
  const void* family = nullptr;
  bool operator==(const PreparedActivationKey&) const = default;
};
PreparedActivationKey& prepared_activation_key();
}  // namespace brisk::kernels

namespace brisk::kernels::avx2 {
VecDotFn vec_dot_kernel(QuantType weight_type);
VecDotMultiFn vec_dot_multi_kernel(QuantType weight_type, int n_tokens);  // n_tokens in 2..8
QuantizeRowFn quantize_kernel(QuantType activation_type);
}  // namespace brisk::kernels::avx2

namespace brisk::kernels::avx2_vnni {  // AVX2 + AVX-VNNI (VEX vpdpbusd)
VecDotFn vec_dot_kernel(QuantType weight_type);
VecDotMultiFn vec_dot_multi_kernel(QuantType weight_type, int n_tokens);  // n_tokens in 2..8
QuantizeRowFn quantize_kernel(QuantType activation_type);
}  // namespace brisk::kernels::avx2_vnni

namespace brisk::kernels::avx512 {  // AVX-512 F/BW/VL/DQ + VNNI (EVEX vpdpbusd)
VecDotFn vec_dot_kernel(QuantType weight_type);
VecDotMultiFn vec_dot_multi_kernel(QuantType weight_type, int n_tokens);  // n_tokens in 2..8
QuantizeRowFn quantize_kernel(QuantType activation_type);
// 512-bit kernels of Q8_0 / Q4_0 / Q5_0 (dot_q32_avx512.cpp), which take precedence over the
// 256-bit ones of dot_x86.inc; the multi-token kernel covers n_tokens 1..8.
VecDotFn wide_q32_kernel(QuantType weight_type);
VecDotMultiFn wide_q32_multi_kernel(QuantType weight_type, int n_tokens);
// Whole GEMV (gemv_rows_multi) with the activations prepared once for all rows; false when the
// format or token count has no such kernel. Bit-identical to the two functions above.
bool wide_q32_gemv(const GemvMultiParams& p, size_t prefetch_bytes);
// 512-bit kernels of Q4_K / Q5_K / Q6_K x Q8_K (dot_kquant_avx512.inc: this level's build, or the
// GFNI one of avx512vbmi:: where the CPU has that level), which take precedence over the 256-bit
// ones; nullptr under BRISK_NO_AVX512_KQUANT. The multi-token kernel covers
// n_tokens 1..8, each token's result bit-identical to the 1-token kernel's.
VecDotFn wide_kquant_kernel(QuantType weight_type);
VecDotMultiFn wide_kquant_multi_kernel(QuantType weight_type, int n_tokens);
// Whole GEMV over K-quant rows (1..8 tokens) with those kernels inlined in the row loop; false
// under BRISK_NO_AVX512_KQUANT / BRISK_NO_KQUANT_GEMV or for another format. Same bits.
bool wide_kquant_gemv(const GemvMultiParams& p);
// This level's build of those kernels, without the flag checks and the dispatch.
VecDotFn kquant_kernel(QuantType weight_type);
VecDotMultiFn kquant_multi_kernel(QuantType weight_type, int n_tokens);
bool kquant_gemv(const GemvMultiParams& p);
}  // namespace brisk::kernels::avx512

namespace brisk::kernels::avx512vbmi {  // AVX-512 + VBMI (dot_nibble_avx512vbmi.cpp)
// Q4_0 / Q5_0 x Q8_0 with byte-permute block decoding; same contracts as the wide_q32 kernels
// above, which return these where cpu_has_level(IsaLevel::avx512_vbmi).
VecDotFn nibble_kernel(QuantType weight_type);
VecDotMultiFn nibble_multi_kernel(QuantType weight_type, int n_tokens);
bool nibble_gemv(const GemvMultiParams& p);
// The K-quant kernels of dot_kquant_avx512.inc with GFNI code decoding (dot_kquant_avx512vbmi.cpp);
// the same contracts and bits as avx512::kquant_*.
VecDotFn kquant_kernel(QuantType weight_type);
VecDotMultiFn kquant_multi_kernel(QuantType weight_type, int n_tokens);
bool kquant_gemv(const GemvMultiParams& p);
}  // namespace brisk::kernels::avx512vbmi
