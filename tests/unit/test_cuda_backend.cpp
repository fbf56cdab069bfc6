// CUDA backend ops against the scalar references (kernels/cpu/ref.*) on random inputs over
// several shapes. Skips when the build has no CUDA backend or the machine has no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "paged_kv.h"
#include "random_values.h"
#include "backend/backend.h"
#include "core/error.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/ref.h"
#include "quant/repack.h"
#include "scoped_env.h"
#ifdef BRISK_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_devices.h"
#include "kernels/cuda/kernels.h"
#endif

namespace brisk {
namespace {

#ifndef BRISK_HAVE_CUDA
TEST(CudaBackend, Ops) { GTEST_SKIP() << "CUDA backend not built"; }
#else

std::unique_ptr<Backend> cuda_or_null() {
  std::string reason;
  if (cuda::enumerate_devices(&reason).empty()) return nullptr;
  return make_cuda_backend(0);
}

#define REQUIRE_GPU(be) \
  auto be = cuda_or_null(); \
  if (!be) GTEST_SKIP() << "no CUDA device"

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) { return test::gaussian(n, seed, scale); }

// A host [rows, cols] matrix and its device copy.
struct DevMat {
  Backend& be;
  std::vector<float> host;
  Mat dev;
  DevMat(Backend& b, int64_t rows, int64_t cols, std::vector<float> init = {}) : be(b) {
    host = init.empty() ? std::vector<float>(size_t(rows * cols)) : std::move(init);
    dev = Mat{.data = static_cast<float*>(be.alloc(sizeof(float) * host.size())), .rows = rows, .cols = cols};
    be.copy(dev.data, host.data(), sizeof(float) * host.size());
  }
  Mat hmat() { return Mat{.data = host.data(), .rows = dev.rows, .cols = dev.cols}; }
  std::vector<float> fetch() {
    std::vector<float> out(host.size());
    be.copy(out.data(), dev.data, sizeof(float) * out.size());
    return out;
  }
};

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float atol, float rtol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], atol + rtol * std::fabs(want[i])) << what << " at " << i;
}

struct QuantWeight {
  std::vector<uint8_t> bytes;
  Weight w;
};

QuantWeight make_weight(QuantType t, int64_t n_out, int64_t n_in, uint32_t seed) {
  const std::vector<float> f = randn(size_t(n_out * n_in), seed);
  QuantWeight q;
  const size_t rb = size_t(quant_row_bytes(t, uint64_t(n_in)).value());
  q.bytes.resize(rb * size_t(n_out));
  for (int64_t r = 0; r < n_out; ++r) cpu::row_from_f32(t, f.data() + r * n_in, q.bytes.data() + size_t(r) * rb, n_in);
  q.w = Weight{.type = t, .n_in = n_in, .n_out = n_out, .row_bytes = rb, .data = q.bytes.data()};
  return q;
}

class CudaMatmul : public ::testing::TestWithParam<QuantType> {};

TEST_P(CudaMatmul, MatchesReferenceOverShapes) {
  REQUIRE_GPU(be);
  const QuantType t = GetParam();
  struct Shape { int64_t n_tok, n_in, n_out; bool bias; };
  // Weights and biases alive as long as the backend, like a model's: the backend caches their
  // device copies by host address.
  std::vector<QuantWeight> keep;
  std::vector<std::vector<float>> keep_bias;
  // Wide rows take several unrolled passes per lane (some lanes past the end); [1 x 4352] x
  // [9001]: one-token Q6_K rows of two passes, two per warp, the last warp's second row missing;
  // [1 x 14336] x [37]: one-token Q8_0 / float / Q4_K / Q5_K rows split over 4-8 warps, and [8 x
  // 14336] x [37] the same rows for 8 tokens (each bit-equal to its token alone); [1 x 1024] x
  // [4000]: one-pass Q8_0 rows in one wave of the 64-register kernel; [1 x 36864] x [5]: Q4_K
  // rows of 9 passes in blocks of at most 4 warps (8 for the other formats); [1 x 4096] x [4501]:
  // one-pass Q4_K rows two per warp (more than one wave of one per warp on a 132-SM GPU).
  for (const Shape s : {Shape{1, 256, 64, false}, Shape{3, 512, 33, true}, Shape{9, 256, 130, false},
                        Shape{17, 768, 7, true}, Shape{1, 5120, 24, true}, Shape{5, 12288, 9, false},
                        Shape{8, 14336, 37, true},
                        Shape{1, 4352, 9001, true}, Shape{1, 14336, 37, true}, Shape{1, 1024, 4000, true},
                        Shape{1, 36864, 5, false}, Shape{1, 4096, 4501, true}}) {
    const std::string what = str_cat(quant_type_info(t).name, " [", s.n_tok, "x", s.n_in, "] x [", s.n_out, "]");
    keep.push_back(make_weight(t, s.n_out, s.n_in, uint32_t(s.n_in + s.n_out)));
    const QuantWeight& q = keep.back();
    DevMat x(*be, s.n_tok, s.n_in, randn(size_t(s.n_tok * s.n_in), 11));
    const std::vector<float>& bias = keep_bias.emplace_back(randn(size_t(s.n_out), 12));
    // The product under the environment switches in scope.
    const auto run = [&] {
      DevMat o(*be, s.n_tok, s.n_out);
      be->matmul({.out = o.dev, .x = x.dev, .w = q.w, .bias = s.bias ? bias.data() : nullptr});
      return o.fetch();
    };
    const auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
    };
    const std::vector<float> got = run();
    // A step of 2..8 tokens on the GEMV: every row bit-equal to the product of its token alone
    // (a speculative verify group's rows; Q8_0 / float / Q5_K rows of several passes split over
    // warps alike for one token and for several).
    const bool small_gemm = cuda_has_gemm(*be) && s.n_tok >= 2 && t == QuantType::BF16;
    if (s.n_tok >= 2 && s.n_tok <= 8 && !small_gemm) {
      for (int64_t tk = 0; tk < s.n_tok; ++tk) {
        DevMat o1(*be, 1, s.n_out);
        const Mat x1{.data = x.dev.data + tk * s.n_in, .rows = 1, .cols = s.n_in};
        be->matmul({.out = o1.dev, .x = x1, .w = q.w, .bias = s.bias ? bias.data() : nullptr});
        const std::vector<float> one = o1.fetch();
        ASSERT_EQ(0, std::memcmp(one.data(), got.data() + tk * s.n_out, sizeof(float) * size_t(s.n_out)))
            << what << " token " << tk << " of " << s.n_tok << " vs alone";
      }
    }
    // One token: rows not split over warps (another summation order; the bit-equality checks
    // below compare kernels of the same split).
    std::vector<float> unsplit;
    if (s.n_tok == 1) {
      ScopedEnv no_split("BRISK_NO_CUDA_GEMV_SPLIT", "1");
      unsplit = run();
      // The wide and the two-row kernels: bit-equal to the narrow one.
      ScopedEnv narrow("BRISK_NO_CUDA_GEMV_WIDE", "1");
      ScopedEnv one_row("BRISK_NO_CUDA_GEMV_ROWS", "1");
      ASSERT_TRUE(same_bits(unsplit, run())) << what << " wide vs narrow";
    }
    // The spread K-quant lane layouts against the adjacent ones, both unsplit: a step's rows of
    // several passes split over warps as one token's do, so its spread product is taken again
    // unsplit.
    const auto spread_unsplit = [&] {
      if (s.n_tok == 1) return unsplit;
      ScopedEnv no_split("BRISK_NO_CUDA_GEMV_SPLIT", "1");
      return run();
    };
    if (t == QuantType::Q4_K) {  // the spread lane layout: bit-equal to the adjacent one
      const std::vector<float> spread = spread_unsplit();
      ScopedEnv no_split("BRISK_NO_CUDA_GEMV_SPLIT", "1");
      ScopedEnv adjacent("BRISK_NO_CUDA_Q4K_SPREAD", "1");
      ASSERT_TRUE(same_bits(spread, run())) << what << " spread vs adjacent";
    }
    if (t == QuantType::Q4_K && s.n_tok == 1) {  // decoded before the wait: bit-equal to the unsplit spread kernel
      ScopedEnv late("BRISK_NO_CUDA_Q4K_EARLY_DECODE", "1");
      ScopedEnv no_split("BRISK_NO_CUDA_GEMV_SPLIT", "1");
      ScopedEnv narrow("BRISK_NO_CUDA_GEMV_WIDE", "1");
      ASSERT_TRUE(same_bits(got, run())) << what << " early vs late decode";
    }
    if (t == QuantType::Q5_K) {  // the spread lane layout: bit-equal to the adjacent one (both unsplit)
      const std::vector<float> spread = spread_unsplit();
      ScopedEnv no_split("BRISK_NO_CUDA_GEMV_SPLIT", "1");
      ScopedEnv adjacent("BRISK_NO_CUDA_Q5K_SPREAD", "1");
      ASSERT_TRUE(same_bits(spread, run())) << what << " spread vs adjacent";
    }
    if (t == QuantType::Q6_K) {  // the spread lane layout: bit-equal to halves per lane
      ScopedEnv halves("BRISK_NO_CUDA_Q6K_SPREAD", "1");
      ASSERT_TRUE(same_bits(got, run())) << what << " spread vs halves";
    }
    // The reference rounds activations through the weight's vec_dot_type, as the backend
    // does, then takes a double-precision dot; the tolerance scales with sum |w x|.
    DevMat ref_out(*be, s.n_tok, s.n_out);
    ref::matmul({.out = ref_out.hmat(), .x = x.hmat(), .w = q.w, .bias = s.bias ? bias.data() : nullptr});
    std::vector<float> wrow(static_cast<size_t>(s.n_in));
    const bool gemm = cuda_has_gemm(*be) && ((s.n_tok > 8 && t != QuantType::F32) ||
                                               (s.n_tok >= 2 && t == QuantType::BF16 && flags().no_cuda_gemv_few));
    for (int64_t r = 0; r < s.n_out; ++r) {
      cpu::row_to_f32(t, q.w.row(r), wrow.data(), s.n_in);
      for (int64_t tk = 0; tk < s.n_tok; ++tk) {
        double mag = 0.0;
        for (int64_t i = 0; i < s.n_in; ++i) mag += std::fabs(double(wrow[size_t(i)]) * x.host[size_t(tk * s.n_in + i)]);
        // Formats converted to BF16 at upload carry its rounding (2^-8 relative per weight).
        double tol = (cuda::weight_format_on_device(quant::stored_type(t)) ? 2e-5 : 8e-3) * mag + 1e-5;
        const size_t i = size_t(tk * s.n_out + r);
        if (gemm) {
          // The tensor-core GEMM takes BF16 weights and activations (not the vec_dot_type's
          // rounding): against the unrounded product, 2^-8 relative per term.
          double want = s.bias ? bias[size_t(r)] : 0.0;
          for (int64_t j = 0; j < s.n_in; ++j) want += double(wrow[size_t(j)]) * x.host[size_t(tk * s.n_in + j)];
          ASSERT_NEAR(got[i], want, 6e-3 * mag + 1e-4) << what << " (GEMM) token " << tk << " row " << r;
          continue;
        }
        ASSERT_NEAR(got[i], ref_out.host[i], tol) << what << " token " << tk << " row " << r;
        if (!unsplit.empty()) {
          ASSERT_NEAR(unsplit[i], ref_out.host[i], tol) << what << " (rows not split) row " << r;
        }
      }
    }
  }
}

