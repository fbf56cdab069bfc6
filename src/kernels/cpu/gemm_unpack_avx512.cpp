// AVX-512 build of the prefill GEMM's weight unpackers (see gemm_unpack_x86.inc).
#define BRISK_GEMM_NS avx512
#include "kernels/cpu/gemm_unpack_x86.inc"
