// Prefill GEMM (kernels/cpu/gemm.h) against the scalar per-row dot product on random shapes:
// token counts and row counts that are not multiples of the 4-row x 16-token tiles, odd block counts, row
// and output strides wider than the data; plus the kill switches and shape errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/flags.h"
#include "core/fp16.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/gemm.h"
#include "quant/format.h"
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
double magnitude(QuantType wt, const void* w, const void* x, int64_t k) {
  std::vector<float> wf(static_cast<size_t>(k)), xf(static_cast<size_t>(k));
  format_traits(wt).dequantize_row(w, wf.data(), k);
  format_traits(activation_type(wt)).dequantize_row(x, xf.data(), k);
  double m = 0;
  for (int64_t i = 0; i < k; ++i) m += std::fabs(double(wf[size_t(i)]) * xf[size_t(i)]);
  return m;
}

struct Shape {
  int64_t rows, k, tokens;
};

void check_shape(QuantType wt, const Shape& s, uint32_t seed) {
  const size_t wrow = *quant_row_bytes(wt, uint64_t(s.k)) + 6;  // padded row stride
  const size_t xrow = activation_row_bytes(wt, s.k) + 2;
  const int64_t y_stride = s.rows + 3;
  const auto w = random_matrix(wt, s.rows, s.k, wrow, seed);
  const auto x = random_matrix(activation_type(wt), s.tokens, s.k, xrow, seed + 1);
  std::vector<float> y(size_t(s.tokens * y_stride), -7.f);
  gemm_rows({.weight_type = wt, .w = w.data(), .row_bytes = wrow, .n_rows = s.rows, .k = s.k,
             .x_quant = x.data(), .x_stride = xrow, .n_tokens = s.tokens, .y = y.data(), .y_stride = y_stride});
  const VecDotFn ref = format_traits(wt).vec_dot;
  for (int64_t t = 0; t < s.tokens; ++t) {
    for (int64_t r = 0; r < y_stride; ++r) {
      const float got = y[size_t(t * y_stride + r)];
      if (r >= s.rows) {
        ASSERT_EQ(got, -7.f) << "wrote outside the rows at token " << t << " column " << r;
        continue;
      }
      const uint8_t* wr = w.data() + size_t(r) * wrow;
      const uint8_t* xr = x.data() + size_t(t) * xrow;
      float want = 0;
      ref(s.k, &want, wr, xr);
      const double tol = 2e-6 * magnitude(wt, wr, xr, s.k) + 1e-30;
      ASSERT_NEAR(got, want, tol) << quant_type_info(wt).name << " rows " << s.rows << " k " << s.k << " tokens "
                                  << s.tokens << " at token " << t << " row " << r;
    }
  }
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

// Setting an environment switch for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    setenv(name, value, 1);
    flags_reload();
  }
  ~ScopedEnv() {
    unsetenv(name_);
    flags_reload();
  }

 private:
  const char* name_;
};

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
  {
    ScopedEnv e("BRISK_NO_AVX512", "1");
    EXPECT_FALSE(gemm_available(QuantType::Q8_0));
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
