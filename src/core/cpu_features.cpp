#include "core/cpu_features.h"

#include "core/error.h"
#include "core/flags.h"

#include <array>
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

// ---- the tables of isa_levels.def ------------------------------------------------------------

struct FeatureInfo {
  std::string_view name;
  std::string_view flags;         // compiler flags of the units that may use it ("": reported only)
  std::string_view prerequisite;  // feature it needs ("": none)
  bool CpuFeatures::*member;
};
constexpr FeatureInfo kFeatures[] = {
#define BRISK_CPU_FEATURE(name, flags, prerequisite) {#name, flags, prerequisite, &CpuFeatures::name},
#include "core/isa_levels.def"
    {"amx", "", "avx512", &CpuFeatures::amx},
};
constexpr int kNumFeatures = int(std::size(kFeatures));
using FeatureBits = uint32_t;
static_assert(kNumFeatures <= 32, "FeatureBits holds one bit per feature");

struct LevelInfo {
  IsaLevel id;
  std::string_view name, suffix, features;
};
constexpr LevelInfo kLevels[] = {
    {IsaLevel::scalar, "scalar", "", ""},
#define BRISK_ISA_LEVEL(id, name, suffix, features) {IsaLevel::id, name, suffix, features},
#include "core/isa_levels.def"
};

// Calls fn on each space-separated word of s.
template <class Fn>
constexpr void for_each_word(std::string_view s, Fn&& fn) {
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ') ++i;
    size_t j = i;
    while (j < s.size() && s[j] != ' ') ++j;
    if (j > i) fn(s.substr(i, j - i));
    i = j;
  }
}

constexpr int feature_index(std::string_view name) {
  for (int i = 0; i < kNumFeatures; ++i)
    if (kFeatures[i].name == name) return i;
  return -1;
}

// The bits of a list of feature names (-1 when one is unknown).
constexpr int64_t feature_bits_of(std::string_view names) {
  int64_t bits = 0;
  for_each_word(names, [&](std::string_view w) {
    const int i = feature_index(w);
    bits = bits < 0 || i < 0 ? -1 : bits | (int64_t(1) << i);
  });
  return bits;
}

// ---- CPUID bits of the compiler flags --------------------------------------------------------

enum CpuidReg : uint8_t { kLeaf1Ecx, kLeaf7Ebx, kLeaf7Ecx, kLeaf7Edx, kLeaf7Sub1Eax, kNumCpuidRegs };
constexpr uint64_t kYmmState = 0x6;   // XCR0: SSE and AVX state saved by the OS
constexpr uint64_t kZmmState = 0xe6;  // ... plus opmask and both halves of the 512-bit state

// What the CPU must have for code compiled with a flag: a CPUID bit, the register state the OS
// must save, and the flag GCC turns on with it (-mavx2 also enables -mavx, ...).
struct FlagBit {
  std::string_view flag;
  CpuidReg reg;
  uint8_t bit;
  uint64_t xcr0;
  std::string_view implies;
};
constexpr FlagBit kFlagBits[] = {
    {"-mavx", kLeaf1Ecx, 28, kYmmState, ""},
    {"-mavx2", kLeaf7Ebx, 5, kYmmState, "-mavx"},
    {"-mfma", kLeaf1Ecx, 12, kYmmState, "-mavx"},
    {"-mf16c", kLeaf1Ecx, 29, kYmmState, "-mavx"},
    {"-mbmi", kLeaf7Ebx, 3, 0, ""},
    {"-mbmi2", kLeaf7Ebx, 8, 0, ""},
    {"-mavxvnni", kLeaf7Sub1Eax, 4, kYmmState, "-mavx2"},
    {"-mavx512f", kLeaf7Ebx, 16, kZmmState, "-mavx2"},
    {"-mavx512dq", kLeaf7Ebx, 17, kZmmState, "-mavx512f"},
    {"-mavx512ifma", kLeaf7Ebx, 21, kZmmState, "-mavx512f"},
    {"-mavx512cd", kLeaf7Ebx, 28, kZmmState, "-mavx512f"},
    {"-mavx512bw", kLeaf7Ebx, 30, kZmmState, "-mavx512f"},
    {"-mavx512vl", kLeaf7Ebx, 31, kZmmState, "-mavx512f"},
    {"-mavx512vbmi", kLeaf7Ecx, 1, kZmmState, "-mavx512f"},
    {"-mavx512vbmi2", kLeaf7Ecx, 6, kZmmState, "-mavx512f"},
    {"-mgfni", kLeaf7Ecx, 8, 0, ""},
    {"-mavx512vnni", kLeaf7Ecx, 11, kZmmState, "-mavx512f"},
    {"-mavx512bitalg", kLeaf7Ecx, 12, kZmmState, "-mavx512f"},
    {"-mavx512vpopcntdq", kLeaf7Ecx, 14, kZmmState, "-mavx512f"},
    {"-mavx512fp16", kLeaf7Edx, 23, kZmmState, "-mavx512f"},
    {"-mavx512bf16", kLeaf7Sub1Eax, 5, kZmmState, "-mavx512f"},
};

