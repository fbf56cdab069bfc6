#include "kernels/cpu/kernel_sets.h"

#include "kernels/cpu/dot_isa.h"
#include "kernels/cpu/gemm.h"

namespace brisk::kernels {

IsaLevel cpu_ops_level() {
  if (cpu_has_level(IsaLevel::avx512)) return IsaLevel::avx512;
  if (cpu_has_level(IsaLevel::avx2)) return IsaLevel::avx2;
  return IsaLevel::scalar;
}

CpuKernelSets cpu_kernel_sets() {
  const Isa dot = dot_isa(QuantType::Q4_K);
  const bool vbmi = dot_isa(QuantType::Q4_0) == Isa::avx512 &&
                    select_vec_dot(QuantType::Q4_0) == avx512vbmi::nibble_kernel(QuantType::Q4_0);
  return {.level = cpu_best_level(cpu_features()),
          .dot = dot,
          .dot_vbmi = vbmi,
          .gemm = gemm_isa(QuantType::Q4_K),
          .attention = cpu_ops_level()};
}

std::string cpu_kernel_sets_string() {
  const CpuKernelSets k = cpu_kernel_sets();
  std::string s = std::string(isa_level_name(k.level)) + " (dot " + isa_name(k.dot) + (k.dot_vbmi ? " + vbmi" : "") +
                  ", gemm " + (k.gemm == Isa::scalar ? "none" : isa_name(k.gemm)) + ", attention " +
                  isa_level_name(k.attention) + ")";
  return s;
}

}  // namespace brisk::kernels