// Float weight rows of any length (expert and projection widths of small models: 20, 22, 36,
// 1001 columns) and activations that are not 16-byte aligned (a column view of a wider
// matrix): the GEMV takes one element per unit where its 16-byte units do not fit, within the
// reference's tolerance, for one token, a verify group and more than 8 rows (these stay on the
// GEMV: the BF16 GEMM takes rows of whole 8-element pieces).
TEST(CudaBackend, FloatRowsOfAnyLength) {
  REQUIRE_GPU(be);
  std::vector<QuantWeight> keep;
  for (const QuantType t : {QuantType::F32, QuantType::F16, QuantType::BF16})
    for (const int64_t n_in : {int64_t(20), int64_t(22), int64_t(36), int64_t(1001)})
      for (const int64_t n_tok : {int64_t(1), int64_t(3), int64_t(9)})
        for (const bool offset : {false, true}) {
          const int64_t n_out = 65;
          const std::string what =
              str_cat(quant_type_info(t).name, " [", n_tok, "x", n_in, "] x [", n_out, "]", offset ? " x at +1" : "");
          keep.push_back(make_weight(t, n_out, n_in, uint32_t(n_in * 7 + n_out)));
          const QuantWeight& q = keep.back();
          // x: columns [off, off + n_in) of a [n_tok, n_in + 1] matrix.
          const int64_t off = offset ? 1 : 0, stride = n_in + 1;
          DevMat xf(*be, n_tok, stride, randn(size_t(n_tok * stride), 13));
          const Mat x{.data = xf.dev.data + off, .rows = n_tok, .cols = n_in, .stride = stride};
          DevMat o(*be, n_tok, n_out);
          be->matmul({.out = o.dev, .x = x, .w = q.w});
          const std::vector<float> got = o.fetch();
          std::vector<float> xh(size_t(n_tok * n_in));
          for (int64_t tk = 0; tk < n_tok; ++tk)
            for (int64_t i = 0; i < n_in; ++i) xh[size_t(tk * n_in + i)] = xf.host[size_t(tk * stride + off + i)];
          std::vector<float> want(size_t(n_tok * n_out));
          ref::matmul({.out = {.data = want.data(), .rows = n_tok, .cols = n_out},
                       .x = {.data = xh.data(), .rows = n_tok, .cols = n_in}, .w = q.w});
          std::vector<float> wrow(static_cast<size_t>(n_in));
          for (int64_t r = 0; r < n_out; ++r) {
            cpu::row_to_f32(t, q.w.row(r), wrow.data(), n_in);
            for (int64_t tk = 0; tk < n_tok; ++tk) {
              double mag = 0.0;
              for (int64_t i = 0; i < n_in; ++i) mag += std::fabs(double(wrow[size_t(i)]) * xh[size_t(tk * n_in + i)]);
              const size_t i = size_t(tk * n_out + r);
              ASSERT_NEAR(got[i], want[i], 2e-5 * mag + 1e-5) << what << " token " << tk << " row " << r;
            }
          }
        }
}

// Large weights used right after their (lazy) upload: every row must be the uploaded one. The
// upload once ran on the legacy default stream, which the backend's non-blocking stream does
// not wait for; a kernel could read a weight whose copy was still landing.
TEST(CudaBackend, WeightsAreCompleteAtFirstUse) {
  REQUIRE_GPU(be);
  std::vector<QuantWeight> keep;
  const int64_t n_in = 4096, n_out = 8192;  // 35.7 MB of Q8_0 each
  DevMat x(*be, 1, n_in, randn(size_t(n_in), 5));
  for (int rep = 0; rep < 4; ++rep) {
    const QuantType t = rep % 2 ? QuantType::F16 : QuantType::Q8_0;
    keep.push_back(make_weight(t, n_out, n_in, uint32_t(100 + rep)));
    const QuantWeight& q = keep.back();
    DevMat out(*be, 1, n_out);
    be->matmul({.out = out.dev, .x = x.dev, .w = q.w});
    const std::vector<float> got = out.fetch();
    DevMat ref_out(*be, 1, n_out);
    ref::matmul({.out = ref_out.hmat(), .x = x.hmat(), .w = q.w});
    expect_close(got, ref_out.host, 2e-3f, 1e-4f, str_cat(quant_type_info(t).name, " weight ", rep));
  }
}

// 2..8 tokens (a speculative verify step) on the few-token GEMV: every token's row bit-equal to a
// one-token matmul of that token alone, under each switch that picks another one-token kernel
// (rows split over warps or not, Q4_K decoded before the wait or not, one or two rows per warp),
// and on the dp4a few-token kernel instead of the tensor-core one (BRISK_NO_CUDA_GEMV_FEW_MMA) or
// on the tensor-core kernel without its pipelined loads (BRISK_NO_CUDA_FEW_MMA_PIPE) or its mins'
// products (BRISK_NO_CUDA_FEW_MMA_MINS), and close to the reference;
// the generic multi-token kernel (BRISK_NO_CUDA_GEMV_FEW) close too.
// [8 x 14336] x [300]: rows of 4 passes that one token splits over warps (Q8_0, float, Q5_K);
// [5 x 36864] x [5]: 9 passes; [2 x 4096] x [1030]: one pass, two Q4_K rows per warp.
TEST_P(CudaMatmul, FewTokenRowsEqualOneToken) {
  REQUIRE_GPU(be);
  const QuantType t = GetParam();
  struct Shape { int64_t n_in, n_out; bool bias; };
  std::vector<QuantWeight> keep;
  std::vector<std::vector<float>> keep_bias;
  for (const Shape s : {Shape{4096, 1030, true}, Shape{14336, 300, false}, Shape{4352, 77, true},
                        Shape{1024, 4000, false}, Shape{36864, 5, true}}) {
    keep.push_back(make_weight(t, s.n_out, s.n_in, uint32_t(3 * s.n_in + s.n_out)));
    const QuantWeight& q = keep.back();
    const std::vector<float>& bias = keep_bias.emplace_back(randn(size_t(s.n_out), 13));
    for (const int64_t n_tok : {2, 5, 8}) {
      const std::string what = str_cat(quant_type_info(t).name, " [", n_tok, "x", s.n_in, "] x [", s.n_out, "]");
      DevMat x(*be, n_tok, s.n_in, randn(size_t(n_tok * s.n_in), uint32_t(17 + n_tok)));
      const auto run = [&](int64_t t0, int64_t rows) {
        DevMat o(*be, rows, s.n_out);
        const Mat xs{.data = x.dev.data + t0 * s.n_in, .rows = rows, .cols = s.n_in};
        be->matmul({.out = o.dev, .x = xs, .w = q.w, .bias = s.bias ? bias.data() : nullptr});
        return o.fetch();
      };
      DevMat ref_out(*be, n_tok, s.n_out);
      ref::matmul({.out = ref_out.hmat(), .x = x.hmat(), .w = q.w, .bias = s.bias ? bias.data() : nullptr});
      std::vector<float> wrow(static_cast<size_t>(s.n_in));
      const auto expect_near_ref = [&](const std::vector<float>& got, const std::string& label) {
        for (int64_t r = 0; r < s.n_out; ++r) {
          cpu::row_to_f32(t, q.w.row(r), wrow.data(), s.n_in);
          for (int64_t tk = 0; tk < n_tok; ++tk) {
            double mag = 0.0;
            for (int64_t i = 0; i < s.n_in; ++i) mag += std::fabs(double(wrow[size_t(i)]) * x.host[size_t(tk * s.n_in + i)]);
            const size_t i = size_t(tk * s.n_out + r);
            ASSERT_NEAR(got[i], ref_out.host[i], 2e-5 * mag + 1e-5) << label << " token " << tk << " row " << r;
          }
        }
      };
      // BF16 from 2 rows runs on the GEMM (MatchesReferenceOverShapes checks it); Q4_K under
      // BRISK_NO_CUDA_Q4K_EARLY_DECODE decodes one token otherwise than the few-token kernel
      // (a kill switch, not row-exact: docs/speculative.md).
      if (t == QuantType::BF16 && cuda_has_gemm(*be)) continue;
      for (const char* env : {"", "BRISK_NO_CUDA_GEMV_SPLIT", "BRISK_NO_CUDA_GEMV_FEW_ROWS", "BRISK_NO_CUDA_Q4K_SPREAD",
                              "BRISK_NO_CUDA_GEMV_FEW_MMA", "BRISK_NO_CUDA_FEW_MMA_PIPE",
                              "BRISK_NO_CUDA_FEW_MMA_MINS"}) {
        std::unique_ptr<ScopedEnv> sw;
        if (*env) sw = std::make_unique<ScopedEnv>(env, "1");
        const std::string label = str_cat(what, *env ? " under " : "", env);
        const std::vector<float> got = run(0, n_tok);
        for (int64_t tk = 0; tk < n_tok; ++tk) {
          const std::vector<float> one = run(tk, 1);
          ASSERT_EQ(std::memcmp(got.data() + tk * s.n_out, one.data(), sizeof(float) * size_t(s.n_out)), 0)
              << label << ": token " << tk << " differs from a one-token matmul";
        }
        if (!*env || std::string(env) == "BRISK_NO_CUDA_GEMV_FEW_MMA") expect_near_ref(got, label);
      }
      if (t != QuantType::BF16 || !cuda_has_gemm(*be)) {  // BF16: the GEMM's rounding (MatchesReferenceOverShapes)
        ScopedEnv generic("BRISK_NO_CUDA_GEMV_FEW", "1");
        expect_near_ref(run(0, n_tok), what + " (generic multi-token kernel)");
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, CudaMatmul,
                         ::testing::Values(QuantType::F32, QuantType::F16, QuantType::BF16, QuantType::Q8_0,
                                           QuantType::Q4_0, QuantType::Q5_0, QuantType::Q4_K, QuantType::Q6_K,
                                           QuantType::Q5_K),
                         [](const auto& info) { return std::string(quant_type_info(info.param).name); });

// Q5_0 rows (the Q4_K_M recipe's type for rows that are not whole 256-element blocks, e.g. a
// 704-wide expert down projection) on their own kernel against BRISK_NO_CUDA_Q5_0, which
// dequantizes them to BF16 at upload: both within tolerance of the reference, the kernel within
// the quantized formats' (it takes the CPU's Q8_0 activations and integer sums).
TEST(CudaBackend, Q5_0KernelMatchesBf16Upload) {
  REQUIRE_GPU(be);
  std::vector<QuantWeight> keep;
  for (const auto& [n_tok, n_in, n_out] : {std::tuple<int64_t, int64_t, int64_t>{1, 704, 2816}, {1, 2112, 1000},
                                          {5, 704, 300}, {8, 96, 77}}) {
    const std::string what = str_cat("Q5_0 [", n_tok, "x", n_in, "] x [", n_out, "]");
    keep.push_back(make_weight(QuantType::Q5_0, n_out, n_in, uint32_t(n_in * 3 + n_out)));
    const QuantWeight& q = keep.back();
    DevMat x(*be, n_tok, n_in, randn(size_t(n_tok * n_in), 13));
    DevMat o(*be, n_tok, n_out);
    be->matmul({.out = o.dev, .x = x.dev, .w = q.w});
    const std::vector<float> got = o.fetch();
    std::vector<float> bf16;
    {
      ScopedEnv off("BRISK_NO_CUDA_Q5_0", "1");
      auto be2 = cuda_or_null();  // a backend of its own: uploads are cached by host address
      DevMat x2(*be2, n_tok, n_in, x.host);
      DevMat o2(*be2, n_tok, n_out);
      be2->matmul({.out = o2.dev, .x = x2.dev, .w = q.w});
      bf16 = o2.fetch();
    }
    DevMat want(*be, n_tok, n_out);
    ref::matmul({.out = want.hmat(), .x = x.hmat(), .w = q.w});
    std::vector<float> wrow(static_cast<size_t>(n_in));
    for (int64_t r = 0; r < n_out; ++r) {
      cpu::row_to_f32(QuantType::Q5_0, q.w.row(r), wrow.data(), n_in);
      for (int64_t t = 0; t < n_tok; ++t) {
        double mag = 0.0;
        for (int64_t i = 0; i < n_in; ++i) mag += std::fabs(double(wrow[size_t(i)]) * x.host[size_t(t * n_in + i)]);
        const size_t i = size_t(t * n_out + r);
        ASSERT_NEAR(got[i], want.host[i], 2e-5 * mag + 1e-5) << what << " token " << t << " row " << r;
        ASSERT_NEAR(bf16[i], want.host[i], 8e-3 * mag + 1e-5) << what << " (BF16) token " << t << " row " << r;
      }
    }
  }
}

// The weight store lays weights out for each backend (Backend::weight_layout): the CUDA backend
// takes the stored layouts, and a CPU layout (quant/repack.h) given to it directly is an error
// that names the layout, not a silent conversion.
TEST(CudaBackend, RejectsAnotherBackendsLayout) {
  REQUIRE_GPU(be);
  for (const QuantType t : {QuantType::Q4_0, QuantType::Q5_0, QuantType::Q8_0})
    EXPECT_FALSE(be->weight_layout(t).has_value()) << quant_type_info(t).name;
  const QuantWeight q = make_weight(QuantType::Q8_0_R16, 64, 256, 7);
  DevMat x(*be, 1, 256, randn(256, 8));
  DevMat out(*be, 1, 64);
  try {
    be->matmul({.out = out.dev, .x = x.dev, .w = q.w});
    FAIL() << "a Q8_0_R16 weight was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Q8_0_R16"), std::string::npos) << e.what();
  }
}

TEST(CudaBackend, RmsNorm) {
  REQUIRE_GPU(be);
  for (const int64_t group : {int64_t(0), int64_t(64)}) {
    for (const bool with_w : {false, true}) {
      DevMat x(*be, 5, 256, randn(5 * 256, 3, 2.0f));
      DevMat out(*be, 5, 256);
      const std::vector<float> w = randn(size_t(group ? group : 256), 4);
      be->rms_norm({.out = out.dev, .x = x.dev, .weight = with_w ? w.data() : nullptr, .group = group, .eps = 1e-5f});
      DevMat want(*be, 5, 256);
      ref::rms_norm({.out = want.hmat(), .x = x.hmat(), .weight = with_w ? w.data() : nullptr, .group = group, .eps = 1e-5f});
      expect_close(out.fetch(), want.host, 1e-5f, 1e-5f, str_cat("rms_norm group ", group));
    }
  }
  // In place (out aliases x), as the model's q/k norms run.
  DevMat x(*be, 2, 128, randn(256, 5));
  DevMat want(*be, 2, 128);
  ref::rms_norm({.out = want.hmat(), .x = x.hmat(), .group = 32});
  be->rms_norm({.out = x.dev, .x = x.dev, .group = 32});
  expect_close(x.fetch(), want.host, 1e-5f, 1e-5f, "rms_norm in place");
}

TEST(CudaBackend, Rope) {
  REQUIRE_GPU(be);
  for (const bool neox : {false, true}) {
    for (const int32_t n_rot : {64, 32}) {
      RopeTable tab{.n_rot = n_rot, .inv_freq = {}, .attn_factor = neox ? 0.9f : 1.0f, .neox = neox};
      for (int i = 0; i < n_rot / 2; ++i) tab.inv_freq.push_back(std::pow(10000.0f, -2.0f * float(i) / float(n_rot)));
      const int32_t n_head = 3, hd = 64;
      const std::vector<int32_t> pos = {0, 1, 17, 4095, 300};
      DevMat x(*be, 5, n_head * hd, randn(size_t(5 * n_head * hd), 6));
      DevMat want(*be, 5, n_head * hd, x.host);
      be->rope({.x = x.dev, .pos = pos.data(), .n_head = n_head, .head_dim = hd, .table = &tab});
      ref::rope({.x = want.hmat(), .pos = pos.data(), .n_head = n_head, .head_dim = hd, .table = &tab});
      expect_close(x.fetch(), want.host, 2e-5f, 1e-5f, str_cat("rope neox=", neox, " n_rot=", n_rot));
    }
  }
}

// A paged cache on the device (blocks of block_size, table in `layout`) with random rows, and
// its host copies: the same pools and the same table.
struct Cache {
  KvView k, v;
  std::vector<uint8_t> hk, hv;  // host copies of the pools
  std::vector<int32_t> table;   // host copy of the block table
};

Cache make_cache(Backend& be, QuantType t, int64_t n_seq, int64_t cap, int64_t width, uint32_t seed,
                 int32_t block_size = 256, testing::KvLayout layout = testing::KvLayout::scrambled, int64_t n_shared = 0) {
  Cache c;
  const size_t rb = size_t(quant_row_bytes(t, uint64_t(width)).value());
  const int64_t per_seq = (cap + block_size - 1) / block_size, rows = n_seq * per_seq * block_size;
  const size_t bytes = rb * size_t(rows);
  c.table = testing::test_kv_table(n_seq, per_seq, layout, n_shared);
  auto* dev_table = static_cast<int32_t*>(be.alloc(sizeof(int32_t) * c.table.size()));
  be.copy(dev_table, c.table.data(), sizeof(int32_t) * c.table.size());
  c.k = KvView{.type = t, .data = be.alloc(bytes), .width = width, .row_bytes = rb, .capacity = cap, .n_seq = n_seq,
               .block_size = block_size, .n_blocks = n_seq * per_seq, .table = nullptr, .device_table = dev_table,
               .table_stride = per_seq};
  c.v = c.k;
  c.v.data = be.alloc(bytes);
  c.hk.resize(bytes);
  c.hv.resize(bytes);
  const std::vector<float> fk = randn(size_t(rows * width), seed), fv = randn(size_t(rows * width), seed + 1);
  for (int64_t r = 0; r < rows; ++r) {
    cpu::row_from_f32(t, fk.data() + r * width, c.hk.data() + size_t(r) * rb, width);
    cpu::row_from_f32(t, fv.data() + r * width, c.hv.data() + size_t(r) * rb, width);
  }
  be.copy(c.k.data, c.hk.data(), bytes);
  be.copy(c.v.data, c.hv.data(), bytes);
  return c;
}

// want = ref::attention of `a` with its query and K/V caches replaced by their host copies.
void host_reference_attention(const AttentionArgs& a, DevMat& q, Cache& c, DevMat& want) {
  AttentionArgs h = a;
  h.out = want.hmat();
  h.q = q.hmat();
  h.k_cache.data = c.hk.data();
  h.v_cache.data = c.hv.data();
  h.k_cache.table = h.v_cache.table = h.k_cache.device_table = h.v_cache.device_table = c.table.data();
  ref::attention(h);
}

// The output (1, qw) of one-token attention `a` on the device, with the switch `env` set to 1
// during the call (none: nullptr).
std::vector<float> attention_output(Backend& be, const AttentionArgs& a, int64_t qw, const char* env) {
  std::unique_ptr<ScopedEnv> off;
  if (env) off = std::make_unique<ScopedEnv>(env, "1");
  DevMat out(be, 1, qw);
  AttentionArgs d = a;
  d.out = out.dev;
  be.attention(d);
  return out.fetch();
}

// kv_store of rows k, v at (seq, pos) on the device: both pools then equal ref::kv_store's
// host copies (which it updates).
void expect_kv_store(Backend& be, Cache& c, DevMat& k, DevMat& v, const std::vector<int32_t>& seq,
                     const std::vector<int32_t>& pos, const std::string& what) {
  be.kv_store({.k = k.dev, .v = v.dev, .k_cache = c.k, .v_cache = c.v, .seq = seq.data(), .pos = pos.data()});
  KvView hk = c.k, hv = c.v;
  hk.data = c.hk.data();
  hv.data = c.hv.data();
  hk.table = hv.table = hk.device_table = hv.device_table = c.table.data();
  ref::kv_store({.k = k.hmat(), .v = v.hmat(), .k_cache = hk, .v_cache = hv, .seq = seq.data(), .pos = pos.data()});
  std::vector<uint8_t> gk(c.hk.size()), gv(c.hv.size());
  be.copy(gk.data(), c.k.data, gk.size());
  be.copy(gv.data(), c.v.data, gv.size());
  // The differing bytes: how many, and the first few with their row and offset in the row.
  const auto first_diff = [&](const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, const char* which) {
    ASSERT_EQ(got.size(), want.size());
    size_t n_diff = 0;
    std::string shown;
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i] == want[i]) continue;
      if (++n_diff <= 8)
        shown += str_cat(" [row ", i / c.k.row_bytes, " byte ", i % c.k.row_bytes, ": ", int(got[i]), " want ",
                         int(want[i]), "]");
    }
    EXPECT_EQ(n_diff, 0u) << what << " " << which << " cache bytes differ:" << shown;
  };
  first_diff(gk, c.hk, "K");
  first_diff(gv, c.hv, "V");
}

