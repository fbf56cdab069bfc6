// Internal: the per-ISA kernel tables (dot_avx2.cpp, dot_avx512.cpp). Each returns nullptr for a
// format it has no kernel for. Only call an ISA's functions when cpu_features() reports it.
#pragma once
#include <cstddef>

#include "quant/format.h"

namespace brisk::kernels {
// out[t * out_stride] = dot(w, a_t) for t in [0, nt), a_t at a + t * a_stride bytes: the weight
// blocks are decoded once for all nt tokens; each result is bit-identical to the same ISA's
// 1-token kernel.
using VecDotMultiFn = void (*)(int64_t n, float* out, size_t out_stride, const void* w, const void* a,
                               size_t a_stride);
}  // namespace brisk::kernels

namespace brisk::kernels::avx2 {
VecDotFn vec_dot_kernel(QuantType weight_type);
VecDotMultiFn vec_dot_multi_kernel(QuantType weight_type, int n_tokens);  // n_tokens in 2..8
QuantizeRowFn quantize_kernel(QuantType activation_type);
}  // namespace brisk::kernels::avx2

namespace brisk::kernels::avx512 {  // AVX-512 F/BW/VL + VNNI
VecDotFn vec_dot_kernel(QuantType weight_type);
VecDotMultiFn vec_dot_multi_kernel(QuantType weight_type, int n_tokens);  // n_tokens in 2..8
QuantizeRowFn quantize_kernel(QuantType activation_type);
}  // namespace brisk::kernels::avx512
