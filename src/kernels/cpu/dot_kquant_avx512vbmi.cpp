// The 512-bit K-quant decode kernels (dot_kquant_avx512.inc) built for the avx512-vbmi level:
// codes decoded with GF(2) affine byte maps (GFNI). Selected by avx512::wide_kquant_* where
// the CPU has the level (BRISK_NO_AVX512_VBMI: the plain build).
#define BRISK_KQUANT_NS avx512vbmi
#define BRISK_KQUANT_GFNI true
#include "kernels/cpu/dot_kquant_avx512.inc"
