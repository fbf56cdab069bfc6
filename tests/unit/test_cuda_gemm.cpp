// The CUDA prefill GEMM (BF16 tensor cores, weights dequantized per matmul) against a
// double-precision product of the dequantized weights and the unrounded activations, over
// formats and shapes (strided operands, bias, a weight larger than the BF16 scratch); the
// device-side greedy pick against the host sampler's rule; greedy generation with the pick on
// the device against the same generation sampled on the host. Skips without a CUDA build, a
// GPU or (GEMM tests) cuBLAS.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "random_values.h"
#include "scoped_env.h"
#include "backend/backend.h"
#include "core/error.h"
#include "core/flags.h"
#include "kernels/cpu/ops.h"
#include "runtime/engine_api.h"
#include "runtime/generate.h"
#include "runtime/sampler.h"
#ifdef BRISK_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_devices.h"
#include "cuda_fixture.h"
#endif

namespace brisk {
namespace {

#ifndef BRISK_HAVE_CUDA
TEST(CudaGemm, Ops) { GTEST_SKIP() << "CUDA backend not built"; }
#else

std::unique_ptr<Backend> cuda_or_null() {
  std::string reason;
  if (cuda::enumerate_devices(&reason).empty()) return nullptr;
  return make_cuda_backend(0);
}

std::vector<float> randn(size_t n, uint32_t seed) { return test::gaussian(n, seed); }

// A weight of n_out rows that repeats `distinct` random rows (cheap to make when large).
struct HostWeight {
  std::vector<uint8_t> bytes;
  std::vector<float> rows;  // [distinct, n_in] dequantized
  int64_t distinct = 0;
  Weight w;
  const float* row(int64_t r) const { return rows.data() + size_t(r % distinct) * size_t(w.n_in); }
};

HostWeight make_weight(QuantType t, int64_t n_out, int64_t n_in, int64_t distinct, uint32_t seed) {
  HostWeight h;
  h.distinct = std::min(distinct, n_out);
  const size_t rb = size_t(quant_row_bytes(t, uint64_t(n_in)).value());
  const std::vector<float> f = randn(size_t(h.distinct * n_in), seed);
  std::vector<uint8_t> pool(rb * size_t(h.distinct));
  h.rows.resize(f.size());
  for (int64_t r = 0; r < h.distinct; ++r) {
    cpu::row_from_f32(t, f.data() + r * n_in, pool.data() + size_t(r) * rb, n_in);
    cpu::row_to_f32(t, pool.data() + size_t(r) * rb, h.rows.data() + size_t(r * n_in), n_in);
  }
  h.bytes.resize(rb * size_t(n_out));
  for (int64_t r = 0; r < n_out; ++r)
    std::copy(pool.begin() + ptrdiff_t(size_t(r % h.distinct) * rb), pool.begin() + ptrdiff_t(size_t(r % h.distinct + 1) * rb),
              h.bytes.begin() + ptrdiff_t(size_t(r) * rb));
  h.w = Weight{.type = t, .n_in = n_in, .n_out = n_out, .row_bytes = rb, .data = h.bytes.data()};
  return h;
}

// Runs out = x . W^T (+ bias) on the backend with strided x / out (extra columns untouched) and
// checks rows `check` of every token against the unrounded double product.
void check_gemm(Backend& be, const HostWeight& hw, int64_t n_tok, bool bias_on, const std::vector<int64_t>& check,
                const std::string& what) {
  const int64_t n_in = hw.w.n_in, n_out = hw.w.n_out, xs = n_in + 8, os = n_out + 5;
  std::vector<float> x = randn(size_t(n_tok * xs), 21);
  const std::vector<float> bias = randn(size_t(n_out), 22);
  auto* dx = static_cast<float*>(be.alloc(sizeof(float) * x.size()));
  auto* dout = static_cast<float*>(be.alloc(sizeof(float) * size_t(n_tok * os)));
  be.copy(dx, x.data(), sizeof(float) * x.size());
  std::vector<float> sentinel(size_t(n_tok * os), 7.0f);
  be.copy(dout, sentinel.data(), sizeof(float) * sentinel.size());
  be.matmul({.out = Mat{.data = dout, .rows = n_tok, .cols = n_out, .stride = os},
             .x = Mat{.data = dx, .rows = n_tok, .cols = n_in, .stride = xs},
             .w = hw.w,
             .bias = bias_on ? bias.data() : nullptr});
  std::vector<float> got(sentinel.size());
  be.copy(got.data(), dout, sizeof(float) * got.size());
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t c = n_out; c < os; ++c) ASSERT_EQ(got[size_t(t * os + c)], 7.0f) << what << ": padding written";
    for (int64_t r : check) {
      const float* w = hw.row(r);
      double want = bias_on ? bias[size_t(r)] : 0.0, mag = 0.0;
      for (int64_t i = 0; i < n_in; ++i) {
        const double p = double(w[i]) * double(x[size_t(t * xs + i)]);
        want += p;
        mag += std::fabs(p);
      }
      // BF16 weights and activations: 2^-8 relative per product at most, FP32 sums.
      ASSERT_NEAR(got[size_t(t * os + r)], want, 6e-3 * mag + 1e-4) << what << " token " << t << " row " << r;
    }
  }
  be.free(dx);
  be.free(dout);
}

