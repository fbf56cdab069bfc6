// Which instruction sets this CPU can execute, detected once at run time (cpuid + xgetbv; AMX
// by asking the kernel for tile state and running a probe under a SIGILL guard, since some
// machines list AMX in /proc/cpuinfo but fault on it). Kill switches in flags.def mask these.
#pragma once
#include <string>

namespace brisk {

struct CpuFeatures {
  bool avx2 = false;        // AVX2 + FMA + F16C
  bool avx512 = false;      // AVX-512 F + BW + VL + DQ
  bool avx512_vnni = false;
  bool avx512_vbmi = false;  // VBMI byte permutes (vpermb / vpermt2b), BITALG bit shuffles, GFNI
  bool avx512_bf16 = false;
  bool avx512_fp16 = false;
  bool avx_vnni = false;
  bool amx = false;         // AMX tiles usable (probed)
};

// Hardware capabilities as detected (ignores kill switches).
const CpuFeatures& cpu_features_detected();
// Capabilities the kernels may use: detected features masked by BRISK_NO_* flags.
CpuFeatures cpu_features();
// e.g. "avx2 avx512 avx512_vnni avx512_bf16 (amx: unusable)"
std::string cpu_features_string();

}  // namespace brisk
