// Float GEMM dispatch (gemm_float.h): the AVX-512 kernel where the CPU has it and no kill switch
// (BRISK_NO_FLOAT_GEMM, BRISK_NO_AVX512, BRISK_NO_SIMD) turns it off.
#include "kernels/cpu/gemm_float.h"

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/flags.h"

namespace brisk::kernels {

bool gemm_float_available(QuantType wt) {
  const bool float_type = wt == QuantType::F32 || wt == QuantType::F16 || wt == QuantType::BF16;
  return float_type && cpu_features().avx512 && !flags().no_float_gemm && !flags().no_simd;
}

void gemm_float_rows(const FloatGemmParams& p) {
  BRISK_CHECK(gemm_float_available(p.weight_type), "float gemm: not available for ", quant_type_info(p.weight_type).name);
  BRISK_CHECK(p.x_type == QuantType::F32 || p.x_type == QuantType::F16 || p.x_type == QuantType::BF16,
              "float gemm: activations of type ", quant_type_info(p.x_type).name);
  BRISK_CHECK(p.n_rows >= 0 && p.k >= 0 && p.n_tokens >= 0 && p.y_stride >= p.n_rows, "float gemm: bad shape");
  if (p.n_rows == 0 || p.n_tokens == 0) return;
  avx512::gemm_float_rows(p);
}

}  // namespace brisk::kernels
