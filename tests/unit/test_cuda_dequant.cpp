// The CUDA kernels' weight decoding (kernels/cuda/dequant.cuh) runs on the host too: check
// every device format against the reference dequantizer on random rows, without a GPU.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cuda/dequant.cuh"
#include "quant/types.h"

namespace brisk {
namespace {

using cuda::DevFormat;
using cuda::Fmt;

template <DevFormat F>
void check_format(QuantType t, uint64_t seed) {
  const int64_t n = 512;
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> src(static_cast<size_t>(n));
  for (float& v : src) v = dist(rng);
  src[7] = 9.0f;  // an outlier so that scales differ between blocks
  const size_t rb = size_t(quant_row_bytes(t, uint64_t(n)).value());
  std::vector<uint8_t> row(rb);
  cpu::row_from_f32(t, src.data(), row.data(), n);
  std::vector<float> want(static_cast<size_t>(n));
  cpu::row_to_f32(t, row.data(), want.data(), n);
  for (int64_t c = 0; c < n / 8; ++c) {
    float got[8];
    Fmt<F>::load8(row.data(), c, got);
    for (int k = 0; k < 8; ++k)
      ASSERT_FLOAT_EQ(got[k], want[size_t(8 * c + k)]) << quant_type_info(t).name << " element " << 8 * c + k;
  }
}

TEST(CudaDequant, F32) { check_format<DevFormat::f32>(QuantType::F32, 1); }
TEST(CudaDequant, F16) { check_format<DevFormat::f16>(QuantType::F16, 2); }
TEST(CudaDequant, BF16) { check_format<DevFormat::bf16>(QuantType::BF16, 3); }
TEST(CudaDequant, Q8_0) { check_format<DevFormat::q8_0>(QuantType::Q8_0, 4); }
TEST(CudaDequant, Q4_0) { check_format<DevFormat::q4_0>(QuantType::Q4_0, 5); }
TEST(CudaDequant, Q4_K) { check_format<DevFormat::q4_k>(QuantType::Q4_K, 6); }
TEST(CudaDequant, Q6_K) { check_format<DevFormat::q6_k>(QuantType::Q6_K, 7); }

TEST(CudaDequant, HalfSpecialValues) {
  EXPECT_EQ(cuda::half_bits_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(cuda::half_bits_to_f32(0xc000), -2.0f);
  EXPECT_EQ(cuda::half_bits_to_f32(0x0001), 5.9604644775390625e-8f);  // smallest subnormal
  EXPECT_TRUE(std::isinf(cuda::half_bits_to_f32(0x7c00)));
}

}  // namespace
}  // namespace brisk
