// Which instruction sets this CPU can execute, detected once at run time (cpuid + xgetbv; AMX
// by asking the kernel for tile state and running a probe under a SIGILL guard, since some
// machines list AMX in /proc/cpuinfo but fault on it).
//
// The features and the ISA levels of the kernels come from core/isa_levels.def, the table from
// which CMake also takes each *_<level>.cpp unit's compiler flags: a feature is reported only
// when the CPU has the CPUID bit of every flag it compiles with, and a unit of a level runs only
// where cpu_has_level() says so. BRISK_CPU_MASK removes features before any of this is read (a
// CPU without them is emulated for dispatch); the kill switches of flags.def mask cpu_features().
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace brisk {

struct CpuFeatures {
#define BRISK_CPU_FEATURE(name, flags, prerequisite) bool name = false;
#include "core/isa_levels.def"
  bool amx = false;  // AMX tiles usable (probed); no unit uses them
};

// The ISA levels of isa_levels.def, lowest first; scalar: the baseline (no feature of the table).
enum class IsaLevel {
  scalar,
#define BRISK_ISA_LEVEL(id, name, suffix, features) id,
#include "core/isa_levels.def"
};

// "scalar", "avx2", "avx2-vnni", "avx512", "avx512-vbmi" (the BRISK_CPU_MASK spelling).
const char* isa_level_name(IsaLevel level);
std::optional<IsaLevel> isa_level_from_name(std::string_view name);

// What the hardware has (cpuid, xgetbv, the AMX probe), before any mask.
const CpuFeatures& cpu_features_hardware();
// The hardware features less those BRISK_CPU_MASK removes: what the CPU is taken to have. The
// *_variant functions of the kernels (tests, benchmarks) read this. Throws brisk::Error naming
// BRISK_CPU_MASK when its value has a name that is neither a level nor a feature.
CpuFeatures cpu_features_detected();
// Capabilities the kernels may use: detected features masked by the BRISK_NO_* kill switches.
CpuFeatures cpu_features();

// hw less what `mask` removes. mask: comma- or space-separated items; a level name caps the CPU
// at that level (the features of higher levels go, with every feature that needs them), a
// feature name (optionally written -name) removes that feature and those that need it.
// "avx2" and "avx512" are level names there. Throws brisk::Error on an unknown item.
CpuFeatures cpu_features_masked(const CpuFeatures& hw, std::string_view mask);

// True when f has every feature of the level (scalar: always).
bool cpu_has_level(const CpuFeatures& f, IsaLevel level);
inline bool cpu_has_level(IsaLevel level) { return cpu_has_level(cpu_features(), level); }
// The highest level f has every feature of.
IsaLevel cpu_best_level(const CpuFeatures& f);

// e.g. "avx2 avx_vnni avx512 avx512_vnni avx512_vbmi avx512_bf16"; "scalar" when none.
std::string cpu_features_string();
std::string cpu_features_string(const CpuFeatures& f);

}  // namespace brisk