TEST(CudaBackend, KvStore) {
  REQUIRE_GPU(be);
  for (const QuantType t : {QuantType::F16, QuantType::BF16, QuantType::F32, QuantType::Q8_0}) {
    Cache c = make_cache(*be, t, 2, 16, 96, 7);
    DevMat k(*be, 3, 96, randn(3 * 96, 8)), v(*be, 3, 96, randn(3 * 96, 9));
    const std::vector<int32_t> seq = {0, 1, 1}, pos = {5, 0, 15};
    expect_kv_store(*be, c, k, v, seq, pos, std::string(quant_type_info(t).name));
  }
}

TEST(CudaBackend, Attention) {
  REQUIRE_GPU(be);
  struct Case { int32_t n_head, n_head_kv, hd, window; float softcap; QuantType kv; bool prefill; };
  for (const Case cs : {Case{8, 2, 64, 0, 0.0f, QuantType::F16, false}, Case{8, 2, 64, 0, 0.0f, QuantType::F16, true},
                        Case{4, 4, 128, 50, 0.0f, QuantType::F32, true}, Case{6, 2, 256, 0, 20.0f, QuantType::F16, false},
                        Case{4, 1, 32, 7, 30.0f, QuantType::F16, true}, Case{16, 1, 64, 0, 0.0f, QuantType::F16, false},
                        Case{12, 1, 80, 0, 0.0f, QuantType::F32, true}, Case{8, 2, 64, 0, 0.0f, QuantType::BF16, false},
                        Case{8, 2, 128, 0, 0.0f, QuantType::BF16, true}, Case{6, 2, 256, 0, 20.0f, QuantType::BF16, false},
                        Case{4, 1, 32, 7, 30.0f, QuantType::BF16, true}, Case{8, 2, 64, 0, 0.0f, QuantType::Q8_0, false},
                        Case{8, 2, 128, 0, 0.0f, QuantType::Q8_0, true}, Case{6, 2, 256, 0, 20.0f, QuantType::Q8_0, false},
                        Case{4, 1, 32, 7, 30.0f, QuantType::Q8_0, true}, Case{32, 8, 128, 0, 0.0f, QuantType::Q8_0, false},
                        Case{32, 8, 128, 40, 0.0f, QuantType::Q8_0, true}}) {
    const int64_t cap = 300, width = int64_t(cs.n_head_kv) * cs.hd;
    Cache c = make_cache(*be, cs.kv, 2, cap, width, 21);
    std::vector<int32_t> seq, pos;
    if (cs.prefill) {
      for (int32_t i = 0; i < 20; ++i) { seq.push_back(0); pos.push_back(i); }
      for (int32_t i = 150; i < 160; ++i) { seq.push_back(1); pos.push_back(i); }
    } else {
      seq = {1, 0};
      pos = {299, 128};
    }
    const int64_t n = int64_t(seq.size()), qw = int64_t(cs.n_head) * cs.hd;
    DevMat q(*be, n, qw, randn(size_t(n * qw), 22)), out(*be, n, qw), want(*be, n, qw);
    const float scale = 1.0f / std::sqrt(float(cs.hd));
    AttentionArgs a{.out = out.dev, .q = q.dev, .k_cache = c.k, .v_cache = c.v, .seq = seq.data(), .pos = pos.data(),
                    .n_head = cs.n_head, .n_head_kv = cs.n_head_kv, .head_dim = cs.hd, .scale = scale,
                    .window = cs.window, .softcap = cs.softcap};
    be->attention(a);
    host_reference_attention(a, q, c, want);
    expect_close(out.fetch(), want.host, 2e-5f, 1e-4f,
                 str_cat("attention heads ", cs.n_head, "/", cs.n_head_kv, " hd ", cs.hd, " window ", cs.window,
                         " softcap ", cs.softcap, cs.prefill ? " prefill " : " decode ", quant_type_info(cs.kv).name));
  }
}

