// Prefill GEMM (kernels/cpu/gemm.h) against the scalar per-row dot product on random shapes:
// token counts and row counts that are not multiples of the tiles (4 x 32 on AVX-512, 3 x 16 on
// AVX2), odd block counts, row and output strides wider than the data; the AVX2 kernel's two
// forms called directly (gemm_isa.h), also with the largest codes and activations; plus the kill
// switches and shape errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "dot_magnitude.h"
#include "scoped_env.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/flags.h"
#include "core/fp16.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_isa.h"
#include "quant/blocks.h"
#include "quant/format.h"
#include "quant/repack.h"
#include "quant/types.h"

namespace brisk::kernels {
namespace {

const std::vector<QuantType> kGemmFormats = {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q5_0,   QuantType::Q4_1,
                                             QuantType::Q5_1, QuantType::Q4_K, QuantType::Q5_K,   QuantType::Q6_K,
                                             QuantType::IQ4_NL, QuantType::IQ4_XS};

// Random valid blocks for a matrix of n_rows rows of k elements, row stride row_bytes.
std::vector<uint8_t> random_matrix(QuantType t, int64_t n_rows, int64_t k, size_t stride, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<uint8_t> m(size_t(n_rows) * stride, 0xAB);
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t r = 0; r < n_rows; ++r) {
    const float s = 0.01f + 2.f * float(rng() % 1000) / 1000.f;  // rows of different magnitude
    uint8_t* dst = m.data() + size_t(r) * stride;
    if (format_traits(t).quantize_row_ref) {
      for (auto& v : row) v = s * g(rng);
      format_traits(t).quantize_row_ref(row.data(), dst, k);
      continue;
    }
    // No reference quantizer (IQ4_NL, IQ4_XS): random codes and scale bits, and a random
    // finite fp16 d at the start of every block (both formats store d first).
    const QuantTypeInfo& info = quant_type_info(t);
    const size_t row_len = *quant_row_bytes(t, uint64_t(k));
    for (size_t i = 0; i < row_len; ++i) dst[i] = uint8_t(rng());
    for (size_t b = 0; b < row_len; b += info.type_size) {
      const uint16_t d = f32_to_fp16(s * 0.01f * (1.f + float(rng() % 100) / 100.f));
      std::memcpy(dst + b, &d, 2);
    }
  }
  return m;
}

// sum |w_i * x_i| of the dequantized operands: the scale of the float rounding error
struct Shape {
  int64_t rows, k, tokens;
};

// A GEMM to check: gemm_rows, or one ISA variant called directly.
struct Runner {
  const char* name;
  std::function<void(const GemmParams&)> run;
};
const std::vector<Runner> kPublic = {{"gemm_rows", [](const GemmParams& p) { gemm_rows(p); }}};

// Weights and activations of one case; row strides padded past the data.
struct Operands {
  size_t wrow, xrow;
  int64_t y_stride;
  std::vector<uint8_t> w, x;
};

Operands random_operands(QuantType wt, const Shape& s, uint32_t seed) {
  Operands o{.wrow = *quant_row_bytes(wt, uint64_t(s.k)) + 6, .xrow = activation_row_bytes(wt, s.k) + 2,
             .y_stride = s.rows + 3, .w = {}, .x = {}};
  o.w = random_matrix(wt, s.rows, s.k, o.wrow, seed);
  o.x = random_matrix(activation_type(wt), s.tokens, s.k, o.xrow, seed + 1);
  return o;
}

// Every runner's Y against the scalar reference dot product (computed once per case).
void check_operands(QuantType wt, const Shape& s, const Operands& o, const std::vector<Runner>& runners) {
  const VecDotFn ref = format_traits(wt).vec_dot;
  std::vector<float> want(size_t(s.tokens * s.rows)), tol(want.size());
  for (int64_t t = 0; t < s.tokens; ++t) {
    for (int64_t r = 0; r < s.rows; ++r) {
      const uint8_t* wr = o.w.data() + size_t(r) * o.wrow;
      const uint8_t* xr = o.x.data() + size_t(t) * o.xrow;
      ref(s.k, &want[size_t(t * s.rows + r)], wr, xr);
      tol[size_t(t * s.rows + r)] = float(2e-6 * dot_magnitude(wt, wr, xr, s.k) + 1e-30);
    }
  }
  for (const Runner& run : runners) {
    std::vector<float> y(size_t(s.tokens * o.y_stride), -7.f);
    run.run({.weight_type = wt, .w = o.w.data(), .row_bytes = o.wrow, .n_rows = s.rows, .k = s.k,
             .x_quant = o.x.data(), .x_stride = o.xrow, .n_tokens = s.tokens, .y = y.data(),
             .y_stride = o.y_stride});
    for (int64_t t = 0; t < s.tokens; ++t) {
      for (int64_t r = 0; r < o.y_stride; ++r) {
        const float got = y[size_t(t * o.y_stride + r)];
        if (r >= s.rows) {
          ASSERT_EQ(got, -7.f) << run.name << " wrote outside the rows at token " << t << " column " << r;
          continue;
        }
        const size_t i = size_t(t * s.rows + r);
        ASSERT_NEAR(got, want[i], tol[i]) << run.name << " " << quant_type_info(wt).name << " rows " << s.rows
                                          << " k " << s.k << " tokens " << s.tokens << " at token " << t
                                          << " row " << r;
      }
    }
  }
}

void check_shape(QuantType wt, const Shape& s, uint32_t seed, const std::vector<Runner>& runners = kPublic) {
  check_operands(wt, s, random_operands(wt, s, seed), runners);
}

TEST(KernelsGemm, MatchesReferenceDotOnRandomShapes) {
  for (QuantType wt : kGemmFormats) {
    if (!gemm_available(wt)) GTEST_SKIP() << "no GEMM kernel on this CPU (needs AVX-512 VNNI)";
    const int64_t bs = int64_t(quant_type_info(wt).block_size);
    if (bs == 256) {  // K-quants: k in whole super-blocks
      const std::vector<Shape> kshapes = {{4, 256, 4}, {13, 512, 9}, {37, 768, 21}, {67, 4096, 67}, {5, 256, 131}};
      uint32_t kseed = 3;
      for (const Shape& s : kshapes) check_shape(wt, s, kseed += 5);
      continue;
    }
    const std::vector<Shape> shapes = {{4, 64, 4},    {4, 32, 9},    {13, 96, 9},   {37, 256, 10},
                                       {64, 416, 13}, {130, 128, 17}, {67, 4096, 67}, {5, 1024, 131},
                                       {3, 64, 20},   {8, 32, 3}};
    uint32_t seed = 11;
    for (const Shape& s : shapes) check_shape(wt, s, seed += 7);
  }
}

TEST(KernelsGemm, RandomShapesSweep) {
  std::mt19937 rng(5);
  for (QuantType wt : kGemmFormats) {
    if (!gemm_available(wt)) GTEST_SKIP() << "no GEMM kernel on this CPU (needs AVX-512 VNNI)";
    for (int i = 0; i < 12; ++i) {
      const int64_t bs = int64_t(quant_type_info(wt).block_size);
      const Shape s{1 + int64_t(rng() % 70), bs * (1 + int64_t(rng() % (bs == 256 ? 6 : 20))), 9 + int64_t(rng() % 60)};
      check_shape(wt, s, 100 + uint32_t(i));
    }
  }
}

// The two-phase use: the activations packed by two calls (as two threads would split the
// groups) into a poisoned buffer, then the GEMM with x_packed.
Runner packed_runner(const char* name, std::function<size_t(QuantType, int64_t, int64_t)> bytes,
                     std::function<void(const GemmParams&, void*, int64_t, int64_t)> pack,
                     std::function<void(const GemmParams&)> run) {
  return {name, [=](const GemmParams& p) {
            std::vector<uint8_t> packed(bytes(p.weight_type, p.k, p.n_tokens), 0xCD);
            const int64_t groups = (p.n_tokens + kGemmGroup - 1) / kGemmGroup;
            pack(p, packed.data(), groups / 2, groups);
            pack(p, packed.data(), 0, groups / 2);
            GemmParams q = p;
            q.x_packed = packed.data();
            run(q);
          }};
}

// The AVX2 GEMMs called directly (they run on AVX-512 CPUs too): the vpmaddubsw one, and the
// AVX-VNNI one where the CPU has it, each with and without the two-phase packing.
std::vector<Runner> avx2_runners(QuantType wt) {
  std::vector<Runner> out;
  for (Isa isa : {Isa::avx2, Isa::avx2_vnni}) {
    const GemmIsaKernels k = gemm_kernels_variant(wt, isa);
    if (isa == Isa::avx2_vnni && !cpu_features_detected().avx_vnni) {
      EXPECT_FALSE(k) << "an AVX-VNNI GEMM on a CPU without AVX-VNNI";
      continue;
    }
    EXPECT_TRUE(k) << "no " << isa_name(isa) << " GEMM for " << quant_type_info(wt).name;
    if (!k) continue;
    const bool vnni = isa == Isa::avx2_vnni;
    out.push_back({vnni ? "avx2 avx-vnni" : "avx2 maddubs", k.kernel});
    out.push_back(packed_runner(vnni ? "avx2 avx-vnni, packed" : "avx2 maddubs, packed", k.packed_bytes,
                                k.pack_tokens, k.kernel));
  }
  return out;
}

TEST(KernelsGemmAvx2, MatchesReferenceDotBothVariants) {
  if (!cpu_features_detected().avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  // Token counts 9..70 (not all multiples of 16, some <= 8 in the last group), row counts that
  // are not multiples of the 3-row tile, and 130 rows of 4864 (more than one row block).
  const std::vector<Shape> shapes = {{7, 256, 9},    {37, 768, 21}, {11, 2560, 70}, {130, 4864, 17},
                                     {2, 512, 33},   {16, 1024, 48}, {5, 256, 56}};
  for (QuantType wt : kGemmFormats) {
    const std::vector<Runner> runners = avx2_runners(wt);
    ASSERT_EQ(runners.size(), cpu_features_detected().avx_vnni ? 4u : 2u);
    uint32_t seed = 41;
    for (const Shape& s : shapes) check_shape(wt, s, seed += 3, runners);
    if (quant_type_info(wt).block_size == 32) check_shape(wt, {13, 416, 40}, 7, runners);
  }
}

// Q8_0_R16 rows (quant/repack.h) unpack to the stored rows' codes and scales, so every GEMM
// (the public one and the AVX2 ones) gives the stored rows' bits: rows of 1..40 blocks (whole
// and partial groups) and Qwen2.5-0.5B's 896 and 4864.
TEST(KernelsGemm, RepackedQ8RowsGiveTheStoredBits) {
  if (!gemm_available(QuantType::Q8_0_R16)) GTEST_SKIP() << "no GEMM kernel for Q8_0_R16 here (needs AVX-512 VNNI)";
  std::vector<int64_t> block_counts;
  for (int64_t nb = 1; nb <= 40; ++nb) block_counts.push_back(nb);
  block_counts.push_back(152);
  std::vector<Runner> runners = kPublic;
  for (const Runner& r : avx2_runners(QuantType::Q8_0_R16)) runners.push_back(r);
  for (int64_t nb : block_counts) {
    const Shape s{.rows = 7, .k = 32 * nb, .tokens = 11};
    const Operands o = random_operands(QuantType::Q8_0, s, uint32_t(nb) + 300u);
    std::vector<uint8_t> packed = o.w;
    for (int64_t r = 0; r < s.rows; ++r)
      quant::repack_row(QuantType::Q8_0, o.w.data() + size_t(r) * o.wrow, packed.data() + size_t(r) * o.wrow, nb);
    for (const Runner& run : runners) {
      std::vector<float> want(size_t(s.tokens * o.y_stride), 0.f), got(want.size(), 0.f);
      auto params = [&](QuantType t, const std::vector<uint8_t>& w, std::vector<float>& y) {
        return GemmParams{.weight_type = t, .w = w.data(), .row_bytes = o.wrow, .n_rows = s.rows, .k = s.k,
                          .x_quant = o.x.data(), .x_stride = o.xrow, .n_tokens = s.tokens, .y = y.data(),
                          .y_stride = o.y_stride};
      };
      run.run(params(QuantType::Q8_0, o.w, want));
      run.run(params(QuantType::Q8_0_R16, packed, got));
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), sizeof(float) * want.size())) << run.name << " nb=" << nb;
    }
  }
}

