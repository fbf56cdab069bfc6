// The CUDA weight device layout and its decoding (kernels/cuda/dequant.cuh) run on the host
// too: check every device format against the reference dequantizer on random rows, without a GPU.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cuda/dequant.cuh"
#include "quant/types.h"

namespace brisk {
namespace {

using cuda::Dev;
using cuda::DevFormat;

// Three rows of 512 random values: stored rows -> device layout (repacked where the layout
// differs) -> Dev<F>::load8, against the reference dequantizer of the stored rows.
template <DevFormat F>
void check_format(QuantType t, uint64_t seed) {
  const int64_t n = 512, rows = 3;
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> src(static_cast<size_t>(n * rows));
  for (float& v : src) v = dist(rng);
  src[7] = 9.0f;  // an outlier so that scales differ between blocks
  const size_t rb = size_t(quant_row_bytes(t, uint64_t(n)).value());
  std::vector<uint8_t> stored(rb * size_t(rows));
  for (int64_t r = 0; r < rows; ++r) cpu::row_from_f32(t, src.data() + r * n, stored.data() + size_t(r) * rb, n);
  const cuda::DevLayout L = cuda::dev_layout(F, n, rows);
  ASSERT_EQ(L.qs_row % 16, 0u);
  ASSERT_EQ(L.sc_offset % 16, 0u);
  std::vector<uint8_t> dev(L.bytes, 0xAB);
  if constexpr (F == DevFormat::q8_0 || F == DevFormat::q4_0 || F == DevFormat::q5_0 || F == DevFormat::q6_k) {
    ASSERT_TRUE(L.repacked);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t b = 0; b < n / L.block; ++b) cuda::repack_block_at<F>(stored.data(), rb, dev.data(), L, r, b);
  } else {
    ASSERT_FALSE(L.repacked);
    ASSERT_EQ(L.bytes, stored.size());
    dev = stored;
  }
  std::vector<float> want(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    cpu::row_to_f32(t, stored.data() + size_t(r) * rb, want.data(), n);
    const uint8_t* qs = dev.data() + size_t(r) * L.qs_row;
    const uint8_t* sc = dev.data() + L.sc_offset + size_t(r) * L.sc_row;
    for (int64_t c = 0; c < n / 8; ++c) {
      float got[8];
      Dev<F>::load8(qs, sc, c, got);
      for (int k = 0; k < 8; ++k)
        ASSERT_FLOAT_EQ(got[k], want[size_t(8 * c + k)])
            << quant_type_info(t).name << " row " << r << " element " << 8 * c + k;
    }
  }
}

TEST(CudaDequant, F32) { check_format<DevFormat::f32>(QuantType::F32, 1); }
TEST(CudaDequant, F16) { check_format<DevFormat::f16>(QuantType::F16, 2); }
TEST(CudaDequant, BF16) { check_format<DevFormat::bf16>(QuantType::BF16, 3); }
TEST(CudaDequant, Q8_0) { check_format<DevFormat::q8_0>(QuantType::Q8_0, 4); }
TEST(CudaDequant, Q4_0) { check_format<DevFormat::q4_0>(QuantType::Q4_0, 5); }
TEST(CudaDequant, Q5_0) { check_format<DevFormat::q5_0>(QuantType::Q5_0, 9); }
TEST(CudaDequant, Q4_K) { check_format<DevFormat::q4_k>(QuantType::Q4_K, 6); }
TEST(CudaDequant, Q6_K) { check_format<DevFormat::q6_k>(QuantType::Q6_K, 7); }
TEST(CudaDequant, Q5_K) { check_format<DevFormat::q5_k>(QuantType::Q5_K, 8); }

TEST(CudaDequant, HalfSpecialValues) {
  EXPECT_EQ(cuda::half_bits_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(cuda::half_bits_to_f32(0xc000), -2.0f);
  EXPECT_EQ(cuda::half_bits_to_f32(0x0001), 5.9604644775390625e-8f);  // smallest subnormal
  EXPECT_TRUE(std::isinf(cuda::half_bits_to_f32(0x7c00)));
}

}  // namespace
}  // namespace brisk