// One-token decode at the Llama-3 head layout (32 / 8 heads, head_dim 128) and at head_dim 64:
// chunks of up to 64 positions are staged in shared memory, their earlier rows copied before
// the dependent-launch wait; longer chunks (12,288 positions: 190-364 per split) stream through
// two buffers in tiles of 64 rows. Against ref::attention, bit-equal to staging after the wait
// and to the head-after-head merge, and close to rows read per use (tiles of 128).
TEST(CudaBackend, DecodeAttentionStagedChunks) {
  REQUIRE_GPU(be);
  struct Case { int32_t n_head, n_head_kv, hd; int32_t pos; int32_t window; };
  for (const Case cs : {Case{32, 8, 128, 0, 0}, Case{32, 8, 128, 31, 0}, Case{32, 8, 128, 512, 0},
                        Case{32, 8, 128, 1500, 0}, Case{32, 8, 128, 3000, 0}, Case{8, 2, 64, 700, 0},
                        Case{8, 2, 64, 900, 100}, Case{40, 8, 128, 260, 0}, Case{32, 8, 128, 12000, 0},
                        Case{8, 2, 64, 12000, 0}}) {
   for (const QuantType kv : {QuantType::F16, QuantType::BF16, QuantType::Q8_0}) {
    const int64_t cap = cs.pos < 3072 ? 3072 : 12288, width = int64_t(cs.n_head_kv) * cs.hd;
    Cache c = make_cache(*be, kv, 2, cap, width, 31);
    const std::vector<int32_t> seq = {1}, pos = {cs.pos};
    const int64_t qw = int64_t(cs.n_head) * cs.hd;
    DevMat q(*be, 1, qw, randn(size_t(qw), 32)), want(*be, 1, qw);
    AttentionArgs a{.out = {}, .q = q.dev, .k_cache = c.k, .v_cache = c.v, .seq = seq.data(), .pos = pos.data(),
                    .n_head = cs.n_head, .n_head_kv = cs.n_head_kv, .head_dim = cs.hd,
                    .scale = 1.0f / std::sqrt(float(cs.hd)), .window = cs.window};
    auto run = [&](const char* env) { return attention_output(*be, a, qw, env); };
    const std::vector<float> got = run(nullptr);
    host_reference_attention(a, q, c, want);
    const std::string what = str_cat("decode attention heads ", cs.n_head, "/", cs.n_head_kv, " hd ", cs.hd, " pos ",
                                     cs.pos, " window ", cs.window, " ", quant_type_info(kv).name);
    expect_close(got, want.host, 2e-5f, 1e-4f, what);
    for (const char* env : {"BRISK_NO_CUDA_PREFETCH", "BRISK_NO_CUDA_ATTN_MERGE_HEADS"}) {
      const std::vector<float> other = run(env);
      ASSERT_EQ(std::memcmp(got.data(), other.data(), sizeof(float) * got.size()), 0) << what << " vs " << env;
    }
    // Rows read per use: bit-equal for staged chunks (one tile either way), close for streamed
    // ones (tiles of 64 rows against 128: another summation order).
    for (const char* env : {"BRISK_NO_CUDA_ATTN_STAGE", "BRISK_NO_CUDA_ATTN_STREAM"})
      expect_close(run(env), got, 1e-5f, 1e-4f, str_cat(what, " vs ", env));
   }
  }
}

// One-token decode over F16 / BF16 caches of head_dim 64 / 128 and up to 8 query heads per KV head
// runs one cluster of blocks per KV head that merges its splits through distributed shared
// memory (16 blocks, chunks of up to 256 positions in tiles of 64): against ref::attention, and
// against the split kernel with its last-block merge (BRISK_NO_CUDA_ATTN_CLUSTER; another
// summation order, so within the same tolerance, not bit-equal); bit-equal without the reads
// before the dependent-launch wait. A cache of 8192 positions (chunks over 256) keeps the split
// kernel either way.
TEST(CudaBackend, DecodeAttentionCluster) {
  REQUIRE_GPU(be);
  struct Case { int32_t n_head, n_head_kv, hd; int32_t pos; int32_t window; float softcap; int64_t cap; };
  for (const Case cs : {Case{32, 8, 128, 0, 0, 0.0f, 3072}, Case{32, 8, 128, 17, 0, 0.0f, 3072},
                        Case{32, 8, 128, 511, 0, 0.0f, 3072}, Case{32, 8, 128, 1500, 0, 0.0f, 3072},
                        Case{32, 8, 128, 3071, 0, 0.0f, 3072}, Case{64, 8, 128, 700, 0, 0.0f, 1024},
                        Case{40, 8, 128, 260, 0, 30.0f, 1024}, Case{14, 2, 64, 900, 0, 0.0f, 2048},
                        Case{8, 8, 64, 333, 0, 0.0f, 1024}, Case{8, 2, 64, 2000, 100, 0.0f, 3072},
                        Case{16, 4, 128, 4000, 300, 0.0f, 8192}, Case{32, 8, 128, 5000, 0, 0.0f, 8192},
                        Case{32, 16, 256, 511, 0, 0.0f, 3072}, Case{16, 8, 256, 3000, 1024, 0.0f, 4096},
                        Case{8, 1, 256, 700, 0, 30.0f, 1024}, Case{32, 4, 512, 700, 0, 0.0f, 2048},
                        Case{16, 2, 512, 4000, 0, 0.0f, 4096}, Case{8, 1, 512, 300, 200, 0.0f, 1024}}) {
   for (const QuantType kv : {QuantType::F16, QuantType::BF16}) {
    Cache c = make_cache(*be, kv, 2, cs.cap, int64_t(cs.n_head_kv) * cs.hd, 41);
    const std::vector<int32_t> seq = {1}, pos = {cs.pos};
    const int64_t qw = int64_t(cs.n_head) * cs.hd;
    DevMat q(*be, 1, qw, randn(size_t(qw), 42)), want(*be, 1, qw);
    AttentionArgs a{.out = {}, .q = q.dev, .k_cache = c.k, .v_cache = c.v, .seq = seq.data(), .pos = pos.data(),
                    .n_head = cs.n_head, .n_head_kv = cs.n_head_kv, .head_dim = cs.hd,
                    .scale = 1.0f / std::sqrt(float(cs.hd)), .window = cs.window, .softcap = cs.softcap};
    auto run = [&](const char* env) { return attention_output(*be, a, qw, env); };
    const std::vector<float> got = run(nullptr);
    host_reference_attention(a, q, c, want);
    const std::string what = str_cat("decode attention heads ", cs.n_head, "/", cs.n_head_kv, " hd ", cs.hd, " pos ",
                                     cs.pos, " window ", cs.window, " softcap ", cs.softcap, " capacity ", cs.cap, " ",
                                     quant_type_info(kv).name);
    expect_close(got, want.host, 2e-5f, 1e-4f, what);
    expect_close(run("BRISK_NO_CUDA_ATTN_CLUSTER"), got, 2e-5f, 1e-4f, what + " vs the split kernel");
    const std::vector<float> other = run("BRISK_NO_CUDA_PREFETCH");
    ASSERT_EQ(std::memcmp(got.data(), other.data(), sizeof(float) * got.size()), 0) << what << " vs no prefetch";
   }
  }
}

// Steps of 2..8 tokens (a speculative verify group of one sequence at consecutive positions, one
// whose lengths straddle two chunk lengths, and tokens of several sequences): every row of the
// attention bit-equal to the attention of its token alone, over F16 / BF16 caches at head_dim 64 /
// 128 / 256 / 512 (the cluster kernel, a cluster per token; up to 8 query heads per KV head), an
// F32 cache (the split kernel, one token's splits), with and without a window; close to the
// reference.
TEST(CudaBackend, AttentionRowsOfAStepEqualOneToken) {
  REQUIRE_GPU(be);
  struct Case { int32_t n_head, n_head_kv, hd; int32_t window; int64_t cap; QuantType kv; };
  for (const Case cs : {Case{32, 8, 128, 0, 3072, QuantType::F16}, Case{8, 2, 64, 0, 1024, QuantType::BF16},
                        Case{64, 8, 128, 0, 1024, QuantType::F16}, Case{16, 8, 256, 0, 4096, QuantType::BF16},
                        Case{14, 2, 64, 100, 2048, QuantType::F16}, Case{16, 4, 128, 0, 256, QuantType::BF16},
                        Case{8, 2, 256, 0, 1024, QuantType::F16}, Case{8, 1, 512, 0, 1024, QuantType::BF16},
                        Case{4, 2, 40, 0, 256, QuantType::F32},
                        Case{4, 2, 256, 0, 256, QuantType::F32}}) {
    Cache c = make_cache(*be, cs.kv, 3, cs.cap, int64_t(cs.n_head_kv) * cs.hd, 51);
    const int64_t qw = int64_t(cs.n_head) * cs.hd;
    for (const int32_t n : {2, 5, 8}) {
      for (const int shape : {0, 1, 2}) {
        // 0: consecutive positions; 1: their lengths straddle a multiple of 16 (two chunk
        // lengths in the group); 2: tokens of 3 sequences.
        const bool several = shape == 2;
        std::vector<int32_t> seq, pos;
        for (int32_t i = 0; i < n; ++i) {
          seq.push_back(several ? i % 3 : 1);
          pos.push_back(several ? int32_t(cs.cap / 2) - 7 * i : int32_t(cs.cap / 3) / 16 * 16 - (shape ? 3 : 0) + i);
        }
        DevMat q(*be, n, qw, randn(size_t(n * qw), 52)), want(*be, n, qw);
        AttentionArgs a{.out = {}, .q = q.dev, .k_cache = c.k, .v_cache = c.v, .seq = seq.data(), .pos = pos.data(),
                        .n_head = cs.n_head, .n_head_kv = cs.n_head_kv, .head_dim = cs.hd,
                        .scale = 1.0f / std::sqrt(float(cs.hd)), .window = cs.window};
        DevMat out(*be, n, qw);
        a.out = out.dev;
        be->attention(a);
        const std::vector<float> got = out.fetch();
        const std::string what = str_cat("attention heads ", cs.n_head, "/", cs.n_head_kv, " hd ", cs.hd, " window ",
                                         cs.window, " ", quant_type_info(cs.kv).name, " ", n,
                                         several ? " tokens of 3 sequences from " : " tokens of one sequence from ", pos[0]);
        host_reference_attention(a, q, c, want);
        expect_close(got, want.host, 2e-5f, 1e-4f, what);
        for (int32_t i = 0; i < n; ++i) {
          AttentionArgs one = a;
          one.q = Mat{.data = q.dev.data + int64_t(i) * qw, .rows = 1, .cols = qw};
          one.seq = seq.data() + i;
          one.pos = pos.data() + i;
          const std::vector<float> alone = attention_output(*be, one, qw, nullptr);
          ASSERT_EQ(0, std::memcmp(alone.data(), got.data() + size_t(i) * size_t(qw), sizeof(float) * size_t(qw)))
              << what << ": row " << i << " differs from its token alone";
        }
      }
    }
  }
}