class CudaGemm : public ::testing::TestWithParam<QuantType> {};

TEST_P(CudaGemm, MatchesUnroundedProduct) {
  auto be = cuda_or_null();
  if (!be) GTEST_SKIP() << "no CUDA device";
  if (!cuda_has_gemm(*be)) GTEST_SKIP() << "no tensor-core GEMM in this build (cuBLAS missing or BRISK_NO_CUDA_GEMM)";
  const QuantType t = GetParam();
  struct Shape { int64_t n_tok, n_in, n_out; bool bias; };
  std::vector<HostWeight> keep;
  for (const Shape s : {Shape{9, 256, 40, true}, Shape{64, 1024, 300, false}, Shape{130, 512, 77, true},
                        Shape{512, 2048, 96, false}}) {
    keep.push_back(make_weight(t, s.n_out, s.n_in, s.n_out, uint32_t(s.n_in * 3 + s.n_out)));
    std::vector<int64_t> rows;
    for (int64_t r = 0; r < s.n_out; ++r) rows.push_back(r);
    check_gemm(*be, keep.back(), s.n_tok, s.bias,  rows,
               str_cat(quant_type_info(t).name, " [", s.n_tok, "x", s.n_in, "] x [", s.n_out, "]"));
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaGemm,
                         ::testing::Values(QuantType::F32, QuantType::F16, QuantType::BF16, QuantType::Q8_0, QuantType::Q4_0,
                                           QuantType::Q5_0, QuantType::Q4_K, QuantType::Q6_K, QuantType::Q5_K),
                         [](const auto& info) { return std::string(quant_type_info(info.param).name); });

// A Q8_0 weight of 8200 x 8192 (67 M elements) is larger than the 64 M-element BF16 scratch:
// it is dequantized and multiplied in two chunks of rows (4224 + 3976: equal halves rounded up to
// 128 rows); rows on both sides of the seam agree.
TEST(CudaGemmChunks, WeightLargerThanScratch) {
  auto be = cuda_or_null();
  if (!be) GTEST_SKIP() << "no CUDA device";
  if (!cuda_has_gemm(*be)) GTEST_SKIP() << "no tensor-core GEMM in this build";
  const HostWeight hw = make_weight(QuantType::Q8_0, 8200, 8192, 61, 5);
  const int64_t seam = 4224;
  check_gemm(*be, hw, 12, true, {0, 1, seam - 2, seam - 1, seam, seam + 1, 8191, 8192, 8198, 8199},
             "Q8_0 [12x8192] x [8200]");
}

// matmuls() of three BF16 weights of one shape on one input (an encoder's q / k / v): one batched
// cuBLAS launch; each output within the GEMM's rounding of the double product, strided outputs'
// padding untouched, and close to the matmuls one by one (BRISK_NO_CUDA_GEMM_BATCH).
TEST(CudaGemmBatch, QkvOfOneShapeMatchTheProduct) {
  auto be = cuda_or_null();
  if (!be) GTEST_SKIP() << "no CUDA device";
  if (!cuda_has_gemm(*be)) GTEST_SKIP() << "no tensor-core GEMM in this build";
  const int64_t n_tok = 77, n_in = 256, n_out = 96, xs = n_in, os = 3 * n_out + 4;
  std::vector<HostWeight> w;
  for (uint32_t i = 0; i < 3; ++i) w.push_back(make_weight(QuantType::BF16, n_out, n_in, n_out, 40 + i));
  const std::vector<float> x = randn(size_t(n_tok * xs), 23);
  auto* dx = static_cast<float*>(be->alloc(sizeof(float) * x.size()));
  auto* dout = static_cast<float*>(be->alloc(sizeof(float) * size_t(n_tok * os)));
  be->copy(dx, x.data(), sizeof(float) * x.size());
  auto run = [&](const char* batch_off) {
    ScopedEnv env("BRISK_NO_CUDA_GEMM_BATCH", batch_off);
    const std::vector<float> sentinel(size_t(n_tok * os), 7.0f);
    be->copy(dout, sentinel.data(), sizeof(float) * sentinel.size());
    std::vector<MatmulArgs> list;
    for (int64_t i = 0; i < 3; ++i)
      list.push_back({.out = Mat{.data = dout + i * n_out, .rows = n_tok, .cols = n_out, .stride = os},
                      .x = Mat{.data = dx, .rows = n_tok, .cols = n_in}, .w = w[size_t(i)].w});
    be->matmuls(list.data(), 3);
    std::vector<float> got(sentinel.size());
    be->copy(got.data(), dout, sizeof(float) * got.size());
    return got;
  };
  const std::vector<float> batched = run("0"), apart = run("1");
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t c = 3 * n_out; c < os; ++c) ASSERT_EQ(batched[size_t(t * os + c)], 7.0f) << "padding written";
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t r = 0; r < n_out; ++r) {
        const float* wr = w[size_t(i)].row(r);
        double want = 0.0, mag = 0.0;
        for (int64_t k = 0; k < n_in; ++k) {
          const double p = double(wr[k]) * double(x[size_t(t * xs + k)]);
          want += p;
          mag += std::fabs(p);
        }
        const size_t at = size_t(t * os + i * n_out + r);
        ASSERT_NEAR(batched[at], want, 6e-3 * mag + 1e-4) << "weight " << i << " token " << t << " row " << r;
        // Both round x to BF16 the same way; only the FP32 summation order may differ.
        ASSERT_NEAR(batched[at], apart[at], 1e-5 * mag + 1e-6) << "weight " << i << " token " << t << " row " << r;
      }
  }
  be->free(dx);
  be->free(dout);
}

