// AVX2 + F16C build of the prefill GEMM's weight unpackers (see gemm_unpack_x86.inc).
#define BRISK_GEMM_NS avx2
#include "kernels/cpu/gemm_unpack_x86.inc"