// A verify step's rope of q / k, KV store and attention in a graph step (3 tokens: one launch,
// the cluster attention rotating the step's rows itself; 5 and 8: the rope + store launch before
// it), at positions whose chunks are cut alike, straddle two chunk lengths, or span several
// tiles, and two interleaved sequences: the outputs, the rotated q and both caches bit-equal to
// the same tokens decoded one per step and to the rope + store as a launch of its own
// (BRISK_NO_CUDA_VERIFY_ROPE, BRISK_NO_CUDA_ATTN_ROPE).
TEST(CudaBackend, VerifyStepAttentionWithRope) {
  REQUIRE_GPU(probe);
  struct Case { int32_t n_head, n_head_kv, hd, n_rot; bool neox; int64_t cap; QuantType kv; };
  for (const Case cs : {Case{32, 8, 128, 128, false, 3072, QuantType::F16}, Case{14, 2, 64, 64, true, 2048, QuantType::BF16},
                        Case{64, 8, 128, 64, true, 1024, QuantType::F16}, Case{8, 2, 256, 128, false, 1024, QuantType::BF16}}) {
    RopeTable tab{.n_rot = cs.n_rot, .inv_freq = {}, .attn_factor = 1.0f, .neox = cs.neox};
    for (int i = 0; i < cs.n_rot / 2; ++i) tab.inv_freq.push_back(std::pow(10000.0f, -2.0f * float(i) / float(cs.n_rot)));
    const int64_t qw = int64_t(cs.n_head) * cs.hd, kw = int64_t(cs.n_head_kv) * cs.hd;
    for (const int32_t n : {3, 5, 8}) {
      for (const int shape : {0, 1, 2}) {
        std::vector<int32_t> seq, pos;
        const int32_t p0 = int32_t(cs.cap / 3) / 16 * 16 - (shape == 1 ? 3 : 0);
        for (int32_t i = 0; i < n; ++i) {
          seq.push_back(shape == 2 ? i % 2 : 0);
          pos.push_back(shape == 2 ? p0 - 9 * (i % 2) + i / 2 : p0 + i);
        }
        const std::vector<float> q0 = randn(size_t(n * qw), 71), k0 = randn(size_t(n * kw), 72), v0 = randn(size_t(n * kw), 73);
        struct Out { std::vector<float> out, q; std::vector<uint8_t> k, v; };
        // rows [r0, r0 + nr) of the step as steps of `per` tokens (graphs: eager, captured, replayed).
        auto run = [&](const char* env, int per) {
          std::unique_ptr<ScopedEnv> off;
          if (env) off = std::make_unique<ScopedEnv>(env, "1");
          auto be = make_cuda_backend(0, true);
          Cache c = make_cache(*be, cs.kv, 2, cs.cap, kw, 74);
          Out o{std::vector<float>(q0.size()), std::vector<float>(q0.size()), {}, {}};
          for (int32_t r0 = 0; r0 < n; r0 += per) {
            const int32_t nr = std::min(per, n - r0);
            const std::vector<int32_t> sq(seq.begin() + r0, seq.begin() + r0 + nr), ps(pos.begin() + r0, pos.begin() + r0 + nr);
            std::vector<int32_t> ids(static_cast<size_t>(nr), 0), rows(static_cast<size_t>(nr));
            std::iota(rows.begin(), rows.end(), 0);
            DevMat q(*be, nr, qw), k(*be, nr, kw), v(*be, nr, kw), out(*be, nr, qw);
            for (int step = 0; step < 3; ++step) {
              be->copy(q.dev.data, q0.data() + size_t(r0) * qw, sizeof(float) * size_t(nr * qw));
              be->copy(k.dev.data, k0.data() + size_t(r0) * kw, sizeof(float) * size_t(nr * kw));
              be->copy(v.dev.data, v0.data() + size_t(r0) * kw, sizeof(float) * size_t(nr * kw));
              be->begin_step({.n_tok = nr, .ids = ids.data(), .pos = ps.data(), .seq = sq.data(), .n_out = nr,
                              .out_rows = rows.data()});
              be->rope({.x = q.dev, .pos = ps.data(), .n_head = cs.n_head, .head_dim = cs.hd, .table = &tab});
              be->rope({.x = k.dev, .pos = ps.data(), .n_head = cs.n_head_kv, .head_dim = cs.hd, .table = &tab});
              be->kv_store({.k = k.dev, .v = v.dev, .k_cache = c.k, .v_cache = c.v, .seq = sq.data(), .pos = ps.data()});
              be->attention({.out = out.dev, .q = q.dev, .k_cache = c.k, .v_cache = c.v, .seq = sq.data(), .pos = ps.data(),
                             .n_head = cs.n_head, .n_head_kv = cs.n_head_kv, .head_dim = cs.hd,
                             .scale = 1.0f / std::sqrt(float(cs.hd))});
              be->end_step();
            }
            const std::vector<float> got = out.fetch(), qr = q.fetch();
            std::copy(got.begin(), got.end(), o.out.begin() + ptrdiff_t(r0) * qw);
            std::copy(qr.begin(), qr.end(), o.q.begin() + ptrdiff_t(r0) * qw);
          }
          o.k.resize(c.hk.size());
          o.v.resize(c.hv.size());
          be->copy(o.k.data(), c.k.data, o.k.size());
          be->copy(o.v.data(), c.v.data, o.v.size());
          return o;
        };
        const Out got = run(nullptr, n);
        const std::string what = str_cat("verify attention with rope, heads ", cs.n_head, "/", cs.n_head_kv, " hd ", cs.hd,
                                         " n_rot ", cs.n_rot, " ", quant_type_info(cs.kv).name, ", ", n, " tokens",
                                         shape == 2 ? " of 2 sequences" : "", " from position ", p0);
        for (const auto& [env, per] : {std::pair<const char*, int>{nullptr, 1}, {"BRISK_NO_CUDA_VERIFY_ROPE", n},
                                       {"BRISK_NO_CUDA_ATTN_ROPE", n}}) {
          const Out other = run(env, per);
          const std::string w = str_cat(what, " vs ", env ? env : "one token per step");
          EXPECT_EQ(std::memcmp(got.out.data(), other.out.data(), sizeof(float) * got.out.size()), 0) << w << ": outputs";
          EXPECT_EQ(std::memcmp(got.q.data(), other.q.data(), sizeof(float) * got.q.size()), 0) << w << ": rotated q";
          EXPECT_TRUE(got.k == other.k) << w << ": K cache";
          EXPECT_TRUE(got.v == other.v) << w << ": V cache";
        }
      }
    }
  }
}

// Decode-shaped residual add + RMS norm + matmuls (in a graph step the norm launch also writes
// the next matmul's BF16-rounded or Q8_K-quantized input, and is written over its input), and a
// gated activation + BF16 matmul (rounding fused the same way) and + Q4_K matmul (Q8_K
// quantization fused, one block per activation block): rows of 4096 run the norm on 16
// blocks each (a one-token norm into Q8_K keeps one block, BRISK_NO_CUDA_NORM_WHOLE_Q8K splits
// it too). Against the CPU reference, and bit-equal to one block per row
// (BRISK_NO_CUDA_NORM_SPLIT), to split Q8_K norms and to the launch-by-launch backend (no fusion).
TEST(CudaBackend, SplitRmsNormMatchesOneBlock) {
  std::string reason;
  if (cuda::enumerate_devices(&reason).empty()) GTEST_SKIP() << "no CUDA device: " << reason;
  const int64_t n_embd = 4096, n_out = 64;
  std::vector<QuantWeight> keep;
  keep.push_back(make_weight(QuantType::BF16, n_out, n_embd, 61));
  keep.push_back(make_weight(QuantType::Q8_0, n_out, n_embd, 62));
  keep.push_back(make_weight(QuantType::Q4_K, n_out, n_embd, 63));
  const std::vector<float> norm_w = randn(size_t(n_embd), 64);
  for (const int64_t rows : {int64_t(1), int64_t(3)}) {
    const std::vector<float> x0 = randn(size_t(rows * n_embd), 65, 3.0f), t0 = randn(size_t(rows * n_embd), 66);
    struct Out { std::vector<float> sum, norm, act, ob, o8, o4, og, act2, ok; };
    auto run = [&](bool graphs, const char* env) {
      std::unique_ptr<ScopedEnv> off;
      if (env) off = std::make_unique<ScopedEnv>(env, "1");
      auto be = make_cuda_backend(0, graphs);
      DevMat x(*be, rows, n_embd), t(*be, rows, n_embd, t0), h(*be, rows, n_embd), act(*be, rows, n_embd),
          ob(*be, rows, n_out), o8(*be, rows, n_out), o4(*be, rows, n_out), og(*be, rows, n_out),
          act2(*be, rows, n_embd), ok(*be, rows, n_out);
      std::vector<int32_t> ids(size_t(rows), 0), pos(size_t(rows), 0), seq(size_t(rows), 0), out_rows(size_t(rows), 0);
      for (int64_t r = 0; r < rows; ++r) out_rows[size_t(r)] = int32_t(r);
      for (int step = 0; step < 3; ++step) {  // eager, captured, replayed
        be->copy(x.dev.data, x0.data(), sizeof(float) * x0.size());
        be->begin_step({.n_tok = int32_t(rows), .ids = ids.data(), .pos = pos.data(), .seq = seq.data(),
                        .n_out = int32_t(rows), .out_rows = out_rows.data()});
        be->add({.out = x.dev, .a = x.dev, .b = t.dev});
        be->rms_norm({.out = h.dev, .x = x.dev, .weight = norm_w.data(), .eps = 1e-5f});
        be->matmul({.out = ob.dev, .x = h.dev, .w = keep[0].w});
        be->matmul({.out = o8.dev, .x = h.dev, .w = keep[1].w});
        be->add({.out = x.dev, .a = x.dev, .b = t.dev});
        be->rms_norm({.out = h.dev, .x = x.dev, .weight = norm_w.data(), .eps = 1e-5f});
        be->matmul({.out = o4.dev, .x = h.dev, .w = keep[2].w});
        be->gated_act({.out = act.dev, .gate = h.dev, .up = t.dev});
        be->matmul({.out = og.dev, .x = act.dev, .w = keep[0].w});
        be->gated_act({.out = act2.dev, .gate = x.dev, .up = h.dev});
        be->matmul({.out = ok.dev, .x = act2.dev, .w = keep[2].w});
        be->end_step();
      }
      return Out{x.fetch(), h.fetch(), act.fetch(), ob.fetch(), o8.fetch(), o4.fetch(), og.fetch(), act2.fetch(),
                 ok.fetch()};
    };
    const Out got = run(true, nullptr);
    // Reference: x + 2 t, its norm.
    std::vector<float> sum(x0.size()), norm(x0.size());
    for (size_t i = 0; i < sum.size(); ++i) sum[i] = (x0[i] + t0[i]) + t0[i];
    ref::rms_norm({.out = Mat{.data = norm.data(), .rows = rows, .cols = n_embd},
                   .x = Mat{.data = sum.data(), .rows = rows, .cols = n_embd}, .weight = norm_w.data(), .eps = 1e-5f});
    expect_close(got.sum, sum, 0.0f, 0.0f, str_cat("residual sum, rows ", rows));
    expect_close(got.norm, norm, 1e-5f, 1e-5f, str_cat("split rms_norm, rows ", rows));
    for (const auto& [graphs, env] : {std::pair<bool, const char*>{true, "BRISK_NO_CUDA_NORM_SPLIT"},
                                      std::pair<bool, const char*>{true, "BRISK_NO_CUDA_NORM_WHOLE_Q8K"},
                                      std::pair<bool, const char*>{false, nullptr}}) {
      const Out other = run(graphs, env);
      const std::string what = str_cat("rows ", rows, graphs ? " graphs" : " eager", env ? " " : "", env ? env : "");
      auto same = [&](const std::vector<float>& u, const std::vector<float>& v, const char* name) {
        ASSERT_EQ(u.size(), v.size());
        EXPECT_EQ(std::memcmp(u.data(), v.data(), sizeof(float) * u.size()), 0) << what << ": " << name;
      };
      same(other.sum, got.sum, "sum");
      same(other.norm, got.norm, "norm");
      same(other.act, got.act, "gated act");
      same(other.ob, got.ob, "bf16 matmul");
      same(other.o8, got.o8, "q8_0 matmul");
      same(other.o4, got.o4, "q4_k matmul");
      same(other.og, got.og, "bf16 matmul of the gated act");
      same(other.act2, got.act2, "second gated act");
      same(other.ok, got.ok, "q4_k matmul of the second gated act");
    }
  }
}