// The host rule: Sampler with temperature 0 (first index of the top logit, NaN as -inf).
int32_t host_greedy(const std::vector<float>& row) {
  Sampler s(SamplerParams{.temperature = 0.0f}, int32_t(row.size()));
  return s.sample(row.data());
}

TEST(CudaGreedy, DeviceArgmaxMatchesHostSampler) {
  auto be = cuda_or_null();
  if (!be) GTEST_SKIP() << "no CUDA device";
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (const int64_t n_vocab : {int64_t(2), int64_t(7), int64_t(1000), int64_t(151936)}) {
    const int64_t rows = 7;
    std::vector<float> x = randn(size_t(rows * n_vocab), uint32_t(n_vocab));
    auto at = [&](int64_t r, int64_t c) -> float& { return x[size_t(r * n_vocab + (c % n_vocab))]; };
    at(1, n_vocab / 2) = 50.0f;  // a tie: the first index wins
    at(1, n_vocab - 1) = 50.0f;
    at(2, 0) = nan;  // NaN counts as -inf
    at(2, n_vocab / 3) = nan;
    at(3, n_vocab / 4) = inf;  // +inf wins; two of them: the first
    at(3, n_vocab - 1) = inf;
    for (int64_t c = 0; c < n_vocab; ++c) at(4, c) = c % 2 ? -inf : nan;  // nothing to pick
    for (int64_t c = 0; c < n_vocab; ++c) at(5, c) = -3.0f;                // all equal: index 0
    at(6, n_vocab - 1) = 1e30f;
    auto* dev = static_cast<float*>(be->alloc(sizeof(float) * x.size()));
    be->copy(dev, x.data(), sizeof(float) * x.size());
    std::vector<int32_t> ids(size_t(rows), -7);
    ASSERT_TRUE(be->argmax_rows(Mat{.data = dev, .rows = rows, .cols = n_vocab}, ids.data()));
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<float> row(x.begin() + ptrdiff_t(r * n_vocab), x.begin() + ptrdiff_t((r + 1) * n_vocab));
      if (r == 4) {
        EXPECT_EQ(ids[size_t(r)], -1) << "vocab " << n_vocab;
        EXPECT_THROW(host_greedy(row), Error);
        continue;
      }
      EXPECT_EQ(ids[size_t(r)], host_greedy(row)) << "vocab " << n_vocab << " row " << r;
    }
    be->free(dev);
  }
}

// Greedy generation on a fixture model: the ids picked on the device equal those the host
// sampler picks from the copied logits (a zero logit bias takes generate off the argmax path,
// and BRISK_NO_DEVICE_SAMPLING off the device sampler).
TEST(CudaGreedy, GenerateMatchesHostSampling) {
  std::string skip;
  auto model = load_shared_llama_on_cuda(&skip);
  if (!model) GTEST_SKIP() << skip;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 20; ++i) prompt.push_back(int32_t((i * 29 + 3) % model->info().n_vocab));
  auto run = [&](bool host) {
    auto ctx = Context::create(model, {.n_ctx = 128, .n_seq_max = 1, .n_batch = 64, .device = "cuda"});
    GenerateParams gp{.max_tokens = 24, .sampling = SamplerParams{.temperature = 0.0f}, .stop_at_end_of_generation = false};
    std::unique_ptr<ScopedEnv> off;
    if (host) {
      gp.sampling.logit_bias = {{0, 0.0f}};
      off = std::make_unique<ScopedEnv>("BRISK_NO_DEVICE_SAMPLING", "1");
    }
    const GenerateResult r = generate(*ctx, nullptr, prompt, gp);
    // The last decoded batch kept ids only when the pick ran on the device.
    EXPECT_EQ(ctx->device_ids() != nullptr, !host);
    return r.tokens;
  };
  const std::vector<int32_t> device_ids = run(false), host_ids = run(true);
  ASSERT_EQ(device_ids.size(), 24u);
  EXPECT_EQ(device_ids, host_ids);
}

#endif

}  // namespace
}  // namespace brisk
