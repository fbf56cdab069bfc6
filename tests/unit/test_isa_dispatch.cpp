// The ISA levels of core/isa_levels.def and the dispatch on them: BRISK_CPU_MASK parsing
// (levels cap the CPU, features are removed with everything that needs them), and that masking a
// level away moves every kernel family (dot products and GEMVs, the prefill GEMM, attention and
// the elementwise ops) to the build of the level below, so that the kernel tests that ctest runs
// once per level (isa.level.*, tests/CMakeLists.txt) cannot pass on the host's best kernels alone.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "scoped_env.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/flags.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernel_sets.h"

namespace brisk {
namespace {

using kernels::Isa;

CpuFeatures every_feature() {
  CpuFeatures f;
#define BRISK_CPU_FEATURE(name, flags, prerequisite) f.name = true;
#include "core/isa_levels.def"
  f.amx = true;
  return f;
}

TEST(IsaMask, LevelsCapTheCpu) {
  const CpuFeatures all = every_feature();
  CpuFeatures f = cpu_features_masked(all, "scalar");
  EXPECT_EQ(cpu_features_string(f), "scalar");
  EXPECT_EQ(cpu_best_level(f), IsaLevel::scalar);

  f = cpu_features_masked(all, "avx2");
  EXPECT_EQ(cpu_features_string(f), "avx2");
  EXPECT_EQ(cpu_best_level(f), IsaLevel::avx2);

  f = cpu_features_masked(all, "avx2-vnni");
  EXPECT_EQ(cpu_features_string(f), "avx2 avx_vnni");
  EXPECT_EQ(cpu_best_level(f), IsaLevel::avx2_vnni);

  f = cpu_features_masked(all, "avx512");  // the levels below stay: AVX-VNNI too
  EXPECT_TRUE(f.avx2 && f.avx_vnni && f.avx512 && f.avx512_vnni);
  EXPECT_FALSE(f.avx512_vbmi);
  EXPECT_EQ(cpu_best_level(f), IsaLevel::avx512);

  f = cpu_features_masked(all, "avx512-vbmi");
  EXPECT_EQ(cpu_features_string(f), cpu_features_string(all));
  EXPECT_EQ(cpu_best_level(f), IsaLevel::avx512_vbmi);
}

TEST(IsaMask, FeaturesGoWithWhatNeedsThem) {
  const CpuFeatures all = every_feature();
  // AMD Zen 4 / Intel Ice Lake: AVX-512 with VNNI and VBMI, no AVX-VNNI.
  for (const char* zen4 : {"avx512-vbmi,-avx_vnni", "avx_vnni", " -avx_vnni ", "avx512-vbmi avx_vnni"}) {
    const CpuFeatures f = cpu_features_masked(all, zen4);
    EXPECT_FALSE(f.avx_vnni) << zen4;
    EXPECT_TRUE(f.avx512_vnni && f.avx512_vbmi) << zen4;
    EXPECT_TRUE(cpu_has_level(f, IsaLevel::avx512_vbmi)) << zen4;
    EXPECT_FALSE(cpu_has_level(f, IsaLevel::avx2_vnni)) << zen4;
    EXPECT_TRUE(cpu_has_level(f, IsaLevel::avx2)) << zen4;
  }
  CpuFeatures f = cpu_features_masked(all, "-avx512");  // a feature name with '-': not the level
  EXPECT_TRUE(f.avx2 && f.avx_vnni);
  EXPECT_FALSE(f.avx512 || f.avx512_vnni || f.avx512_vbmi || f.avx512_bf16 || f.avx512_fp16 || f.amx);
  EXPECT_EQ(cpu_best_level(f), IsaLevel::avx2_vnni);

  f = cpu_features_masked(all, "-avx2");
  EXPECT_EQ(cpu_features_string(f), "scalar");

  f = cpu_features_masked(all, "avx512_vnni");  // AVX-512 without VNNI: no AVX-512 level
  EXPECT_TRUE(f.avx512 && f.avx512_vbmi);
  EXPECT_FALSE(cpu_has_level(f, IsaLevel::avx512));
  EXPECT_FALSE(cpu_has_level(f, IsaLevel::avx512_vbmi));
  EXPECT_EQ(cpu_best_level(f), IsaLevel::avx2_vnni);

  f = cpu_features_masked(all, "");
  EXPECT_EQ(cpu_features_string(f), cpu_features_string(all));
}

TEST(IsaMask, NeverAddsAFeature) {
  CpuFeatures avx2_only;
  avx2_only.avx2 = true;
  for (const char* m : {"avx512-vbmi", "avx512", "avx2-vnni", "-amx"}) {
    const CpuFeatures f = cpu_features_masked(avx2_only, m);
    EXPECT_EQ(cpu_features_string(f), "avx2") << m;
  }
}

TEST(IsaMask, UnknownNamesAreErrors) {
  for (const char* bad : {"avx3", "avx2,sse5", "-avx2-vnni", "AVX2"}) {
    try {
      cpu_features_masked(every_feature(), bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("BRISK_CPU_MASK"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("avx2-vnni"), std::string::npos) << "lists the levels: " << e.what();
    }
  }
}

TEST(IsaMask, LevelNamesRoundTrip) {
  for (IsaLevel l : {IsaLevel::scalar, IsaLevel::avx2, IsaLevel::avx2_vnni, IsaLevel::avx512, IsaLevel::avx512_vbmi})
    EXPECT_EQ(isa_level_from_name(isa_level_name(l)), l);
  EXPECT_FALSE(isa_level_from_name("avx1").has_value());
}

TEST(IsaMask, IsASwitchOfFlagsDef) {
  ScopedEnv e("BRISK_CPU_MASK", "avx2");
  bool listed = false;
  for (const FlagInfo& f : flags_list())
    if (f.env_name == "BRISK_CPU_MASK") listed = f.value && f.text == "avx2";
  EXPECT_TRUE(listed);
  EXPECT_FALSE(cpu_features_detected().avx512);
  EXPECT_FALSE(cpu_has_level(IsaLevel::avx2_vnni));
}

// What every kernel family runs at a level (written out here, not derived from the dispatch).
struct Expected {
  Isa dot;
  bool dot_vbmi;
  Isa gemm;
  IsaLevel attention;
};
Expected expected_at(IsaLevel level) {
  switch (level) {
    case IsaLevel::scalar: return {Isa::scalar, false, Isa::scalar, IsaLevel::scalar};
    case IsaLevel::avx2: return {Isa::avx2, false, Isa::avx2, IsaLevel::avx2};
    case IsaLevel::avx2_vnni: return {Isa::avx2_vnni, false, Isa::avx2_vnni, IsaLevel::avx2};
    case IsaLevel::avx512: return {Isa::avx512, false, Isa::avx512, IsaLevel::avx512};
    case IsaLevel::avx512_vbmi: return {Isa::avx512, true, Isa::avx512, IsaLevel::avx512};
  }
  return {};
}

void expect_kernels_of(IsaLevel level, const std::string& what) {
  const Expected want = expected_at(level);
  const kernels::CpuKernelSets got = kernels::cpu_kernel_sets();
  EXPECT_EQ(got.level, level) << what;
  EXPECT_EQ(got.dot, want.dot) << what << ": dot " << kernels::isa_name(got.dot);
  EXPECT_EQ(got.dot_vbmi, want.dot_vbmi) << what;
  EXPECT_EQ(got.gemm, want.gemm) << what << ": gemm " << kernels::isa_name(got.gemm);
  EXPECT_EQ(got.attention, want.attention) << what << ": attention " << isa_level_name(got.attention);
  // Every weight format with kernels of the level's build takes that build.
  for (QuantType t : {QuantType::F16, QuantType::Q8_0, QuantType::Q4_1, QuantType::Q5_1, QuantType::Q2_K,
                      QuantType::Q3_K, QuantType::Q5_K, QuantType::Q6_K, QuantType::IQ4_NL, QuantType::IQ4_XS,
                      QuantType::IQ2_XXS, QuantType::IQ3_S, QuantType::TQ2_0, QuantType::MXFP4}) {
    EXPECT_EQ(kernels::dot_isa(t), want.dot) << what << " " << quant_type_info(t).name;
    if (want.dot != Isa::scalar) {
      EXPECT_EQ(kernels::select_vec_dot(t), kernels::vec_dot_variant(t, want.dot)) << what;
    }
  }
}

// In one process: each level the host has, through BRISK_CPU_MASK.
TEST(IsaDispatch, MaskingALevelMovesEveryKernelFamily) {
  const CpuFeatures hw = cpu_features_hardware();
  int checked = 0;
  for (IsaLevel level : {IsaLevel::scalar, IsaLevel::avx2, IsaLevel::avx2_vnni, IsaLevel::avx512,
                         IsaLevel::avx512_vbmi}) {
    if (!cpu_has_level(hw, level)) continue;
    ScopedEnv e("BRISK_CPU_MASK", isa_level_name(level));
    // avx512 keeps AVX-VNNI, which no longer matters once the AVX-512 kernels run.
    expect_kernels_of(level, std::string("BRISK_CPU_MASK=") + isa_level_name(level));
    ++checked;
  }
  EXPECT_GE(checked, 1);
  if (cpu_has_level(hw, IsaLevel::avx512_vbmi)) {  // Zen 4: no AVX-VNNI, the rest unchanged
    ScopedEnv e("BRISK_CPU_MASK", "avx512-vbmi,-avx_vnni");
    EXPECT_FALSE(cpu_features().avx_vnni);
    expect_kernels_of(IsaLevel::avx512_vbmi, "BRISK_CPU_MASK=avx512-vbmi,-avx_vnni");
  }
}

// The check of ctest's isa.level.* runs (BRISK_TEST_ISA_LEVEL: the level BRISK_CPU_MASK leaves;
// BRISK_TEST_ISA_ABSENT: features it removes): the mask took effect before the kernel tests of
// the same run chose their kernels.
TEST(IsaDispatch, CtestLevelRunIsAtItsLevel) {
  const char* want = std::getenv("BRISK_TEST_ISA_LEVEL");
  if (!want) GTEST_SKIP() << "run by ctest's isa.level.* tests (BRISK_TEST_ISA_LEVEL)";
  const std::optional<IsaLevel> level = isa_level_from_name(want);
  ASSERT_TRUE(level.has_value()) << want;
  const CpuFeatures masked = cpu_features_masked(cpu_features_hardware(), flags().cpu_mask);
  if (!cpu_has_level(masked, *level)) {
    std::printf("ISA level %s is not on this CPU (it has, under BRISK_CPU_MASK=%s: %s): skipped\n", want,
                flags().cpu_mask.c_str(), cpu_features_string(masked).c_str());
    GTEST_SKIP() << "ISA level " << want << " is not on this CPU";
  }
  ASSERT_FALSE(flags().cpu_mask.empty()) << "BRISK_CPU_MASK is not set";
  expect_kernels_of(*level, std::string("BRISK_CPU_MASK=") + flags().cpu_mask);
  if (const char* absent = std::getenv("BRISK_TEST_ISA_ABSENT"); absent && *absent) {
    EXPECT_EQ(cpu_features_string(cpu_features_masked(cpu_features(), std::string("-") + absent)),
              cpu_features_string(cpu_features()))
        << absent << " is still reported";
  }
}

}  // namespace
}  // namespace brisk