// Raw activation rows of int8 value v everywhere (v = -128 and 127 are beyond what the
// quantizers produce), so that with the largest codes every vpmaddubsw pair is at its bound.
std::vector<uint8_t> constant_activations(QuantType act, int64_t k, size_t stride, const std::vector<int>& values) {
  std::vector<uint8_t> m(values.size() * stride, 0);
  for (size_t t = 0; t < values.size(); ++t) {
    uint8_t* row = m.data() + t * stride;
    const int8_t v = int8_t(values[t]);
    if (act == QuantType::Q8_K) {
      auto* b = reinterpret_cast<quant::BlockQ8_K*>(row);
      for (int64_t i = 0; i < k / 256; ++i) {
        b[i].d = 0.01f;
        std::memset(b[i].qs, v, sizeof(b[i].qs));
        for (auto& bs : b[i].bsums) bs = int16_t(16 * v);
      }
    } else if (act == QuantType::Q8_1) {
      auto* b = reinterpret_cast<quant::BlockQ8_1*>(row);
      for (int64_t i = 0; i < k / 32; ++i) {
        b[i].d = f32_to_fp16(0.01f);
        b[i].s = f32_to_fp16(0.01f * 32.f * float(v));
        std::memset(b[i].qs, v, sizeof(b[i].qs));
      }
    } else {
      auto* b = reinterpret_cast<quant::BlockQ8_0*>(row);
      for (int64_t i = 0; i < k / 32; ++i) {
        b[i].d = f32_to_fp16(0.01f);
        std::memset(b[i].qs, v, sizeof(b[i].qs));
      }
    }
  }
  return m;
}

