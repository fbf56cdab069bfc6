// Internal: the per-ISA kernel tables (dot_avx2.cpp, dot_avx512.cpp). Each returns nullptr for a
// format it has no kernel for. Only call an ISA's functions when cpu_features() reports it.
#pragma once
#include "quant/format.h"

namespace brisk::kernels::avx2 {
VecDotFn vec_dot_kernel(QuantType weight_type);
QuantizeRowFn quantize_kernel(QuantType activation_type);
}  // namespace brisk::kernels::avx2

namespace brisk::kernels::avx512 {  // AVX-512 F/BW/VL + VNNI
VecDotFn vec_dot_kernel(QuantType weight_type);
QuantizeRowFn quantize_kernel(QuantType activation_type);
}  // namespace brisk::kernels::avx512