constexpr const FlagBit* flag_bit(std::string_view flag) {
  for (const FlagBit& b : kFlagBits)
    if (b.flag == flag) return &b;
  return nullptr;
}

constexpr bool flags_detectable(std::string_view flags) {
  bool ok = true;
  for_each_word(flags, [&](std::string_view w) { ok = ok && flag_bit(w) != nullptr; });
  return ok;
}

// A feature reported without flags is detected through this flag's bit.
constexpr std::string_view detection_flag(std::string_view feature) {
  if (feature == "avx512_bf16") return "-mavx512bf16";
  if (feature == "avx512_fp16") return "-mavx512fp16";
  return "";
}

// The table is checked when this file compiles: every flag has a CPUID bit here, every
// prerequisite and every feature of a level is a feature.
#define BRISK_CPU_FEATURE(name, flags, prerequisite)                                                     \
  static_assert(flags_detectable(flags), "isa_levels.def: a flag of feature " #name                     \
                                         " has no CPUID bit in kFlagBits (cpu_features.cpp)");         \
  static_assert(*flags || flag_bit(detection_flag(#name)),                                              \
                "isa_levels.def: feature " #name " has neither flags nor a detection_flag");            \
  static_assert(!*prerequisite || feature_index(prerequisite) >= 0,                                     \
                "isa_levels.def: feature " #name " needs an unknown feature");
#define BRISK_ISA_LEVEL(id, name, suffix, features) \
  static_assert(feature_bits_of(features) > 0, "isa_levels.def: level " #id " names an unknown feature");
#include "core/isa_levels.def"

constexpr std::array<FeatureBits, std::size(kLevels)> level_bits() {
  std::array<FeatureBits, std::size(kLevels)> out{};
  for (size_t i = 0; i < std::size(kLevels); ++i) out[i] = FeatureBits(feature_bits_of(kLevels[i].features));
  return out;
}
constexpr auto kLevelBits = level_bits();

constexpr bool levels_in_enum_order() {
  for (size_t i = 0; i < std::size(kLevels); ++i)
    if (kLevels[i].id != IsaLevel(i)) return false;
  return true;
}
static_assert(levels_in_enum_order(), "kLevels is indexed by IsaLevel");

FeatureBits bits_of(const CpuFeatures& f) {
  FeatureBits b = 0;
  for (int i = 0; i < kNumFeatures; ++i)
    if (f.*kFeatures[i].member) b |= FeatureBits(1) << i;
  return b;
}

CpuFeatures features_of(FeatureBits b) {
  CpuFeatures f;
  for (int i = 0; i < kNumFeatures; ++i) f.*kFeatures[i].member = (b >> i) & 1;
  return f;
}

// b without the features of `remove` and every feature that needs one of them.
FeatureBits remove_with_dependents(FeatureBits b, FeatureBits remove) {
  b &= ~remove;
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = 0; i < kNumFeatures; ++i) {
      const int pre = feature_index(kFeatures[i].prerequisite);
      if ((b >> i & 1) && pre >= 0 && !(b >> pre & 1)) {
        b &= ~(FeatureBits(1) << i);
        changed = true;
      }
    }
  }
  return b;
}

// ---- detection -------------------------------------------------------------------------------

#if defined(__x86_64__)
uint64_t read_xcr0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t(edx) << 32) | eax;
}

sigjmp_buf g_probe_jmp;
void probe_sigill(int) { siglongjmp(g_probe_jmp, 1); }

// Requests AMX tile state from the kernel, then executes a tile release under a SIGILL guard.
// The one instruction of the baseline units outside the baseline (scripts/check_isa.sh knows it
// by this function's name, which is why it stays out of line).
[[gnu::noinline]] bool probe_amx() {
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

struct CpuidState {
  uint32_t reg[kNumCpuidRegs] = {};
  uint64_t xcr0 = 0;
};

bool flag_present(const CpuidState& s, std::string_view flag) {
  const FlagBit* b = flag_bit(flag);
  if (!b || !(s.reg[b->reg] >> b->bit & 1) || (s.xcr0 & b->xcr0) != b->xcr0) return false;
  return b->implies.empty() || flag_present(s, b->implies);
}

CpuFeatures detect() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return {};
  CpuidState s;
  s.reg[kLeaf1Ecx] = c;
  const bool osxsave = c & (1u << 27);
  if (osxsave) s.xcr0 = read_xcr0();
  if (__get_cpuid_max(0, nullptr) >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    s.reg[kLeaf7Ebx] = b;
    s.reg[kLeaf7Ecx] = c;
    s.reg[kLeaf7Edx] = d;
    const unsigned max_sub = a;
    if (max_sub >= 1) {
      __cpuid_count(7, 1, a, b, c, d);
      s.reg[kLeaf7Sub1Eax] = a;
    }
  }
  FeatureBits bits = 0;
  for (int i = 0; i < kNumFeatures; ++i) {
    const FeatureInfo& f = kFeatures[i];
    bool ok = true;
    if (f.flags.empty()) {
      ok = !detection_flag(f.name).empty() && flag_present(s, detection_flag(f.name));
    } else {
      for_each_word(f.flags, [&](std::string_view w) { ok = ok && flag_present(s, w); });
    }
    if (ok) bits |= FeatureBits(1) << i;
  }
  const bool amx_listed = (s.reg[kLeaf7Edx] & (1u << 24)) && (s.reg[kLeaf7Edx] & (1u << 25));
  const FeatureBits amx_bit = FeatureBits(1) << feature_index("amx");
  if (amx_listed && !flags().no_amx && probe_amx()) bits |= amx_bit;
  // A feature counts only with its prerequisite (AVX-512 VNNI without AVX-512 F/BW/VL/DQ: none).
  return features_of(remove_with_dependents(bits, 0));
}
#else
CpuFeatures detect() { return {}; }
#endif

FeatureBits higher_level_bits(size_t level_index) {
  FeatureBits keep = 0, all = 0;
  for (size_t i = 0; i < std::size(kLevels); ++i) {
    all |= kLevelBits[i];
    if (i <= level_index) keep |= kLevelBits[i];
  }
  return all & ~keep;
}

std::string valid_mask_names() {
  std::string s = "levels:";
  for (const LevelInfo& l : kLevels) s.append(" ").append(l.name);
  s += "; features:";
  for (const FeatureInfo& f : kFeatures) s.append(" ").append(f.name);
  return s;
}

}  // namespace

