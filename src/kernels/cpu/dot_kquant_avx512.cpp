// The 512-bit K-quant decode kernels (dot_kquant_avx512.inc) of the plain AVX-512 level, and the
// dispatch between them and the GFNI build of the avx512-vbmi level (dot_kquant_avx512vbmi.cpp).
#define BRISK_KQUANT_NS avx512
#define BRISK_KQUANT_GFNI false
#include "kernels/cpu/dot_kquant_avx512.inc"

#include "core/cpu_features.h"

namespace brisk::kernels::avx512 {
namespace {
bool use_gfni_kquant() { return cpu_has_level(IsaLevel::avx512_vbmi); }
}  // namespace

VecDotFn wide_kquant_kernel(QuantType t) {
  if (flags().no_avx512_kquant) return nullptr;
  return use_gfni_kquant() ? avx512vbmi::kquant_kernel(t) : kquant_kernel(t);
}

bool wide_kquant_gemv(const GemvMultiParams& p) {
  if (flags().no_avx512_kquant || flags().no_kquant_gemv) return false;
  return use_gfni_kquant() ? avx512vbmi::kquant_gemv(p) : kquant_gemv(p);
}

VecDotMultiFn wide_kquant_multi_kernel(QuantType t, int nt) {
  if (flags().no_avx512_kquant) return nullptr;
  return use_gfni_kquant() ? avx512vbmi::kquant_multi_kernel(t, nt) : kquant_multi_kernel(t, nt);
}

}  // namespace brisk::kernels::avx512