// Prefill batches of one sequence at consecutive positions run the tensor-core kernel
// (attention_prefill.cu: q and probabilities in the cache type, so a looser tolerance than above).
TEST(CudaBackend, PrefillAttentionTensorCores) {
  REQUIRE_GPU(be);
  struct Case { int32_t n_head, n_head_kv, hd, window; float softcap; int32_t n_tok, p0, seq; };
  for (const Case cs : {Case{8, 2, 128, 0, 0.0f, 100, 0, 1}, Case{8, 2, 64, 0, 0.0f, 130, 37, 0},
                        Case{4, 4, 128, 50, 0.0f, 70, 20, 1}, Case{6, 2, 64, 0, 30.0f, 65, 200, 0},
                        Case{32, 8, 128, 0, 0.0f, 9, 5, 0}, Case{4, 1, 64, 7, 0.0f, 40, 0, 1}}) {
   for (const QuantType kv : {QuantType::F16, QuantType::BF16}) {
    const int64_t cap = 300, width = int64_t(cs.n_head_kv) * cs.hd;
    Cache c = make_cache(*be, kv, 2, cap, width, 31);
    std::vector<int32_t> seq(size_t(cs.n_tok), cs.seq), pos;
    for (int32_t i = 0; i < cs.n_tok; ++i) pos.push_back(cs.p0 + i);
    const int64_t n = cs.n_tok, qw = int64_t(cs.n_head) * cs.hd;
    DevMat q(*be, n, qw, randn(size_t(n * qw), 32)), out(*be, n, qw), want(*be, n, qw);
    const float scale = 1.0f / std::sqrt(float(cs.hd));
    AttentionArgs a{.out = out.dev, .q = q.dev, .k_cache = c.k, .v_cache = c.v, .seq = seq.data(), .pos = pos.data(),
                    .n_head = cs.n_head, .n_head_kv = cs.n_head_kv, .head_dim = cs.hd, .scale = scale,
                    .window = cs.window, .softcap = cs.softcap};
    be->attention(a);
    host_reference_attention(a, q, c, want);
    // q and the probabilities round to the cache's type: 11 bits of mantissa for F16, 8 for BF16.
    const float tol = kv == QuantType::BF16 ? 3e-2f : 1e-2f;
    expect_close(out.fetch(), want.host, tol, tol,
                 str_cat("prefill attention heads ", cs.n_head, "/", cs.n_head_kv, " hd ", cs.hd, " window ", cs.window,
                         " softcap ", cs.softcap, " tokens ", cs.n_tok, " from ", cs.p0, " ", quant_type_info(kv).name));
   }
  }
}

// Attention and the KV store over paged caches whose block tables are scrambled (each
// sequence's blocks out of order) or shared (sequence 1's first block is sequence 0's), blocks
// of 16 and 64 positions (tiles and staged chunks then cross blocks): decode (staged and not,
// split), several sequences, and tensor-core prefill, against the CPU reference on the same table.
TEST(CudaBackend, AttentionPagedTables) {
  REQUIRE_GPU(be);
  struct Case { int32_t n_head, n_head_kv, hd; QuantType kv; };
  for (const Case cs : {Case{32, 8, 128, QuantType::F16}, Case{8, 2, 64, QuantType::F16},
                        Case{4, 4, 128, QuantType::F32}, Case{32, 8, 128, QuantType::BF16},
                        Case{32, 8, 128, QuantType::Q8_0}}) {
    for (const int32_t bs : {16, 64}) {
      for (const testing::KvLayout layout : {testing::KvLayout::scrambled, testing::KvLayout::shared}) {
        const int64_t cap = 700, width = int64_t(cs.n_head_kv) * cs.hd;
        Cache c = make_cache(*be, cs.kv, 2, cap, width, 41, bs, layout, 2);
        const std::string what = str_cat("paged attention heads ", cs.n_head, "/", cs.n_head_kv, " hd ", cs.hd, " ",
                                         quant_type_info(cs.kv).name, " block ", bs,
                                         layout == testing::KvLayout::shared ? " shared" : " scrambled");
        struct Batch { std::vector<int32_t> seq, pos; float tol; };
        std::vector<Batch> batches = {{{1}, {40}, 1e-4f}, {{0}, {699}, 1e-4f}, {{1, 0, 1}, {5, 300, 650}, 1e-4f}};
        // One sequence at consecutive positions: the tensor-core kernel (F16 / BF16 operands; Q8_0
        // caches take the split kernel).
        Batch pre{{}, {}, cs.kv == QuantType::BF16 ? 3e-2f : cs.kv == QuantType::Q8_0 ? 1e-4f : 1e-2f};
        for (int32_t i = 0; i < 100; ++i) { pre.seq.push_back(1); pre.pos.push_back(21 + i); }
        batches.push_back(pre);
        for (const Batch& b : batches) {
          const int64_t n = int64_t(b.seq.size()), qw = int64_t(cs.n_head) * cs.hd;
          DevMat q(*be, n, qw, randn(size_t(n * qw), 42)), out(*be, n, qw), want(*be, n, qw);
          AttentionArgs a{.out = out.dev, .q = q.dev, .k_cache = c.k, .v_cache = c.v, .seq = b.seq.data(),
                          .pos = b.pos.data(), .n_head = cs.n_head, .n_head_kv = cs.n_head_kv, .head_dim = cs.hd,
                          .scale = 1.0f / std::sqrt(float(cs.hd))};
          be->attention(a);
          host_reference_attention(a, q, c, want);
          expect_close(out.fetch(), want.host, b.tol, b.tol, str_cat(what, " tokens ", n));
        }
        // The store through the table.
        DevMat k(*be, 3, width, randn(size_t(3 * width), 43)), v(*be, 3, width, randn(size_t(3 * width), 44));
        const std::vector<int32_t> seq = {0, 1, 1}, pos = {17, 33, 699};
        expect_kv_store(*be, c, k, v, seq, pos, what);
      }
    }
  }
}

TEST(CudaBackend, Elementwise) {
  REQUIRE_GPU(be);
  for (const Activation act : {Activation::silu, Activation::gelu_tanh}) {
    DevMat g(*be, 3, 300, randn(900, 31, 3.0f)), u(*be, 3, 300, randn(900, 32)), out(*be, 3, 300), want(*be, 3, 300);
    be->gated_act({.out = out.dev, .gate = g.dev, .up = u.dev, .act = act});
    ref::gated_act({.out = want.hmat(), .gate = g.hmat(), .up = u.hmat(), .act = act});
    expect_close(out.fetch(), want.host, 1e-6f, 1e-5f, "gated_act");
  }
  DevMat a(*be, 4, 100, randn(400, 33)), b(*be, 4, 100, randn(400, 34)), want(*be, 4, 100);
  ref::add({.out = want.hmat(), .a = a.hmat(), .b = b.hmat()});
  be->add({.out = a.dev, .a = a.dev, .b = b.dev});
  expect_close(a.fetch(), want.host, 0.0f, 0.0f, "add in place");

  DevMat x(*be, 6, 40, randn(240, 35)), rows_out(*be, 3, 40);
  const std::vector<int32_t> rows = {5, 0, 5};
  be->get_rows({.out = rows_out.dev, .x = x.dev, .rows = rows.data()});
  std::vector<float> expect;
  for (int32_t r : rows) expect.insert(expect.end(), x.host.begin() + r * 40, x.host.begin() + (r + 1) * 40);
  expect_close(rows_out.fetch(), expect, 0.0f, 0.0f, "get_rows");
}

TEST(CudaBackend, Embedding) {
  REQUIRE_GPU(be);
  std::vector<QuantWeight> tables;  // alive as long as the backend, like model weights
  for (const QuantType t : {QuantType::F32, QuantType::Q8_0, QuantType::Q6_K, QuantType::Q5_K}) {
    tables.push_back(make_weight(t, 50, 256, 41));
    const QuantWeight& tab = tables.back();
    const std::vector<int32_t> ids = {49, 0, 7, 7};
    DevMat out(*be, 4, 256), want(*be, 4, 256);
    be->embedding({.out = out.dev, .table = tab.w, .ids = ids.data(), .scale = 1.5f});
    ref::embedding({.out = want.hmat(), .table = tab.w, .ids = ids.data(), .scale = 1.5f});
    const float rtol = cuda::weight_format_on_device(t) ? 1e-6f : 8e-3f;
    expect_close(out.fetch(), want.host, 1e-6f, rtol, str_cat("embedding ", quant_type_info(t).name));
  }
}