const char* isa_level_name(IsaLevel level) {
  for (const LevelInfo& l : kLevels)
    if (l.id == level) return l.name.data();
  return "?";
}

std::optional<IsaLevel> isa_level_from_name(std::string_view name) {
  for (const LevelInfo& l : kLevels)
    if (l.name == name) return l.id;
  return std::nullopt;
}

const CpuFeatures& cpu_features_hardware() {
  static const CpuFeatures f = detect();
  return f;
}

CpuFeatures cpu_features_masked(const CpuFeatures& hw, std::string_view mask) {
  FeatureBits bits = bits_of(hw);
  size_t i = 0;
  while (i < mask.size()) {
    size_t j = i;
    while (j < mask.size() && mask[j] != ',' && mask[j] != ' ') ++j;
    std::string_view item = mask.substr(i, j - i);
    i = j + 1;
    if (item.empty()) continue;
    bool matched = false;
    if (item[0] != '-') {
      for (size_t l = 0; l < std::size(kLevels); ++l) {
        if (kLevels[l].name != item) continue;
        bits = remove_with_dependents(bits, higher_level_bits(l));
        matched = true;
      }
    }
    if (!matched) {
      const int f = feature_index(item[0] == '-' ? item.substr(1) : item);
      BRISK_CHECK(f >= 0, "BRISK_CPU_MASK: '", item, "' is neither a level nor a feature (", valid_mask_names(), ")");
      bits = remove_with_dependents(bits, FeatureBits(1) << f);
    }
  }
  return features_of(bits);
}

CpuFeatures cpu_features_detected() {
  const std::string& mask = flags().cpu_mask;
  if (mask.empty()) return cpu_features_hardware();
  // Parsed once per thread and value (the dispatch reads this on every kernel selection).
  thread_local std::string parsed_mask;
  thread_local CpuFeatures parsed;
  thread_local bool valid = false;
  if (!valid || parsed_mask != mask) {
    parsed = cpu_features_masked(cpu_features_hardware(), mask);
    parsed_mask = mask;
    valid = true;
  }
  return parsed;
}

CpuFeatures cpu_features() {
  const CpuFeatures f = cpu_features_detected();
  const Flags& fl = flags();
  if (fl.no_simd || fl.no_avx2) return {};
  FeatureBits remove = 0;
  auto bit = [](std::string_view name) { return FeatureBits(1) << feature_index(name); };
  if (fl.no_avx512) remove |= bit("avx512");
  if (fl.no_avx512_vbmi) remove |= bit("avx512_vbmi");
  if (fl.no_avx_vnni) remove |= bit("avx_vnni");
  if (fl.no_amx) remove |= bit("amx");
  return remove ? features_of(remove_with_dependents(bits_of(f), remove)) : f;
}

bool cpu_has_level(const CpuFeatures& f, IsaLevel level) {
  const FeatureBits need = kLevelBits[size_t(level)];
  return (bits_of(f) & need) == need;
}

IsaLevel cpu_best_level(const CpuFeatures& f) {
  IsaLevel best = IsaLevel::scalar;
  for (const LevelInfo& l : kLevels)
    if (cpu_has_level(f, l.id)) best = l.id;
  return best;
}

std::string cpu_features_string(const CpuFeatures& f) {
  std::string s;
  for (const FeatureInfo& fi : kFeatures)
    if (f.*fi.member) s.append(s.empty() ? "" : " ").append(fi.name);
  return s.empty() ? "scalar" : s;
}

std::string cpu_features_string() { return cpu_features_string(cpu_features()); }

}  // namespace brisk
