// AVX2 + AVX-VNNI build of the x86 dot-product kernels (see dot_x86.inc): the AVX2 kernels with
// the VEX-encoded vpdpbusd / vpdpwssd, for CPUs with AVX-VNNI and without AVX-512 VNNI (Intel
// Alder Lake and later client cores); run only where cpu_features() reports avx_vnni.
#define BRISK_DOT_NS avx2_vnni
#define BRISK_DOT_VNNI 1
#define BRISK_DOT_WIDE 0
#include "kernels/cpu/dot_x86.inc"

namespace brisk::kernels::avx2_vnni {
VecDotFn vec_dot_kernel(QuantType t) { return kernel_256(t); }
}  // namespace brisk::kernels::avx2_vnni
