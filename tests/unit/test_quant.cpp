// Block formats against the GGUF reference vectors in shared/data/quant (bit-exact dequantize
// and quantize), K-quant round-trip error bounds, and every scalar dot product against a float
// dot of the dequantized operands.
#include <gtest/gtest.h>

#include "required_assets.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "random_values.h"
#include "core/error.h"
#include "quant/format.h"
#include "quant/iq_grids.h"
#include "quant/types.h"

namespace brisk {
namespace {

const std::string kQuantDir = std::string(BRISK_SHARED_DATA) + "/quant";

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

nlohmann::json load_index() {
  std::ifstream f(kQuantDir + "/index.json");
  return nlohmann::json::parse(f);
}

#define SKIP_WITHOUT_SHARED_DATA()                                                          \
  if (!std::filesystem::exists(kQuantDir + "/index.json"))                                  \
  BRISK_SKIP_MISSING_ASSET() << "reference vectors not found at " << kQuantDir                            \
               << " (shared/data/quant is only in the developers' checkout)"

const std::vector<QuantType> kAllFormats = {
    QuantType::F32,    QuantType::F16,     QuantType::BF16,   QuantType::Q4_0,   QuantType::Q4_1,
    QuantType::Q5_0,   QuantType::Q5_1,    QuantType::Q8_0,   QuantType::Q8_1,   QuantType::Q2_K,
    QuantType::Q3_K,   QuantType::Q4_K,    QuantType::Q5_K,   QuantType::Q6_K,   QuantType::Q8_K,
    QuantType::IQ1_S,  QuantType::IQ1_M,   QuantType::IQ2_XXS, QuantType::IQ2_XS, QuantType::IQ2_S,
    QuantType::IQ3_XXS, QuantType::IQ3_S,  QuantType::IQ4_NL, QuantType::IQ4_XS, QuantType::TQ1_0,
    QuantType::TQ2_0,  QuantType::MXFP4};

TEST(QuantIndex, MatchesTypeTable) {
  SKIP_WITHOUT_SHARED_DATA();
  nlohmann::json index = load_index();
  ASSERT_FALSE(index.empty());
  for (auto& [name, e] : index.items()) {
    auto t = quant_type_from_name(name);
    ASSERT_TRUE(t.has_value()) << name;
    const QuantTypeInfo& info = quant_type_info(*t);
    EXPECT_EQ(info.block_size, e.at("block_elems").get<uint32_t>()) << name;
    EXPECT_EQ(info.type_size, e.at("block_bytes").get<uint32_t>()) << name;
  }
}

TEST(QuantFormats, EveryFormatHasTraits) {
  for (QuantType t : kAllFormats) {
    const FormatTraits& f = format_traits(t);
    EXPECT_EQ(f.type, t);
    EXPECT_NE(f.dequantize_row, nullptr) << quant_type_info(t).name;
    EXPECT_NE(f.vec_dot, nullptr) << quant_type_info(t).name;
  }
  EXPECT_THROW(format_traits(QuantType::I32), Error);
}

TEST(QuantDequant, BitExactWithReference) {
  SKIP_WITHOUT_SHARED_DATA();
  int checked = 0;
  const nlohmann::json index = load_index();
  for (auto& [name, e] : index.items()) {
    if (!e.value("dequant", false)) continue;
    const QuantType t = *quant_type_from_name(name);
    const QuantTypeInfo& info = quant_type_info(t);
    const std::vector<uint8_t> blocks = read_bytes(kQuantDir + "/" + name + ".dequant.blocks");
    const std::vector<uint8_t> want = read_bytes(kQuantDir + "/" + name + ".dequant.f32");
    ASSERT_EQ(blocks.size() % info.type_size, 0u) << name;
    const int64_t n = int64_t(blocks.size() / info.type_size * info.block_size);
    ASSERT_EQ(want.size(), size_t(n) * 4) << name;
    std::vector<float> got(static_cast<size_t>(n));
    format_traits(t).dequantize_row(blocks.data(), got.data(), n);
    int mismatches = 0;
    for (int64_t i = 0; i < n; ++i) {
      uint32_t a, b;
      std::memcpy(&a, &got[size_t(i)], 4);
      std::memcpy(&b, want.data() + 4 * i, 4);
      if (a != b && mismatches++ < 3) {
        float wf;
        std::memcpy(&wf, &b, 4);
        ADD_FAILURE() << name << " element " << i << ": got " << got[size_t(i)] << " want " << wf;
      }
    }
    EXPECT_EQ(mismatches, 0) << name;
    ++checked;
  }
  EXPECT_GE(checked, 23);
}

TEST(QuantQuantize, BitExactWithReference) {
  SKIP_WITHOUT_SHARED_DATA();
  int checked = 0;
  const nlohmann::json index = load_index();
  for (auto& [name, e] : index.items()) {
    if (!e.value("quant", false)) continue;
    const QuantType t = *quant_type_from_name(name);
    const QuantTypeInfo& info = quant_type_info(t);
    const std::vector<uint8_t> in = read_bytes(kQuantDir + "/" + name + ".quant.f32");
    const std::vector<uint8_t> want = read_bytes(kQuantDir + "/" + name + ".quant.blocks");
    const int64_t n = int64_t(in.size() / 4);
    ASSERT_EQ(n % info.block_size, 0) << name;
    ASSERT_EQ(want.size(), size_t(n / info.block_size) * info.type_size) << name;
    std::vector<float> x(static_cast<size_t>(n));
    std::memcpy(x.data(), in.data(), in.size());
    ASSERT_NE(format_traits(t).quantize_row_ref, nullptr) << name;
    std::vector<uint8_t> got(want.size());
    format_traits(t).quantize_row_ref(x.data(), got.data(), n);
    int bad_blocks = 0;
    for (size_t b = 0; b < want.size() / info.type_size; ++b) {
      if (std::memcmp(got.data() + b * info.type_size, want.data() + b * info.type_size,
                      info.type_size) != 0 && bad_blocks++ < 3)
        ADD_FAILURE() << name << " block " << b << " differs";
    }
    EXPECT_EQ(bad_blocks, 0) << name;
    ++checked;
  }
  EXPECT_GE(checked, 9);
}

using test::gaussian;

// Quantize -> dequantize on gaussian data; the RMSE of every block, relative to the block's
// RMS, must stay under the format's bound (a 4-bit asymmetric code lands near 0.1, each extra
// bit halves it).
TEST(QuantKQuants, RoundTripErrorBounds) {
  struct Case { QuantType t; double bound; };
  for (const Case c : {Case{QuantType::Q4_K, 0.12}, Case{QuantType::Q5_K, 0.06},
                       Case{QuantType::Q6_K, 0.035}, Case{QuantType::Q8_K, 0.012}}) {
    const auto& f = format_traits(c.t);
    const auto& info = quant_type_info(c.t);
    const int64_t n = 256 * 64;
    std::vector<float> x = gaussian(size_t(n), 1234u + uint32_t(c.t));
    // a few blocks with a different scale and an offset, as real weight rows have
    for (int j = 0; j < 256; ++j) x[size_t(256 * 3 + j)] = x[size_t(256 * 3 + j)] * 0.01f + 0.02f;
    std::vector<uint8_t> q(size_t(n / 256) * info.type_size);
    f.quantize_row_ref(x.data(), q.data(), n);
    std::vector<float> y(static_cast<size_t>(n));
    f.dequantize_row(q.data(), y.data(), n);
    double worst = 0;
    for (int64_t b = 0; b < n / 256; ++b) {
      double se = 0, ss = 0;
      for (int64_t j = b * 256; j < b * 256 + 256; ++j) {
        se += double(y[size_t(j)] - x[size_t(j)]) * (y[size_t(j)] - x[size_t(j)]);
        ss += double(x[size_t(j)]) * x[size_t(j)];
      }
      worst = std::max(worst, std::sqrt(se / ss));
    }
    EXPECT_LT(worst, c.bound) << info.name;
    EXPECT_GT(worst, c.bound / 20) << info.name << ": suspiciously exact";
  }
}

// Reference quantizers that have no shared vectors (F16, Q8_1, Q8_K) round-trip to within
// their resolution.
TEST(QuantQuantize, ActivationFormatsRoundTrip) {
  for (QuantType t : {QuantType::F16, QuantType::Q8_1, QuantType::Q8_K}) {
    const auto& f = format_traits(t);
    const auto& info = quant_type_info(t);
    const int64_t n = 1024;
    std::vector<float> x = gaussian(size_t(n), 7);
    std::vector<uint8_t> q(size_t(n / info.block_size) * info.type_size);
    f.quantize_row_ref(x.data(), q.data(), n);
    std::vector<float> y(static_cast<size_t>(n));
    f.dequantize_row(q.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[size_t(i)], x[size_t(i)], 0.03) << info.name;
  }
}

// Random blocks whose dequantized values are finite and moderate (rejection per block).
std::vector<uint8_t> random_blocks(QuantType t, int64_t n, uint32_t seed) {
  const auto& info = quant_type_info(t);
  const auto& f = format_traits(t);
  std::mt19937 rng(seed);
  const size_t nb = size_t(n / info.block_size);
  std::vector<uint8_t> q(nb * info.type_size);
  std::vector<float> tmp(info.block_size);
  for (size_t b = 0; b < nb; ++b) {
    uint8_t* blk = q.data() + b * info.type_size;
    for (int attempt = 0;; ++attempt) {
      for (size_t k = 0; k < info.type_size; ++k) blk[k] = uint8_t(rng());
      f.dequantize_row(blk, tmp.data(), info.block_size);
      bool ok = true;
      for (float v : tmp) ok &= std::isfinite(v) && std::fabs(v) < 1e3f;
      if (ok) break;
      if (attempt > 10000) throw Error(std::string("no finite random block for ") + std::string(info.name));
    }
  }
  return q;
}

TEST(QuantVecDot, ScalarMatchesFloatReference) {
  for (QuantType t : kAllFormats) {
    const auto& f = format_traits(t);
    const auto& info = quant_type_info(t);
    const auto& act = format_traits(f.vec_dot_type);
    const auto& act_info = quant_type_info(f.vec_dot_type);
    const int64_t n = 256 * 4;
    std::vector<uint8_t> w;
    if (f.quantize_row_ref) {
      std::vector<float> x = gaussian(size_t(n), 99u + uint32_t(t));
      w.resize(size_t(n / info.block_size) * info.type_size);
      f.quantize_row_ref(x.data(), w.data(), n);
    } else {
      w = random_blocks(t, n, 5u + uint32_t(t));
    }
    std::vector<float> xa = gaussian(size_t(n), 42);
    std::vector<uint8_t> a(size_t(n / act_info.block_size) * act_info.type_size);
    act.quantize_row_ref(xa.data(), a.data(), n);
    std::vector<float> wf(static_cast<size_t>(n)), af(static_cast<size_t>(n));
    f.dequantize_row(w.data(), wf.data(), n);
    act.dequantize_row(a.data(), af.data(), n);
    double ref = 0, mag = 0;
    for (int64_t i = 0; i < n; ++i) {
      ref += double(wf[size_t(i)]) * af[size_t(i)];
      mag += std::fabs(double(wf[size_t(i)]) * af[size_t(i)]);
    }
    float got = 0;
    f.vec_dot(n, &got, w.data(), a.data());
    // Q8_1's precomputed sum s is stored as fp16, so the min term carries its rounding.
    const double rel = f.vec_dot_type == QuantType::Q8_1 ? 2e-3 : 2e-5;
    EXPECT_NEAR(got, ref, rel * mag + 1e-6) << info.name;
    EXPECT_GT(mag, 0) << info.name;
  }
}

// The codebooks are sorted by packed code: a mistyped entry breaks the order.
TEST(QuantIqGrids, CodebooksStrictlyIncreasing) {
  const int sizes[quant::kIqGridCount] = {256, 512, 1024, 256, 512, 2048};
  for (int g = 0; g < quant::kIqGridCount; ++g) {
    ASSERT_EQ(quant::iq_grid_size(g), sizes[g]);
    for (int i = 1; i < sizes[g]; ++i)
      ASSERT_LT(quant::iq_grid_key(g, i - 1), quant::iq_grid_key(g, i)) << "grid " << g << " entry " << i;
  }
  // spot values of the expanded tables (first and last entries)
  EXPECT_EQ(quant::iq2xxs_grid()[0], 0x0808080808080808ull);
  EXPECT_EQ(quant::iq2xxs_grid()[255], 0x2b2b2b1908081908ull);
  EXPECT_EQ(quant::iq3xxs_grid()[0], 0x04040404u);
  EXPECT_EQ(quant::iq1s_grid()[0], 0xffffffffffffffffull);
  EXPECT_EQ(quant::iq_ksigns(1), 0x81);
  EXPECT_EQ(quant::iq_ksigns(3), 0x03);
}

}  // namespace
}  // namespace brisk

namespace brisk {
namespace {

// Non-finite input (a diverged activation, a corrupt checkpoint) must not reach an undefined
// float -> int conversion in any reference quantizer; under the asan preset UBSan checks this.
TEST(QuantQuantize, NonFiniteInputStaysDefined) {
  for (QuantType t : kAllFormats) {
    const auto& f = format_traits(t);
    if (!f.quantize_row_ref) continue;
    const auto& info = quant_type_info(t);
    const int64_t n = 512;
    std::vector<float> x = gaussian(size_t(n), 3);
    x[5] = std::nanf("");
    x[40] = INFINITY;
    x[300] = -INFINITY;
    std::vector<uint8_t> q(size_t(n / info.block_size) * info.type_size);
    f.quantize_row_ref(x.data(), q.data(), n);
    std::vector<float> y(static_cast<size_t>(n));
    f.dequantize_row(q.data(), y.data(), n);
    SUCCEED() << info.name;
  }
}

}  // namespace
}  // namespace brisk
