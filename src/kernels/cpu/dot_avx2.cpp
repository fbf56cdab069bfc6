// AVX2 + FMA build of the x86 dot-product kernels (see dot_x86.inc).
#define BRISK_DOT_NS avx2
#define BRISK_DOT_VNNI 0
#define BRISK_DOT_WIDE 0
#include "kernels/cpu/dot_x86.inc"

namespace brisk::kernels::avx2 {
VecDotFn vec_dot_kernel(QuantType t) { return kernel_256(t); }
}  // namespace brisk::kernels::avx2
