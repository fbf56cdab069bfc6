#include "core/cpu_features.h"

#include "core/flags.h"

#include <cstdint>

#if defined(__x86_64__)
#include <cpuid.h>
#include <csetjmp>
#include <csignal>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace brisk {
namespace {

#if defined(__x86_64__)
uint64_t read_xcr0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t(edx) << 32) | eax;
}

sigjmp_buf g_probe_jmp;
void probe_sigill(int) { siglongjmp(g_probe_jmp, 1); }

// Requests AMX tile state from the kernel, then executes a tile release under a SIGILL guard.
bool probe_amx() {
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
  struct sigaction sa = {}, old = {};
  sa.sa_handler = probe_sigill;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGILL, &sa, &old);
  bool ok = false;
  if (sigsetjmp(g_probe_jmp, 1) == 0) {
    __asm__ volatile(".byte 0xc4, 0xe2, 0x78, 0x49, 0xc0" ::: "memory");  // tilerelease
    ok = true;
  }
  sigaction(SIGILL, &old, nullptr);
  return ok;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27), fma = c & (1u << 12), f16c = c & (1u << 29);
  if (!osxsave) return f;
  const uint64_t xcr0 = read_xcr0();
  const bool ymm_ok = (xcr0 & 0x6) == 0x6;
  const bool zmm_ok = (xcr0 & 0xe6) == 0xe6;
  unsigned a7 = 0, b7 = 0, c7 = 0, d7 = 0;
  __cpuid_count(7, 0, a7, b7, c7, d7);
  unsigned a71 = 0, b71 = 0, c71 = 0, d71 = 0;
  __cpuid_count(7, 1, a71, b71, c71, d71);
  f.avx2 = ymm_ok && (b7 & (1u << 5)) && fma && f16c;
  f.avx512 = f.avx2 && zmm_ok && (b7 & (1u << 16)) && (b7 & (1u << 30)) && (b7 & (1u << 31)) &&
             (b7 & (1u << 17));
  f.avx512_vnni = f.avx512 && (c7 & (1u << 11));
  f.avx512_vbmi = f.avx512 && (c7 & (1u << 1)) && (c7 & (1u << 12)) && (c7 & (1u << 8));  // VBMI, BITALG, GFNI
  f.avx512_bf16 = f.avx512 && (a71 & (1u << 5));
  f.avx512_fp16 = f.avx512 && (d7 & (1u << 23));
  f.avx_vnni = f.avx2 && (a71 & (1u << 4));
  const bool amx_listed = (d7 & (1u << 24)) && (d7 & (1u << 25));
  f.amx = amx_listed && !flags().no_amx && probe_amx();
  return f;
}
#else
CpuFeatures detect() { return {}; }
#endif

}  // namespace

const CpuFeatures& cpu_features_detected() {
  static const CpuFeatures f = detect();
  return f;
}

CpuFeatures cpu_features() {
  CpuFeatures f = cpu_features_detected();
  const Flags& fl = flags();
  if (fl.no_simd || fl.no_avx2) f = CpuFeatures{};
  if (fl.no_avx512) {
    f.avx512 = f.avx512_vnni = f.avx512_vbmi = f.avx512_bf16 = f.avx512_fp16 = false;
  }
  if (fl.no_avx512_vbmi) f.avx512_vbmi = false;
  if (fl.no_amx) f.amx = false;
  return f;
}

std::string cpu_features_string() {
  const CpuFeatures f = cpu_features();
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (on) s += s.empty() ? name : std::string(" ") + name;
  };
  add(f.avx2, "avx2");
  add(f.avx_vnni, "avx_vnni");
  add(f.avx512, "avx512");
  add(f.avx512_vnni, "avx512_vnni");
  add(f.avx512_vbmi, "avx512_vbmi");
  add(f.avx512_bf16, "avx512_bf16");
  add(f.avx512_fp16, "avx512_fp16");
  add(f.amx, "amx");
  return s.empty() ? "scalar" : s;
}

}  // namespace brisk