// One-token decode layers in graph steps, where the queued launches are fused: the ropes of q / k
// and the KV store inside the attention launch (BRISK_NO_CUDA_ATTN_ROPE), the o-projection's
// activation quantization / rounding inside the cluster attention (BRISK_NO_CUDA_ATTN_QUANT;
// Q8_0, Q8_K for Q4_K, BF16), the residual adds in the epilogue of the matmul before them
// (BRISK_NO_CUDA_GEMV_ADD; the matmul's output as the add's first and as its second operand;
// Q8_0, Q4_K and BF16 o-projections). Positions 0 .. 3071 (cluster chunks of up to 192
// positions; the split kernel's staged and unstaged chunks for the F32 cache), F16, BF16, F32
// and Q8_0 caches (Q8_0: rope and store stay separate launches), normal and NeoX partial
// rotary, head groups of 2, 4 and 8, head_dim 64 / 128 / 256 / 512, and Gemma's per-head q / k / v
// norms as one launch (BRISK_NO_CUDA_NORM_MERGE: a launch each).
// Everything the layers write (residual, rotated q and k, attention output, both caches) is
// bit-equal with the fusions switched off, launch by launch, and with BRISK_NO_CUDA_PREFETCH.
TEST(CudaBackend, FusedDecodeLayerMatchesUnfused) {
  std::string reason;
  if (cuda::enumerate_devices(&reason).empty()) GTEST_SKIP() << "no CUDA device: " << reason;
  struct Case { int32_t n_head, n_head_kv, hd, n_rot; bool neox; QuantType kv, wo; bool split = false, qkv_norm = false; };
  const int64_t n_embd = 512, cap = 3072;
  const std::vector<int32_t> positions = {0, 1, 2, 5, 63, 64, 65, 300, 1000, 2200, 3000, 3071};
  std::vector<QuantWeight> keep;
  for (const Case cs : {Case{32, 8, 128, 128, false, QuantType::F16, QuantType::Q8_0},
                        Case{16, 2, 64, 32, true, QuantType::F32, QuantType::Q4_K},
                        Case{16, 2, 64, 32, true, QuantType::F16, QuantType::Q4_K},
                        Case{32, 8, 128, 128, false, QuantType::F16, QuantType::BF16},
                        Case{16, 2, 64, 32, true, QuantType::BF16, QuantType::Q4_K},
                        Case{32, 8, 128, 128, false, QuantType::BF16, QuantType::Q8_0},
                        Case{32, 8, 128, 128, false, QuantType::Q8_0, QuantType::Q8_0},
                        Case{32, 8, 128, 128, false, QuantType::F16, QuantType::Q8_0, true},
                        Case{16, 8, 256, 256, true, QuantType::F16, QuantType::Q4_K, false, true},
                        Case{8, 4, 256, 128, true, QuantType::BF16, QuantType::Q8_0, false, true},
                        Case{32, 8, 128, 128, false, QuantType::F16, QuantType::Q8_0, false, true},
                        Case{8, 1, 512, 128, true, QuantType::F16, QuantType::Q4_K, false, true}}) {
    const int64_t qw = int64_t(cs.n_head) * cs.hd, kw = int64_t(cs.n_head_kv) * cs.hd;
    keep.push_back(make_weight(QuantType::Q8_0, qw, n_embd, 71));
    keep.push_back(make_weight(QuantType::Q8_0, kw, n_embd, 72));
    keep.push_back(make_weight(QuantType::Q8_0, kw, n_embd, 73));
    keep.push_back(make_weight(cs.wo, n_embd, qw, 74));
    keep.push_back(make_weight(QuantType::Q4_K, n_embd, n_embd, 75));
    const size_t b = keep.size() - 5;
    RopeTable tab{.n_rot = cs.n_rot, .inv_freq = {}, .attn_factor = cs.neox ? 0.9f : 1.0f, .neox = cs.neox};
    for (int i = 0; i < cs.n_rot / 2; ++i)
      tab.inv_freq.push_back(std::pow(10000.0f, -2.0f * float(i) / float(cs.n_rot)));
    const std::vector<float> norm_w = randn(size_t(n_embd), 76), x0 = randn(size_t(n_embd), 77, 2.0f);
    const std::vector<float> q_norm_w = randn(size_t(cs.hd), 79), k_norm_w = randn(size_t(cs.hd), 80);
    struct Out { std::vector<std::vector<float>> x, q, k, att; std::vector<uint8_t> kc, vc; size_t launches = 0; };
    auto run = [&](bool graphs, bool fused, bool prefetch = true, bool merge_norms = true) {
      std::vector<std::unique_ptr<ScopedEnv>> off;
      if (!prefetch) off.push_back(std::make_unique<ScopedEnv>("BRISK_NO_CUDA_PREFETCH", "1"));
      if (!merge_norms) off.push_back(std::make_unique<ScopedEnv>("BRISK_NO_CUDA_NORM_MERGE", "1"));
      if (cs.split) off.push_back(std::make_unique<ScopedEnv>("BRISK_NO_CUDA_ATTN_CLUSTER", "1"));
      if (!fused)
        for (const char* env : {"BRISK_NO_CUDA_ATTN_ROPE", "BRISK_NO_CUDA_GEMV_ADD", "BRISK_NO_CUDA_ATTN_QUANT",
                                "BRISK_NO_CUDA_NORM_MERGE"})
          off.push_back(std::make_unique<ScopedEnv>(env, "1"));
      auto be = make_cuda_backend(0, graphs);
      Cache c = make_cache(*be, cs.kv, 2, cap, kw, 78);
      DevMat x(*be, 1, n_embd, x0), h(*be, 1, n_embd), q(*be, 1, qw), k(*be, 1, kw), v(*be, 1, kw), att(*be, 1, qw),
          o(*be, 1, n_embd), g(*be, 1, n_embd);
      Out out;
      int32_t id = 0, pos = 0, seq = 1, row = 0;
      for (const int32_t p : positions) {
        pos = p;
        be->begin_step({.n_tok = 1, .ids = &id, .pos = &pos, .seq = &seq, .n_out = 1, .out_rows = &row});
        be->rms_norm({.out = h.dev, .x = x.dev, .weight = norm_w.data(), .eps = 1e-5f});
        be->matmul({.out = q.dev, .x = h.dev, .w = keep[b].w});
        be->matmul({.out = k.dev, .x = h.dev, .w = keep[b + 1].w});
        be->matmul({.out = v.dev, .x = h.dev, .w = keep[b + 2].w});
        if (cs.qkv_norm) {  // Gemma's per-head q / k / v norms (v without a weight), in place
          be->rms_norm({.out = q.dev, .x = q.dev, .weight = q_norm_w.data(), .group = cs.hd, .eps = 1e-6f});
          be->rms_norm({.out = k.dev, .x = k.dev, .weight = k_norm_w.data(), .group = cs.hd, .eps = 1e-6f});
          be->rms_norm({.out = v.dev, .x = v.dev, .weight = nullptr, .group = cs.hd, .eps = 1e-6f});
        }
        be->rope({.x = q.dev, .pos = &pos, .n_head = cs.n_head, .head_dim = cs.hd, .table = &tab});
        be->rope({.x = k.dev, .pos = &pos, .n_head = cs.n_head_kv, .head_dim = cs.hd, .table = &tab});
        be->kv_store({.k = k.dev, .v = v.dev, .k_cache = c.k, .v_cache = c.v, .seq = &seq, .pos = &pos});
        be->attention({.out = att.dev, .q = q.dev, .k_cache = c.k, .v_cache = c.v, .seq = &seq, .pos = &pos,
                       .n_head = cs.n_head, .n_head_kv = cs.n_head_kv, .head_dim = cs.hd,
                       .scale = 1.0f / std::sqrt(float(cs.hd))});
        be->matmul({.out = o.dev, .x = att.dev, .w = keep[b + 3].w});
        be->add({.out = x.dev, .a = x.dev, .b = o.dev});
        be->rms_norm({.out = h.dev, .x = x.dev, .weight = norm_w.data(), .eps = 1e-5f});
        be->matmul({.out = g.dev, .x = h.dev, .w = keep[b + 4].w});
        be->add({.out = x.dev, .a = g.dev, .b = x.dev});
        be->end_step();
        out.x.push_back(x.fetch());
        out.q.push_back(q.fetch());
        out.k.push_back(k.fetch());
        out.att.push_back(att.fetch());
      }
      const size_t bytes = size_t(c.k.n_blocks) * size_t(c.k.block_size) * c.k.row_bytes;
      out.kc.resize(bytes);
      out.vc.resize(bytes);
      be->copy(out.kc.data(), c.k.data, bytes);
      be->copy(out.vc.data(), c.v.data, bytes);
      if (graphs) {
        EXPECT_GE(cuda_graph_replays(*be), positions.size() - 3);  // the first steps run eager, then capture
      }
      out.launches = cuda_step_launches(*be);
      return out;
    };
    const Out got = run(true, true);
    if (cs.qkv_norm) {  // the three norms in one launch, the same bits as one launch each
      const Out apart = run(true, true, true, false);
      EXPECT_EQ(got.launches + 2, apart.launches) << "q / k / v norms of heads " << cs.n_head << " hd " << cs.hd;
      for (size_t i = 0; i < positions.size(); ++i) {
        EXPECT_EQ(got.q[i], apart.q[i]) << "norms apart, pos " << positions[i];
        EXPECT_EQ(got.x[i], apart.x[i]) << "norms apart, pos " << positions[i];
      }
      EXPECT_EQ(got.kc, apart.kc);
      EXPECT_EQ(got.vc, apart.vc);
    }
    // split: the split kernel's streamed chunks (the cache's 3072 positions over 33 splits: up to
    // 94 rows, two tiles), with the rope + KV store inside the attention launch.
    for (const auto& [graphs, fused, prefetch] : {std::tuple{true, false, true}, std::tuple{false, true, true},
                                                  std::tuple{true, true, false}}) {
      const Out other = run(graphs, fused, prefetch);
      const std::string what = str_cat("heads ", cs.n_head, "/", cs.n_head_kv, " hd ", cs.hd, graphs ? " graphs" : " eager",
                                       fused ? "" : " unfused", prefetch ? "" : " no prefetch", cs.split ? " split" : "");
      for (size_t i = 0; i < positions.size(); ++i) {
        const std::string at = str_cat(what, " pos ", positions[i], ": ");
        auto same = [&](const std::vector<float>& u, const std::vector<float>& w, const char* name) {
          ASSERT_EQ(u.size(), w.size());
          EXPECT_EQ(std::memcmp(u.data(), w.data(), sizeof(float) * u.size()), 0) << at << name;
        };
        same(got.x[i], other.x[i], "residual");
        same(got.q[i], other.q[i], "rotated q");
        same(got.k[i], other.k[i], "rotated k");
        same(got.att[i], other.att[i], "attention");
        EXPECT_TRUE(std::isfinite(got.x[i][0])) << at;
      }
      EXPECT_EQ(got.kc, other.kc) << what << ": K cache";
      EXPECT_EQ(got.vc, other.vc) << what << ": V cache";
    }
  }
}

// Graph steps of 1, 3 and 8 tokens (the GEMV's token counts) whose decode matmuls are followed
// by a residual add of their output (as first and as second operand, bias or not; Q8_0, Q4_K,
// Q6_K, F32 weights): the add runs in the GEMV's epilogue, and the output, the sum and the norm
// after it are bit-equal to BRISK_NO_CUDA_GEMV_ADD and to launch by launch.
TEST(CudaBackend, MatmulResidualAddMatchesUnfused) {
  std::string reason;
  if (cuda::enumerate_devices(&reason).empty()) GTEST_SKIP() << "no CUDA device: " << reason;
  const int64_t n_in = 768, n_out = 512;
  std::vector<QuantWeight> keep;
  for (const QuantType t : {QuantType::Q8_0, QuantType::Q4_K, QuantType::Q6_K, QuantType::F32})
    keep.push_back(make_weight(t, n_out, n_in, 81));
  const QuantWeight w2 = make_weight(QuantType::Q8_0, n_out, n_out, 86);  // on the norm's output
  const std::vector<float> bias = randn(size_t(n_out), 82), norm_w = randn(size_t(n_out), 83);
  for (const int64_t rows : {int64_t(1), int64_t(3), int64_t(8)}) {
    const std::vector<float> x0 = randn(size_t(rows * n_in), 84), r0 = randn(size_t(rows * n_out), 85, 2.0f);
    auto run = [&](bool graphs, bool fused) {
      std::unique_ptr<ScopedEnv> off;
      if (!fused) off = std::make_unique<ScopedEnv>("BRISK_NO_CUDA_GEMV_ADD", "1");
      auto be = make_cuda_backend(0, graphs);
      DevMat x(*be, rows, n_in, x0), res(*be, rows, n_out, r0), o(*be, rows, n_out), h(*be, rows, n_out);
      std::vector<int32_t> ids(size_t(rows), 0), pos(size_t(rows), 0), seq(size_t(rows), 0), out_rows(size_t(rows), 0);
      for (int64_t r = 0; r < rows; ++r) out_rows[size_t(r)] = int32_t(r);
      std::vector<std::vector<float>> out;
      for (int step = 0; step < 3; ++step) {  // eager, captured, replayed
        be->begin_step({.n_tok = int32_t(rows), .ids = ids.data(), .pos = pos.data(), .seq = seq.data(),
                        .n_out = int32_t(rows), .out_rows = out_rows.data()});
        for (size_t i = 0; i < keep.size(); ++i) {
          be->matmul({.out = o.dev, .x = x.dev, .w = keep[i].w, .bias = i % 2 ? bias.data() : nullptr});
          if (i % 2) be->add({.out = res.dev, .a = o.dev, .b = res.dev});
          else be->add({.out = res.dev, .a = res.dev, .b = o.dev});
          be->rms_norm({.out = h.dev, .x = res.dev, .weight = norm_w.data(), .eps = 1e-5f});
          be->matmul({.out = o.dev, .x = h.dev, .w = w2.w});
          be->add({.out = res.dev, .a = res.dev, .b = o.dev});
        }
        be->end_step();
        out.push_back(res.fetch());
        out.push_back(o.fetch());
        out.push_back(h.fetch());
      }
      return out;
    };
    const auto got = run(true, true);
    for (const auto& [graphs, fused] : {std::pair{true, false}, std::pair{false, true}}) {
      const auto other = run(graphs, fused);
      ASSERT_EQ(got.size(), other.size());
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_EQ(std::memcmp(got[i].data(), other[i].data(), sizeof(float) * got[i].size()), 0)
            << "rows " << rows << (graphs ? " graphs unfused" : " eager") << ", output " << i;
    }
  }
}

