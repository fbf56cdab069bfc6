// The repacked Q4_0 / Q5_0 / Q8_0 row layouts (quant/repack.h) and the decode kernels that read them:
// conversions are exact permutations, the layouts dequantize to the stored values, and the
// GEMV over repacked rows gives bit for bit what it gives over the stored rows, for 1..8
// tokens and rows with whole groups, partial groups and partial quads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "random_values.h"
#include "core/error.h"
#include "kernels/cpu/dot.h"
#include "quant/blocks.h"
#include "quant/format.h"
#include "quant/repack.h"
#include "scoped_env.h"

namespace brisk {
namespace {

// Block counts: fewer than a quad, whole quads, partial quads, one and several groups.
const int64_t kBlockCounts[] = {1, 2, 3, 4, 5, 7, 8, 12, 13, 15, 16, 17, 20, 28, 29, 31, 32, 35, 48, 152};
// Every row length of one or two groups (each has its own short-row GEMV), then longer rows.
const std::vector<int64_t> kGemvBlockCounts = [] {
  std::vector<int64_t> v;
  for (int64_t nb = 1; nb <= 33; ++nb) v.push_back(nb);
  for (int64_t nb : {35, 48, 152}) v.push_back(nb);
  return v;
}();

using test::gaussian;

// n_rows stored rows of k elements quantized from random values.
std::vector<uint8_t> stored_rows(QuantType t, int64_t k, int64_t n_rows, uint32_t seed) {
  const size_t rb = size_t(*quant_row_bytes(t, uint64_t(k)));
  std::vector<uint8_t> w(rb * size_t(n_rows));
  for (int64_t r = 0; r < n_rows; ++r) {
    const std::vector<float> f = gaussian(size_t(k), seed + uint32_t(r));
    format_traits(t).quantize_row_ref(f.data(), w.data() + size_t(r) * rb, k);
  }
  return w;
}

TEST(QuantRepack, ConversionsAreExactInverses) {
  for (QuantType t : {QuantType::Q4_0, QuantType::Q5_0, QuantType::Q8_0}) {
    const QuantType r = *quant::repacked_type(t);
    EXPECT_EQ(quant::stored_type(r), t);
    EXPECT_TRUE(quant::is_repacked(r));
    EXPECT_FALSE(quant::is_repacked(t));
    for (int64_t nb : kBlockCounts) {
      const size_t bytes = size_t(nb) * quant_type_info(t).type_size;
      std::mt19937 rng{uint32_t(nb)};
      std::vector<uint8_t> src(bytes), packed(bytes), back(bytes);
      for (auto& b : src) b = uint8_t(rng());  // any bytes: the layouts are permutations of bits
      quant::repack_row(t, src.data(), packed.data(), nb);
      quant::unrepack_row(r, packed.data(), back.data(), nb);
      EXPECT_EQ(back, src) << quant_type_info(t).name << " nb=" << nb;
      // Q8_0 rearranges every group, a partial last one too; Q4_0 / Q5_0 whole quads only.
      if (nb >= (t == QuantType::Q8_0 ? 1 : 4)) {
        EXPECT_NE(packed, src) << quant_type_info(t).name << " nb=" << nb;
      } else {
        EXPECT_EQ(packed, src) << quant_type_info(t).name << " nb=" << nb;
      }
    }
  }
  EXPECT_FALSE(quant::repacked_type(QuantType::Q4_K).has_value());
  EXPECT_THROW(quant::unrepack_row(QuantType::Q4_0, nullptr, nullptr, 1), Error);
}

// Q8_0_R16 round trips for every group size m = 1..16 and rows of 1..40 blocks, and the byte
// positions of quant/repack.h: step j, lane l at 4 (m j + l) holds qs[4j..4j+3] ^ 0x80 of block
// B(l) (a whole group's lane order, a partial group's block order), then the m scales.
TEST(QuantRepack, Q8InterleavedLayout) {
  constexpr int kLaneBlock[16] = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};
  constexpr size_t kB = sizeof(quant::BlockQ8_0);
  for (int64_t nb = 1; nb <= 40; ++nb) {
    const size_t bytes = size_t(nb) * kB;
    std::mt19937 rng{uint32_t(nb) + 100u};
    std::vector<uint8_t> src(bytes), packed(bytes), back(bytes);
    for (auto& b : src) b = uint8_t(rng());
    quant::repack_row(QuantType::Q8_0, src.data(), packed.data(), nb);
    quant::unrepack_row(QuantType::Q8_0_R16, packed.data(), back.data(), nb);
    ASSERT_EQ(back, src) << "nb=" << nb;
    for (int64_t b0 = 0; b0 < nb; b0 += 16) {
      const int m = int(std::min<int64_t>(16, nb - b0));
      const uint8_t* group = packed.data() + size_t(b0) * kB;
      for (int l = 0; l < m; ++l) {
        const size_t block = size_t(b0 + (m == 16 ? kLaneBlock[l] : l));
        const uint8_t* stored = src.data() + block * kB;
        for (int j = 0; j < 8; ++j)
          for (int i = 0; i < 4; ++i)
            ASSERT_EQ(group[4 * (m * j + l) + i], stored[2 + 4 * j + i] ^ 0x80) << "nb=" << nb << " lane " << l;
        ASSERT_EQ(0, std::memcmp(group + 32 * m + 2 * l, stored, 2)) << "nb=" << nb << " scale of lane " << l;
      }
    }
  }
}

TEST(QuantRepack, RepackedLayoutsAreNotFileFormats) {
  EXPECT_EQ(quant_type_info(uint32_t(QuantType::Q4_0_R16)), nullptr);
  EXPECT_FALSE(quant_type_from_name("Q4_0_R16").has_value());
  EXPECT_EQ(quant_type_info(QuantType::Q5_0_R16).type_size, quant_type_info(QuantType::Q5_0).type_size);
  EXPECT_EQ(*quant_row_bytes(QuantType::Q4_0_R16, 896), *quant_row_bytes(QuantType::Q4_0, 896));
  EXPECT_EQ(quant_type_info(uint32_t(QuantType::Q8_0_R16)), nullptr);
  EXPECT_EQ(*quant_row_bytes(QuantType::Q8_0_R16, 896), *quant_row_bytes(QuantType::Q8_0, 896));
}

TEST(QuantRepack, DequantizesAndQuantizesLikeTheStoredFormat) {
  for (QuantType t : {QuantType::Q4_0, QuantType::Q5_0, QuantType::Q8_0}) {
    const QuantType r = *quant::repacked_type(t);
    for (int64_t nb : kBlockCounts) {
      const int64_t k = 32 * nb;
      const std::vector<float> f = gaussian(size_t(k), uint32_t(nb) + 7);
      const size_t bytes = size_t(*quant_row_bytes(t, uint64_t(k)));
      std::vector<uint8_t> qs(bytes), qr(bytes), expect(bytes);
      format_traits(t).quantize_row_ref(f.data(), qs.data(), k);
      format_traits(r).quantize_row_ref(f.data(), qr.data(), k);
      quant::repack_row(t, qs.data(), expect.data(), nb);
      EXPECT_EQ(qr, expect) << quant_type_info(t).name << " nb=" << nb;
      std::vector<float> ds(static_cast<size_t>(k)), dr(static_cast<size_t>(k));
      format_traits(t).dequantize_row(qs.data(), ds.data(), k);
      format_traits(r).dequantize_row(qr.data(), dr.data(), k);
      EXPECT_EQ(ds, dr) << quant_type_info(t).name << " nb=" << nb;
    }
  }
}

// gemv_rows_multi over repacked rows == over the stored rows, bit for bit, where this CPU has
// the repacked kernel (elsewhere the layouts go through the reference and agree to rounding).
TEST(QuantRepack, GemvOverRepackedRowsMatchesStoredBitExact) {
  for (QuantType t : {QuantType::Q4_0, QuantType::Q5_0, QuantType::Q8_0}) {
    const QuantType r = *quant::repacked_type(t);
    const bool fast = kernels::cpu_weight_layout(t).has_value();
    for (int64_t nb : kGemvBlockCounts) {
      const int64_t k = 32 * nb, n_rows = 11;
      const size_t rb = size_t(*quant_row_bytes(t, uint64_t(k)));
      const std::vector<uint8_t> ws = stored_rows(t, k, n_rows, uint32_t(nb) * 31u);
      std::vector<uint8_t> wr(ws.size());
      for (int64_t row = 0; row < n_rows; ++row)
        quant::repack_row(t, ws.data() + size_t(row) * rb, wr.data() + size_t(row) * rb, nb);
      for (int n_tok = 1; n_tok <= 8; ++n_tok) {
        const size_t xb = kernels::activation_row_bytes(t, k);
        std::vector<uint8_t> x(xb * size_t(n_tok));
        for (int tok = 0; tok < n_tok; ++tok) {
          const std::vector<float> xf = gaussian(size_t(k), 900u + uint32_t(tok));
          kernels::select_quantize_activation(QuantType::Q8_0)(xf.data(), x.data() + size_t(tok) * xb, k);
        }
        std::vector<float> ys(size_t(n_rows) * size_t(n_tok)), yr(ys.size());
        auto gemv = [&](QuantType type, const std::vector<uint8_t>& w, std::vector<float>& y) {
          kernels::gemv_rows_multi({.weight_type = type, .w = w.data(), .row_bytes = rb, .n_rows = n_rows, .k = k,
                                    .x_quant = x.data(), .x_stride = xb, .n_tokens = n_tok, .y = y.data(),
                                    .y_stride = n_rows});
        };
        gemv(t, ws, ys);
        gemv(r, wr, yr);
        for (size_t i = 0; i < ys.size(); ++i) {
          if (fast) {
            uint32_t a, b;
            std::memcpy(&a, &ys[i], 4);
            std::memcpy(&b, &yr[i], 4);
            ASSERT_EQ(a, b) << quant_type_info(t).name << " nb=" << nb << " tokens=" << n_tok << " i=" << i;
          } else {
            ASSERT_NEAR(ys[i], yr[i], 1e-4 * (std::fabs(ys[i]) + 1)) << quant_type_info(t).name << " nb=" << nb;
          }
        }
      }
    }
  }
}

// Speculative decoding relies on each token's result of a multi-token GEMV being the 1-token
// GEMV's bits: Q8_0_R16 rows (Qwen2.5-0.5B's 896 and 4864 among them) for 1..8 tokens, with
// the GEMVs of many tokens over long rows in one pass over the weights or in several
// (BRISK_NO_GEMV_TOKEN_PASSES).
TEST(QuantRepack, Q8GemvMultiTokenIsBitIdenticalToOneToken) {
  for (int64_t nb : {1, 13, 16, 28, 33, 152, 160, 300})
   for (bool one_pass : {false, true}) {
    std::unique_ptr<ScopedEnv> off;
    if (one_pass) off = std::make_unique<ScopedEnv>("BRISK_NO_GEMV_TOKEN_PASSES", "1");
    const int64_t k = 32 * nb, n_rows = 9;
    const size_t rb = size_t(*quant_row_bytes(QuantType::Q8_0, uint64_t(k)));
    std::vector<uint8_t> w = stored_rows(QuantType::Q8_0, k, n_rows, uint32_t(nb) * 7u);
    quant::repack_rows_in_place(QuantType::Q8_0, w.data(), n_rows, rb, nb);
    const size_t xb = kernels::activation_row_bytes(QuantType::Q8_0, k);
    std::vector<uint8_t> x(xb * 8);
    for (int tok = 0; tok < 8; ++tok) {
      const std::vector<float> xf = gaussian(size_t(k), 500u + uint32_t(tok));
      kernels::select_quantize_activation(QuantType::Q8_0)(xf.data(), x.data() + size_t(tok) * xb, k);
    }
    auto gemv = [&](const uint8_t* xs, int n_tok) {
      std::vector<float> y(size_t(n_rows) * size_t(n_tok));
      kernels::gemv_rows_multi({.weight_type = QuantType::Q8_0_R16, .w = w.data(), .row_bytes = rb, .n_rows = n_rows,
                                .k = k, .x_quant = xs, .x_stride = xb, .n_tokens = n_tok, .y = y.data(),
                                .y_stride = n_rows});
      return y;
    };
    std::vector<std::vector<float>> one(8);
    for (int tok = 0; tok < 8; ++tok) one[size_t(tok)] = gemv(x.data() + size_t(tok) * xb, 1);
    for (int n_tok = 2; n_tok <= 8; ++n_tok) {
      const std::vector<float> y = gemv(x.data(), n_tok);
      for (int tok = 0; tok < n_tok; ++tok)
        ASSERT_EQ(0, std::memcmp(y.data() + size_t(tok * n_rows), one[size_t(tok)].data(), sizeof(float) * n_rows))
            << "nb=" << nb << " tokens=" << n_tok << " token " << tok << (one_pass ? " one pass" : "");
    }
  }
}

TEST(QuantRepack, KillSwitchesKeepTheStoredLayout) {
  {
    ScopedEnv off("BRISK_NO_REPACK", "1");
    EXPECT_FALSE(kernels::cpu_weight_layout(QuantType::Q4_0).has_value());
  }
  {
    ScopedEnv off("BRISK_NO_AVX512_VBMI", "1");
    EXPECT_FALSE(kernels::cpu_weight_layout(QuantType::Q5_0).has_value());
  }
  {
    ScopedEnv off("BRISK_NO_REPACK", "1");
    EXPECT_FALSE(kernels::cpu_weight_layout(QuantType::Q8_0).has_value());
  }
  EXPECT_FALSE(kernels::cpu_weight_layout(QuantType::Q4_K).has_value());
}

}  // namespace
}  // namespace brisk