TEST(KernelsGemmAvx2, LargestCodesAndActivationsStayExact) {
  if (!cpu_features_detected().avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  const Shape s{5, 512, 12};
  for (QuantType wt : kGemmFormats) {
    Operands o = random_operands(wt, s, 9);
    if (format_traits(wt).quantize_row_ref) {
      // Per 16 elements one at -1 and the rest at +0.999: every other code at the format's top.
      std::vector<float> row(size_t(s.k));
      for (size_t i = 0; i < row.size(); ++i) row[i] = i % 16 == 0 ? -1.f : 0.999f;
      for (int64_t r = 0; r < s.rows; ++r) format_traits(wt).quantize_row_ref(row.data(), o.w.data() + r * o.wrow, s.k);
    } else {  // IQ4_NL / IQ4_XS: every index 15 (value 113, code 241)
      const size_t qs = wt == QuantType::IQ4_NL ? offsetof(quant::BlockIQ4_NL, qs) : offsetof(quant::BlockIQ4_XS, qs);
      const size_t nqs = wt == QuantType::IQ4_NL ? sizeof(quant::BlockIQ4_NL::qs) : sizeof(quant::BlockIQ4_XS::qs);
      const size_t bytes = quant_type_info(wt).type_size;
      for (int64_t r = 0; r < s.rows; ++r)
        for (size_t b = 0; b * bytes < *quant_row_bytes(wt, uint64_t(s.k)); ++b)
          std::memset(o.w.data() + r * o.wrow + b * bytes + qs, 0xFF, nqs);
    }
    std::vector<int> values;
    for (int64_t t = 0; t < s.tokens; ++t) values.push_back(t % 3 == 0 ? -128 : t % 3 == 1 ? 127 : -127);
    o.x = constant_activations(activation_type(wt), s.k, o.xrow, values);
    check_operands(wt, s, o, avx2_runners(wt));
  }
}

// Setting an environment switch for one scope.
TEST(KernelsGemm, KillSwitchesTurnItOff) {
  if (!gemm_available(QuantType::Q8_0)) GTEST_SKIP() << "no GEMM kernel on this CPU (needs AVX-512 VNNI)";
  {
    ScopedEnv e("BRISK_NO_GEMM", "1");
    EXPECT_FALSE(gemm_available(QuantType::Q8_0));
    EXPECT_FALSE(gemm_available(QuantType::Q4_0));
    EXPECT_THROW(check_shape(QuantType::Q8_0, {4, 32, 9}, 1), Error);
  }
  {
    ScopedEnv e("BRISK_NO_SIMD_DOT_Q4_0", "1");
    EXPECT_TRUE(gemm_available(QuantType::Q8_0));
    EXPECT_FALSE(gemm_available(QuantType::Q4_0));
  }
  {  // the AVX2 GEMM takes over, through the public entry points and their two-phase use
    ScopedEnv e("BRISK_NO_AVX512", "1");
    EXPECT_TRUE(gemm_available(QuantType::Q8_0));
    check_shape(QuantType::Q4_K, {13, 512, 21}, 3,
                {kPublic[0], packed_runner("gemm_rows, packed", gemm_packed_bytes, gemm_pack_tokens, gemm_rows)});
    {
      ScopedEnv v("BRISK_NO_AVX_VNNI", "1");  // the vpmaddubsw form
      EXPECT_EQ(gemm_isa(QuantType::Q8_0), Isa::avx2);
      check_shape(QuantType::Q8_0, {7, 256, 19}, 5);
    }
    ScopedEnv q("BRISK_NO_SIMD_DOT_Q4_0", "1");
    EXPECT_TRUE(gemm_available(QuantType::Q8_0));
    EXPECT_FALSE(gemm_available(QuantType::Q4_0));
  }
  for (const char* off : {"BRISK_NO_AVX2", "BRISK_NO_SIMD"}) {
    ScopedEnv e(off, "1");
    EXPECT_FALSE(gemm_available(QuantType::Q8_0)) << off;
    EXPECT_FALSE(gemm_available(QuantType::Q4_K)) << off;
  }
  EXPECT_TRUE(gemm_available(QuantType::Q8_0));
  EXPECT_FALSE(gemm_available(QuantType::F32));
}

TEST(KernelsGemm, RejectsBadShapes) {
  if (!gemm_available(QuantType::Q8_0)) GTEST_SKIP() << "no GEMM kernel on this CPU (needs AVX-512 VNNI)";
  std::vector<uint8_t> w(34 * 8), x(34 * 16);
  std::vector<float> y(64);
  const GemmParams ok{.weight_type = QuantType::Q8_0, .w = w.data(), .row_bytes = 34, .n_rows = 4, .k = 32,
                      .x_quant = x.data(), .x_stride = 34, .n_tokens = 12, .y = y.data(), .y_stride = 4};
  EXPECT_NO_THROW(gemm_rows(ok));
  GemmParams bad = ok;
  bad.k = 33;
  EXPECT_THROW(gemm_rows(bad), Error);
  bad = ok;
  bad.row_bytes = 30;
  EXPECT_THROW(gemm_rows(bad), Error);
  bad = ok;
  bad.x_stride = 20;
  EXPECT_THROW(gemm_rows(bad), Error);
  bad = ok;
  bad.y_stride = 3;
  EXPECT_THROW(gemm_rows(bad), Error);
  bad = ok;
  bad.n_rows = -1;
  EXPECT_THROW(gemm_rows(bad), Error);
  bad = ok;
  bad.weight_type = QuantType::F32;
  EXPECT_THROW(gemm_rows(bad), Error);
}

}  // namespace
}  // namespace brisk::kernels