// Decode-like steps (embedding, norm, K-quant / Q8_0 / BF16 matmuls, rope, KV store, split
// attention, gated activation) with and without CUDA graphs: bit-identical outputs at every
// step, and the graph backend really replays its captured step.
std::vector<std::vector<float>> run_steps(Backend& be, int n_steps, std::vector<QuantWeight>& keep) {
  const int64_t n_embd = 256, n_head = 4, n_head_kv = 2, hd = 64, vocab = 40, cap = 200;
  keep.push_back(make_weight(QuantType::Q8_0, vocab, n_embd, 51));
  keep.push_back(make_weight(QuantType::Q4_K, n_head * hd, n_embd, 52));
  keep.push_back(make_weight(QuantType::Q6_K, n_head_kv * hd, n_embd, 53));
  keep.push_back(make_weight(QuantType::Q4_0, n_head_kv * hd, n_embd, 54));
  keep.push_back(make_weight(QuantType::BF16, n_embd, n_head * hd, 55));
  keep.push_back(make_weight(QuantType::Q4_K, n_embd, n_embd, 56));
  const size_t b = keep.size();
  const Weight emb = keep[b - 6].w, wq = keep[b - 5].w, wk = keep[b - 4].w, wv = keep[b - 3].w, wo = keep[b - 2].w,
               wd = keep[b - 1].w;
  auto mat = [&](int64_t cols) {
    return Mat{.data = static_cast<float*>(be.alloc(sizeof(float) * size_t(cols))), .rows = 1, .cols = cols};
  };
  const Mat x = mat(n_embd), h = mat(n_embd), q = mat(n_head * hd), k = mat(n_head_kv * hd), v = mat(n_head_kv * hd),
            att = mat(n_head * hd), o = mat(n_embd), gt = mat(n_embd), o2 = mat(n_embd);
  const size_t rb = size_t(n_head_kv * hd) * 2;
  const std::vector<int32_t> table = testing::test_kv_table(1, (cap + 15) / 16, testing::KvLayout::scrambled);
  auto* dev_table = static_cast<int32_t*>(be.alloc(sizeof(int32_t) * table.size()));
  be.copy(dev_table, table.data(), sizeof(int32_t) * table.size());
  const int64_t rows = int64_t(table.size()) * 16;
  KvView kc{.type = QuantType::F16, .data = be.alloc(rb * size_t(rows)), .width = n_head_kv * hd, .row_bytes = rb,
            .capacity = cap, .n_seq = 1, .block_size = 16, .n_blocks = int64_t(table.size()), .table = nullptr,
            .device_table = dev_table, .table_stride = int64_t(table.size())};
  KvView vc = kc;
  vc.data = be.alloc(rb * size_t(rows));
  static const std::vector<float> norm_w(size_t(n_embd), 1.25f);
  static RopeTable rope{.n_rot = int32_t(hd), .inv_freq = {}};
  if (rope.inv_freq.empty())
    for (int i = 0; i < hd / 2; ++i) rope.inv_freq.push_back(std::pow(10000.0f, -2.0f * float(i) / float(hd)));
  int32_t id = 0, pos = 0, seq = 0, row = 0;
  std::vector<std::vector<float>> outs;
  for (int step = 0; step < n_steps; ++step) {
    id = (step * 7 + 3) % int32_t(vocab);
    pos = step;
    be.begin_step({.n_tok = 1, .ids = &id, .pos = &pos, .seq = &seq, .n_out = 1, .out_rows = &row});
    be.embedding({.out = x, .table = emb, .ids = &id});
    be.rms_norm({.out = h, .x = x, .weight = norm_w.data()});
    be.matmul({.out = q, .x = h, .w = wq});
    be.matmul({.out = k, .x = h, .w = wk});
    be.matmul({.out = v, .x = h, .w = wv});
    be.rope({.x = q, .pos = &pos, .n_head = int32_t(n_head), .head_dim = int32_t(hd), .table = &rope});
    be.rope({.x = k, .pos = &pos, .n_head = int32_t(n_head_kv), .head_dim = int32_t(hd), .table = &rope});
    be.kv_store({.k = k, .v = v, .k_cache = kc, .v_cache = vc, .seq = &seq, .pos = &pos});
    be.attention({.out = att, .q = q, .k_cache = kc, .v_cache = vc, .seq = &seq, .pos = &pos, .n_head = int32_t(n_head),
                  .n_head_kv = int32_t(n_head_kv), .head_dim = int32_t(hd), .scale = 0.125f});
    be.matmul({.out = o, .x = att, .w = wo});
    be.add({.out = o, .a = o, .b = x});
    be.gated_act({.out = gt, .gate = o, .up = x});  // quantized for the Q4_K matmul inside, in a graph
    be.matmul({.out = o2, .x = gt, .w = wd});
    be.end_step();
    std::vector<float> got(static_cast<size_t>(2 * n_embd));
    be.copy(got.data(), o.data, sizeof(float) * size_t(n_embd));
    be.copy(got.data() + n_embd, o2.data, sizeof(float) * size_t(n_embd));
    outs.push_back(std::move(got));
  }
  return outs;
}

TEST(CudaBackend, GraphStepsMatchEagerBitExact) {
  std::string reason;
  if (cuda::enumerate_devices(&reason).empty()) GTEST_SKIP() << "no CUDA device: " << reason;
  std::vector<QuantWeight> keep;
  auto graphs = make_cuda_backend(0, true);
  auto eager = make_cuda_backend(0, false);
  const auto a = run_steps(*graphs, 8, keep);
  const auto b = run_steps(*eager, 8, keep);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(std::memcmp(a[i].data(), b[i].data(), sizeof(float) * a[i].size()), 0) << "step " << i;
    EXPECT_TRUE(std::isfinite(a[i][0])) << "step " << i;
  }
  for (size_t i = 1; i < a.size(); ++i) EXPECT_NE(a[i], a[0]) << "step " << i << " repeats step 0";
  EXPECT_GE(cuda_graph_replays(*graphs), 5u);  // step 1 eager, 2 captured, 3..8 replayed
  EXPECT_EQ(cuda_graph_replays(*eager), 0u);
}

// q / k in Q4_K and v in Q6_K on the same 4096 activations (a Q4_K_M layer): a graph step runs
// them as one launch (q4k_early_kernel with a Q6_K part); eager steps launch each on its own.
// Outputs must be bit-identical, and within tolerance of the reference.
// Also with rows enough for more than one wave of one row per warp (Llama-3.1-8B's q / k / v),
// where the merged launch takes two rows per warp (q4k_pair_kernel): odd row counts leave the
// last warp of a part one row.
struct MixedLaunchCase { int64_t rows[3]; QuantType v_type; };
class CudaMixedLaunch : public ::testing::TestWithParam<MixedLaunchCase> {};

TEST_P(CudaMixedLaunch, MatchesSeparate) {
  std::string reason;
  if (cuda::enumerate_devices(&reason).empty()) GTEST_SKIP() << "no CUDA device: " << reason;
  const MixedLaunchCase c = GetParam();
  const int64_t n_in = 4096;
  std::vector<QuantWeight> keep;
  keep.push_back(make_weight(QuantType::Q4_K, c.rows[0], n_in, 61));
  keep.push_back(make_weight(QuantType::Q4_K, c.rows[1], n_in, 62));
  keep.push_back(make_weight(c.v_type, c.rows[2], n_in, 63));
  const std::vector<float> xh = randn(size_t(n_in), 64);
  auto run = [&](Backend& be) {
    DevMat x(be, 1, n_in, xh);
    std::vector<DevMat> outs;
    for (const QuantWeight& q : keep) outs.emplace_back(be, 1, q.w.n_out);
    std::vector<std::vector<float>> got;
    int32_t id = 0, pos = 0, seq = 0, row = 0;
    for (int step = 0; step < 4; ++step) {  // eager, captured, replayed
      be.begin_step({.n_tok = 1, .ids = &id, .pos = &pos, .seq = &seq, .n_out = 1, .out_rows = &row});
      for (size_t i = 0; i < keep.size(); ++i) be.matmul({.out = outs[i].dev, .x = x.dev, .w = keep[i].w});
      be.end_step();
    }
    for (DevMat& o : outs) got.push_back(o.fetch());
    return got;
  };
  auto graphs = make_cuda_backend(0, true);
  auto eager = make_cuda_backend(0, false);
  const auto a = run(*graphs);
  const auto b = run(*eager);
  EXPECT_GE(cuda_graph_replays(*graphs), 1u);
  DevMat xr(*eager, 1, n_in, xh);
  for (size_t i = 0; i < keep.size(); ++i) {
    ASSERT_EQ(std::memcmp(a[i].data(), b[i].data(), sizeof(float) * a[i].size()), 0) << "matrix " << i;
    DevMat ref_out(*eager, 1, keep[i].w.n_out);
    ref::matmul({.out = ref_out.hmat(), .x = xr.hmat(), .w = keep[i].w});
    expect_close(a[i], ref_out.host, 0.2f, 1e-3f, str_cat("matrix ", i));  // sums of ~2600 |w x|: float order
  }
  // One row per warp in the merged launch: the same bits.
  ScopedEnv no_pairs("BRISK_NO_CUDA_GEMV_PAIRS", "1");
  auto single = make_cuda_backend(0, true);
  const auto c1 = run(*single);
  for (size_t i = 0; i < keep.size(); ++i)
    ASSERT_EQ(std::memcmp(a[i].data(), c1[i].data(), sizeof(float) * a[i].size()), 0) << "matrix " << i << " (pairs)";
}

// The same q / k / v for 5 tokens in graph steps (the tensor-core few-token kernel, pipelined or
// not, its Q4_K mins on the tensor cores or not): each token's rows bit-equal to a one-token step
// of that token alone (the mixed one-token launch, or separate ones when v is Q4_K).
TEST_P(CudaMixedLaunch, SeveralTokensEqualOneToken) {
  std::string reason;
  if (cuda::enumerate_devices(&reason).empty()) GTEST_SKIP() << "no CUDA device: " << reason;
  const MixedLaunchCase c = GetParam();
  const int64_t n_in = 4096, n_tok = 5;
  std::vector<QuantWeight> keep;
  keep.push_back(make_weight(QuantType::Q4_K, c.rows[0], n_in, 71));
  keep.push_back(make_weight(QuantType::Q4_K, c.rows[1], n_in, 72));
  keep.push_back(make_weight(c.v_type, c.rows[2], n_in, 73));
  const std::vector<float> xh = randn(size_t(n_tok * n_in), 74);
  decltype(make_cuda_backend(0, true)) graphs;  // a backend per switch: no graph of another one replayed
  auto run = [&](int64_t t0, int64_t rows) {
    DevMat x(*graphs, rows, n_in,
             std::vector<float>(xh.begin() + t0 * n_in, xh.begin() + (t0 + rows) * n_in));
    std::vector<DevMat> outs;
    for (const QuantWeight& q : keep) outs.emplace_back(*graphs, rows, q.w.n_out);
    const size_t n = size_t(rows);
    std::vector<int32_t> ids(n, 0), pos(n, 0), seq(n, 0), out_rows(n, 0);
    for (int64_t i = 0; i < rows; ++i) pos[size_t(i)] = out_rows[size_t(i)] = int32_t(i);
    for (int step = 0; step < 3; ++step) {  // eager, captured, replayed
      graphs->begin_step({.n_tok = int32_t(rows), .ids = ids.data(), .pos = pos.data(), .seq = seq.data(),
                          .n_out = int32_t(rows), .out_rows = out_rows.data()});
      for (size_t i = 0; i < keep.size(); ++i) graphs->matmul({.out = outs[i].dev, .x = x.dev, .w = keep[i].w});
      graphs->end_step();
    }
    std::vector<std::vector<float>> got;
    for (DevMat& o : outs) got.push_back(o.fetch());
    return got;
  };
  for (const char* env : {"", "BRISK_NO_CUDA_FEW_MMA_PIPE", "BRISK_NO_CUDA_FEW_MMA_MINS"}) {
    std::unique_ptr<ScopedEnv> sw;
    if (*env) sw = std::make_unique<ScopedEnv>(env, "1");
    graphs = make_cuda_backend(0, true);
    const auto all = run(0, n_tok);
    for (int64_t t = 0; t < n_tok; ++t) {
      const auto one = run(t, 1);
      for (size_t i = 0; i < keep.size(); ++i)
        ASSERT_EQ(std::memcmp(all[i].data() + t * keep[i].w.n_out, one[i].data(), sizeof(float) * size_t(keep[i].w.n_out)), 0)
            << "matrix " << i << " token " << t << (*env ? " under " : "") << env;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Rows, CudaMixedLaunch,
                         ::testing::Values(MixedLaunchCase{{520, 131, 130}, QuantType::Q6_K},
                                           MixedLaunchCase{{4099, 1024, 1025}, QuantType::Q6_K},
                                           MixedLaunchCase{{4099, 1024, 1025}, QuantType::Q4_K}),
                         [](const auto& info) {
                           return str_cat(info.param.rows[0], "_", quant_type_info(info.param.v_type).name);
                         });

TEST(CudaBackend, ErrorsNameTheOp) {
  REQUIRE_GPU(be);
  QuantWeight q = make_weight(QuantType::F32, 8, 64, 1);
  DevMat x(*be, 1, 32), out(*be, 1, 8);
  EXPECT_THROW(be->matmul({.out = out.dev, .x = x.dev, .w = q.w}), Error);
  Cache c = make_cache(*be, QuantType::Q4_0, 1, 4, 64, 2);
  DevMat k(*be, 1, 64), v(*be, 1, 64);
  const std::vector<int32_t> zero = {0};
  try {
    be->kv_store({.k = k.dev, .v = v.dev, .k_cache = c.k, .v_cache = c.v, .seq = zero.data(), .pos = zero.data()});
    FAIL() << "q4_0 KV cache accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kv_store"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_backend("cuda:99", 1), Error);
  EXPECT_THROW(make_backend("tpu", 1), Error);
}

#endif

}  // namespace
}  // namespace brisk
