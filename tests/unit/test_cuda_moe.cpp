// The CUDA mixture-of-experts op against the CPU backend's: every device weight format (and
// one converted to BF16 at upload), 1 token (the per-pair path of decode) and 9 / 40 / 130
// tokens (the pairs gathered in expert order: grouped launches for runs of at most 64 rows,
// on the tensor cores for prompts of more than 64 tokens or as GEMV with
// BRISK_NO_CUDA_MOE_MMA, the GEMM beyond; each expert apart with BRISK_NO_CUDA_MOE_ITEMS; the per-pair path again
// with BRISK_NO_CUDA_MOE_GROUPED, bit-equal to the grouped launches), top-k of 1 / 2 / 3 / all,
// with and without renormalization, SiLU and GELU, 6 and 40 experts; the fused decode
// launches against the unfused ones; and the routing's tie rule. Skips when the build has no
// CUDA backend or the machine has no GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "moe_experts.h"
#include "random_values.h"
#include "scoped_env.h"
#include "backend/backend.h"
#include "core/error.h"
#include "kernels/cpu/ops.h"
#include "quant/types.h"
#ifdef BRISK_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_devices.h"
#endif

namespace brisk {
namespace {

#ifndef BRISK_HAVE_CUDA
TEST(CudaMoe, MatchesCpuBackend) { GTEST_SKIP() << "CUDA backend not built"; }
#else

using test::Experts;
using test::make_experts;

// A device copy of host floats, freed with the backend.
float* to_device(Backend& be, const std::vector<float>& v) {
  auto* p = static_cast<float*>(be.alloc(sizeof(float) * v.size()));
  be.copy(p, v.data(), sizeof(float) * v.size());
  return p;
}

std::vector<float> run_moe(Backend& be, MoeArgs a, bool device) {
  const int64_t n = a.out.rows * a.out.cols;
  std::vector<float> out(size_t(n), 7.0f);
  if (!device) {
    a.out.data = out.data();
    be.moe(a);
    return out;
  }
  std::vector<float> x(a.x.data, a.x.data + a.x.rows * a.x.cols);
  std::vector<float> l(a.logits.data, a.logits.data + a.logits.rows * a.logits.cols);
  a.x.data = to_device(be, x);
  a.logits.data = to_device(be, l);
  a.out.data = to_device(be, out);
  be.moe(a);
  be.synchronize();
  be.copy(out.data(), a.out.data, sizeof(float) * out.size());
  return out;
}

TEST(CudaMoe, MatchesCpuBackend) {
  std::string reason;
  if (cuda::enumerate_devices(&reason).empty()) GTEST_SKIP() << "no CUDA device: " << reason;
  auto gpu = make_cuda_backend(0);
  auto cpu = make_cpu_backend(2);
  const int64_t n_embd = 256, n_ff = 512;
  std::vector<Experts> keep;  // alive as long as the backends, like model weights
  for (const int32_t n_expert : {6, 40}) {
    for (const QuantType type : {QuantType::F32, QuantType::F16, QuantType::BF16, QuantType::Q8_0, QuantType::Q4_0,
                                 QuantType::Q5_0, QuantType::Q4_K, QuantType::Q6_K, QuantType::Q5_K}) {
      if (n_expert == 40 && type != QuantType::Q8_0 && type != QuantType::Q4_K) continue;
      keep.push_back(make_experts(type, n_embd, n_ff, n_expert, 3));
      keep.push_back(make_experts(type, n_embd, n_ff, n_expert, 4));
      // Down in another format than gate / up (Q4_K_M stores some as Q6_K).
      keep.push_back(make_experts(type == QuantType::Q4_K ? QuantType::Q6_K : type, n_ff, n_embd, n_expert, 5));
      const Experts& gate = keep[keep.size() - 3];
      const Experts& up = keep[keep.size() - 2];
      const Experts& down = keep[keep.size() - 1];
      for (const int64_t n_tok : {1, 9, 40, 130}) {
        if (n_tok == 130 && n_expert != 6) continue;
        const std::vector<float> x = test::gaussian(size_t(n_tok * n_embd), 1, 1.0f);
        const std::vector<float> logits = test::gaussian(size_t(n_tok * n_expert), 2, 2.0f);
        // 130 tokens over 6 experts: k = 3 gives runs of rows on both sides of the grouped
        // launch's limit (64), k = 6 only GEMM experts.
        for (const int32_t k : {1, 2, 3, n_expert}) {
          if (k == 3 && n_tok != 130) continue;
          for (const bool norm : {false, true}) {
            for (const Activation act : {Activation::silu, Activation::gelu_tanh}) {
              if (n_tok > 1 && act == Activation::gelu_tanh && k == 1) continue;
              const MoeArgs a{.out = {.data = nullptr, .rows = n_tok, .cols = n_embd},
                              .x = {.data = const_cast<float*>(x.data()), .rows = n_tok, .cols = n_embd},
                              .logits = {.data = const_cast<float*>(logits.data()), .rows = n_tok, .cols = n_expert},
                              .gate = gate.views.data(), .up = up.views.data(), .down = down.views.data(),
                              .n_expert = n_expert, .n_used = k, .norm_topk = norm, .act = act};
              const std::vector<float> want = run_moe(*cpu, a, false);
              const std::string what = str_cat(quant_type_info(type).name, " experts=", n_expert, " tokens=", n_tok,
                                               " k=", k, " norm=", norm, " act=", int(act));
              // Same integer dot products and roundings as the CPU; float sums in another
              // order, which can move a quantized activation by one step.
              // An expert given more than 8 tokens takes the tensor-core GEMM, whose activations
              // are rounded to BF16 (prefill precision, docs/cuda.md): up to ~1.2 % here.
              auto check = [&](const std::vector<float>& got, bool gemm, const char* path) {
                float err = 0.0f, mag = 0.0f;
                for (size_t i = 0; i < got.size(); ++i) {
                  err = std::max(err, std::fabs(got[i] - want[i]));
                  mag = std::max(mag, std::fabs(want[i]));
                }
                EXPECT_GT(mag, 1e-3f) << what;
                const float tol = type == QuantType::F32 ? 1e-4f : gemm ? 3e-2f : 1e-2f;
                EXPECT_LT(err, tol * mag) << what << " " << path << " max |diff| " << err;
              };
              const std::vector<float> grouped = run_moe(*gpu, a, true);
              check(grouped, n_tok > 8, "grouped");
              if (n_tok == 9 && norm) {  // the per-pair path on the same tokens
                std::vector<float> pairs;
                {
                  ScopedEnv off("BRISK_NO_CUDA_MOE_GROUPED", "1");
                  pairs = run_moe(*gpu, a, true);
                }
                check(pairs, false, "pairs");
                // Runs of at most 64 rows: the grouped launches give each pair the bits of
                // the per-pair path.
                EXPECT_EQ(0, std::memcmp(grouped.data(), pairs.data(), sizeof(float) * pairs.size())) << what;
              }
              if ((n_tok == 9 || n_tok == 40) && norm) {  // grouped on the host: the same bits
                std::vector<float> host;
                {
                  ScopedEnv off("BRISK_NO_CUDA_MOE_DEVICE_GROUP", "1");
                  host = run_moe(*gpu, a, true);
                }
                EXPECT_EQ(0, std::memcmp(grouped.data(), host.data(), sizeof(float) * host.size())) << what;
              }
              if (n_tok > 64 && norm && act == Activation::silu) {  // prompt: GEMV runs instead of tensor cores
                ScopedEnv off("BRISK_NO_CUDA_MOE_MMA", "1");
                check(run_moe(*gpu, a, true), true, "grouped GEMV");
              }
              if (n_tok > 8 && k == 2 && norm) {  // each expert apart (the previous prefill path)
                ScopedEnv off("BRISK_NO_CUDA_MOE_ITEMS", "1");
                check(run_moe(*gpu, a, true), true, "per expert");
              }
            }
          }
        }
      }
    }
  }
}

// Float experts of rows the 16-byte units do not fit (the expert width 20 of the hybrid MoE
// fixture in F16 / BF16, 22 in every float format, a model width of 36): the expert matmuls take
// one element per unit, on the per-pair path (decode, verify groups) and the grouped one, with the
// pairs' bits equal between them, within tolerance of the CPU.
TEST(CudaMoe, FloatExpertRowsOfAnyLength) {
  std::string reason;
  if (cuda::enumerate_devices(&reason).empty()) GTEST_SKIP() << "no CUDA device: " << reason;
  auto gpu = make_cuda_backend(0);
  auto cpu = make_cpu_backend(2);
  const int32_t n_expert = 6, k = 2;
  std::vector<Experts> keep;
  for (const QuantType type : {QuantType::F32, QuantType::F16, QuantType::BF16})
    for (const int64_t n_embd : {int64_t(64), int64_t(36)})
      for (const int64_t n_ff : {int64_t(20), int64_t(22)}) {
        keep.push_back(make_experts(type, n_embd, n_ff, n_expert, 6));
        keep.push_back(make_experts(type, n_embd, n_ff, n_expert, 7));
        keep.push_back(make_experts(type, n_ff, n_embd, n_expert, 8));
        const Experts& gate = keep[keep.size() - 3];
        const Experts& up = keep[keep.size() - 2];
        const Experts& down = keep[keep.size() - 1];
        for (const int64_t n_tok : {int64_t(1), int64_t(5), int64_t(9), int64_t(40)}) {
          const std::vector<float> x = test::gaussian(size_t(n_tok * n_embd), 21, 1.0f);
          const std::vector<float> logits = test::gaussian(size_t(n_tok * n_expert), 22, 2.0f);
          const MoeArgs a{.out = {.data = nullptr, .rows = n_tok, .cols = n_embd},
                          .x = {.data = const_cast<float*>(x.data()), .rows = n_tok, .cols = n_embd},
                          .logits = {.data = const_cast<float*>(logits.data()), .rows = n_tok, .cols = n_expert},
                          .gate = gate.views.data(), .up = up.views.data(), .down = down.views.data(),
                          .n_expert = n_expert, .n_used = k, .norm_topk = true, .act = Activation::silu};
          const std::string what =
              str_cat(quant_type_info(type).name, " n_embd=", n_embd, " n_ff=", n_ff, " tokens=", n_tok);
          const std::vector<float> want = run_moe(*cpu, a, false);
          const std::vector<float> got = run_moe(*gpu, a, true);
          float err = 0.0f, mag = 0.0f;
          for (size_t i = 0; i < got.size(); ++i) {
            err = std::max(err, std::fabs(got[i] - want[i]));
            mag = std::max(mag, std::fabs(want[i]));
          }
          EXPECT_GT(mag, 1e-3f) << what;
          EXPECT_LT(err, (type == QuantType::F32 ? 1e-4f : 1e-2f) * mag) << what << " max |diff| " << err;
          if (n_tok == 9) {  // the per-pair path on the same tokens: the grouped launches' bits
            ScopedEnv off("BRISK_NO_CUDA_MOE_GROUPED", "1");
            const std::vector<float> pairs = run_moe(*gpu, a, true);
            EXPECT_EQ(0, std::memcmp(got.data(), pairs.data(), sizeof(float) * pairs.size())) << what;
          }
        }
      }
}

// Decode-sized expert rows (2048 in, 768 out: 8, 16 and 32 lanes a row): the fused launches
// (routing + quantization, gate + up, activation + quantization, down + weighted sum) give the
// bits of the launch-per-stage path, and both stay within tolerance of the CPU, with the
// fewer-lane rows and with a whole warp a row.
TEST(CudaMoe, DecodeFusionsMatchUnfusedBitExact) {
  std::string reason;
  if (cuda::enumerate_devices(&reason).empty()) GTEST_SKIP() << "no CUDA device: " << reason;
  auto gpu = make_cuda_backend(0);
  auto cpu = make_cpu_backend(2);
  const int64_t n_embd = 2048, n_ff = 768;
  const int32_t n_expert = 12;
  std::vector<Experts> keep;
  for (const QuantType type : {QuantType::Q4_K, QuantType::Q8_0, QuantType::Q4_0, QuantType::Q5_0, QuantType::Q6_K,
                               QuantType::BF16, QuantType::F32}) {
    keep.push_back(make_experts(type, n_embd, n_ff, n_expert, 21));
    keep.push_back(make_experts(type, n_embd, n_ff, n_expert, 22));
    keep.push_back(make_experts(type == QuantType::Q4_K ? QuantType::Q6_K : type, n_ff, n_embd, n_expert, 23));
    const Experts& gate = keep[keep.size() - 3];
    const Experts& up = keep[keep.size() - 2];
    const Experts& down = keep[keep.size() - 1];
    for (const int64_t n_tok : {1, 3}) {
      const std::vector<float> x = test::gaussian(size_t(n_tok * n_embd), 31, 1.0f);
      const std::vector<float> logits = test::gaussian(size_t(n_tok * n_expert), 32, 2.0f);
      for (const int32_t k : {3, 8}) {
        const MoeArgs a{.out = {.data = nullptr, .rows = n_tok, .cols = n_embd},
                        .x = {.data = const_cast<float*>(x.data()), .rows = n_tok, .cols = n_embd},
                        .logits = {.data = const_cast<float*>(logits.data()), .rows = n_tok, .cols = n_expert},
                        .gate = gate.views.data(), .up = up.views.data(), .down = down.views.data(),
                        .n_expert = n_expert, .n_used = k, .norm_topk = true, .act = Activation::silu};
        const std::string what = str_cat(quant_type_info(type).name, " tokens=", n_tok, " k=", k);
        const std::vector<float> want = run_moe(*cpu, a, false);
        const std::vector<float> fused = run_moe(*gpu, a, true);
        std::vector<float> unfused, whole_warp;
        {
          ScopedEnv off("BRISK_NO_CUDA_MOE_FUSED", "1");
          unfused = run_moe(*gpu, a, true);
        }
        {
          ScopedEnv lanes("BRISK_NO_CUDA_MOE_LANES", "1");
          whole_warp = run_moe(*gpu, a, true);
        }
        ASSERT_EQ(fused.size(), unfused.size());
        EXPECT_EQ(0, std::memcmp(fused.data(), unfused.data(), sizeof(float) * fused.size())) << what;
        float mag = 0.0f, err = 0.0f, err_w = 0.0f;
        for (size_t i = 0; i < want.size(); ++i) {
          mag = std::max(mag, std::fabs(want[i]));
          err = std::max(err, std::fabs(fused[i] - want[i]));
          err_w = std::max(err_w, std::fabs(whole_warp[i] - want[i]));
        }
        const float tol = type == QuantType::F32 ? 1e-4f : 1e-2f;
        EXPECT_GT(mag, 1e-3f) << what;
        EXPECT_LT(err, tol * mag) << what << " max |diff| " << err;
        EXPECT_LT(err_w, tol * mag) << what << " whole warp: max |diff| " << err_w;
      }
    }
  }
}

// A step of 24 tokens (grouped on the device) inside begin_step / end_step three times: run
// launch by launch, captured, replayed; every output equals the host-grouped one.
TEST(CudaMoe, DeviceGroupedStepRunsAsGraph) {
  std::string reason;
  if (cuda::enumerate_devices(&reason).empty()) GTEST_SKIP() << "no CUDA device: " << reason;
  auto gpu = make_cuda_backend(0);
  const int64_t n_embd = 256, n_ff = 512, n_tok = 24;
  const int32_t n_expert = 16, k = 4;
  std::vector<Experts> keep;
  keep.push_back(make_experts(QuantType::Q4_K, n_embd, n_ff, n_expert, 41));
  keep.push_back(make_experts(QuantType::Q4_K, n_embd, n_ff, n_expert, 42));
  keep.push_back(make_experts(QuantType::Q6_K, n_ff, n_embd, n_expert, 43));
  const std::vector<float> x = test::gaussian(size_t(n_tok * n_embd), 44, 1.0f);
  const std::vector<float> logits = test::gaussian(size_t(n_tok * n_expert), 45, 2.0f);
  MoeArgs a{.out = {.data = nullptr, .rows = n_tok, .cols = n_embd},
            .x = {.data = const_cast<float*>(x.data()), .rows = n_tok, .cols = n_embd},
            .logits = {.data = const_cast<float*>(logits.data()), .rows = n_tok, .cols = n_expert},
            .gate = keep[0].views.data(), .up = keep[1].views.data(), .down = keep[2].views.data(),
            .n_expert = n_expert, .n_used = k, .norm_topk = true, .act = Activation::silu};
  std::vector<float> want;
  {
    ScopedEnv off("BRISK_NO_CUDA_MOE_DEVICE_GROUP", "1");
    want = run_moe(*gpu, a, true);
  }
  a.x.data = to_device(*gpu, x);
  a.logits.data = to_device(*gpu, logits);
  a.out.data = to_device(*gpu, std::vector<float>(size_t(n_tok * n_embd), 7.0f));
  std::vector<int32_t> ids(static_cast<size_t>(n_tok), 1), pos(static_cast<size_t>(n_tok), 0),
      seq(static_cast<size_t>(n_tok), 0);
  for (int64_t i = 0; i < n_tok; ++i) pos[size_t(i)] = int32_t(i);
  const uint64_t replays0 = cuda_graph_replays(*gpu);
  for (int step = 0; step < 3; ++step) {
    gpu->begin_step({.n_tok = int32_t(n_tok), .ids = ids.data(), .pos = pos.data(), .seq = seq.data(), .n_out = 0,
                     .out_rows = nullptr});
    gpu->moe(a);
    gpu->end_step();
    gpu->synchronize();
    std::vector<float> got(want.size());
    gpu->copy(got.data(), a.out.data, sizeof(float) * got.size());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), sizeof(float) * got.size())) << "step " << step;
  }
  EXPECT_GE(cuda_graph_replays(*gpu) - replays0, 1u);
}

// A shared expert of the routed experts' shape run as one more slot of every token (decode, up
// to 8 tokens): routed + sigmoid(logit) * shared MLP (or weight 1 without a logit), against the
// CPU backend's routed MoE plus its shared MLP (an MoE of one expert that every token takes);
// fused and launch-per-stage alike. BRISK_NO_CUDA_MOE_SHARED (the model then runs the shared
// expert as a dense MLP) and shapes that differ are declined.
TEST(CudaMoe, SharedExpertSlotMatchesCpu) {
  std::string reason;
  if (cuda::enumerate_devices(&reason).empty()) GTEST_SKIP() << "no CUDA device: " << reason;
  auto gpu = make_cuda_backend(0);
  auto cpu = make_cpu_backend(2);
  const int64_t n_embd = 512, n_ff = 256;
  const int32_t n_expert = 16;
  std::vector<Experts> keep;
  for (const QuantType type : {QuantType::Q4_K, QuantType::Q8_0, QuantType::Q5_0, QuantType::BF16}) {
    const QuantType down_type = type == QuantType::Q4_K ? QuantType::Q6_K : type;
    keep.push_back(make_experts(type, n_embd, n_ff, n_expert, 51));
    keep.push_back(make_experts(type, n_embd, n_ff, n_expert, 52));
    keep.push_back(make_experts(down_type, n_ff, n_embd, n_expert, 53));
    keep.push_back(make_experts(type, n_embd, n_ff, 1, 54));
    keep.push_back(make_experts(type, n_embd, n_ff, 1, 55));
    keep.push_back(make_experts(down_type, n_ff, n_embd, 1, 56));
    const Experts* e = &keep[keep.size() - 6];
    for (const int64_t n_tok : {1, 5}) {
      const std::vector<float> x = test::gaussian(size_t(n_tok * n_embd), 57, 1.0f);
      const std::vector<float> logits = test::gaussian(size_t(n_tok * n_expert), 58, 2.0f);
      const std::vector<float> slog = test::gaussian(size_t(n_tok), 59, 2.0f);
      const std::vector<float> zero(static_cast<size_t>(n_tok), 0.0f);
      for (const int32_t k : {1, 8}) {
        MoeArgs a{.out = {.data = nullptr, .rows = n_tok, .cols = n_embd},
                  .x = {.data = const_cast<float*>(x.data()), .rows = n_tok, .cols = n_embd},
                  .logits = {.data = const_cast<float*>(logits.data()), .rows = n_tok, .cols = n_expert},
                  .gate = e[0].views.data(), .up = e[1].views.data(), .down = e[2].views.data(),
                  .n_expert = n_expert, .n_used = k, .norm_topk = true, .act = Activation::silu};
        const std::vector<float> routed = run_moe(*cpu, a, false);
        MoeArgs sa = a;  // the shared MLP: one expert that every token takes with weight 1
        sa.logits = {.data = const_cast<float*>(zero.data()), .rows = n_tok, .cols = 1};
        sa.gate = e[3].views.data();
        sa.up = e[4].views.data();
        sa.down = e[5].views.data();
        sa.n_expert = 1;
        sa.n_used = 1;
        const std::vector<float> shared = run_moe(*cpu, sa, false);
        for (const bool gated : {false, true}) {
          MoeArgs b = a;
          b.shared_gate = &e[3].views[0];
          b.shared_up = &e[4].views[0];
          b.shared_down = &e[5].views[0];
          b.x.data = to_device(*gpu, x);
          b.logits.data = to_device(*gpu, logits);
          b.out.data = to_device(*gpu, std::vector<float>(size_t(n_tok * n_embd), 7.0f));
          if (gated) b.shared_logit = {.data = to_device(*gpu, slog), .rows = n_tok, .cols = 1};
          ASSERT_TRUE(gpu->moe_shared_supported(b));
          {
            ScopedEnv off("BRISK_NO_CUDA_MOE_SHARED", "1");
            EXPECT_FALSE(gpu->moe_shared_supported(b));
          }
          const std::string what = str_cat(quant_type_info(type).name, " tokens=", n_tok, " k=", k, " gated=", gated);
          for (const bool unfused : {false, true}) {
            std::vector<float> got(size_t(n_tok * n_embd));
            {
              ScopedEnv off("BRISK_NO_CUDA_MOE_FUSED", unfused ? "1" : "0");
              gpu->moe(b);
            }
            gpu->synchronize();
            gpu->copy(got.data(), b.out.data, sizeof(float) * got.size());
            float err = 0.0f, mag = 0.0f;
            for (int64_t t = 0; t < n_tok; ++t) {
              const double g = gated ? 1.0 / (1.0 + std::exp(-double(slog[size_t(t)]))) : 1.0;
              for (int64_t i = 0; i < n_embd; ++i) {
                const size_t j = size_t(t * n_embd + i);
                const float want = float(double(routed[j]) + g * double(shared[j]));
                err = std::max(err, std::fabs(got[j] - want));
                mag = std::max(mag, std::fabs(want));
              }
            }
            EXPECT_GT(mag, 1e-3f) << what;
            EXPECT_LT(err, 1e-2f * mag) << what << (unfused ? " unfused" : " fused") << " max |diff| " << err;
          }
        }
      }
    }
  }
  // A shared expert of another width runs apart.
  const Experts wide = make_experts(QuantType::Q8_0, n_embd, 2 * n_ff, 1, 60);
  const Experts gate = make_experts(QuantType::Q8_0, n_embd, n_ff, n_expert, 61);
  const Experts down = make_experts(QuantType::Q8_0, n_ff, n_embd, n_expert, 62);
  const MoeArgs c{.out = {.data = nullptr, .rows = 1, .cols = n_embd}, .x = {.data = nullptr, .rows = 1, .cols = n_embd},
                  .logits = {.data = nullptr, .rows = 1, .cols = n_expert}, .gate = gate.views.data(),
                  .up = gate.views.data(), .down = down.views.data(), .n_expert = n_expert, .n_used = 2,
                  .shared_gate = &wide.views[0], .shared_up = &wide.views[0], .shared_down = &down.views[0]};
  EXPECT_FALSE(gpu->moe_shared_supported(c));
}

TEST(CudaMoe, RoutingTiesGoToTheLowerExpert) {
  std::string reason;
  if (cuda::enumerate_devices(&reason).empty()) GTEST_SKIP() << "no CUDA device: " << reason;
  auto gpu = make_cuda_backend(0);
  auto cpu = make_cpu_backend(1);
  // 70 experts (three per lane for some lanes) with equal logits in groups: the chosen experts
  // follow the lowest ids among equals, as on the CPU. Expert e's down projection scales its
  // first hidden value by e + 1, so another choice among equals changes the output.
  const int32_t n_expert = 70;
  const int64_t n_embd = 32, n_ff = 32;
  std::vector<Experts> keep;
  for (int i = 0; i < 2; ++i) keep.push_back(make_experts(QuantType::F32, n_embd, n_ff, n_expert, 10 + i));
  Experts down;
  down.bytes.resize(sizeof(float) * size_t(n_embd * n_ff * n_expert));
  auto* f = reinterpret_cast<float*>(down.bytes.data());
  for (int32_t e = 0; e < n_expert; ++e)
    for (int64_t r = 0; r < n_embd; ++r)
      for (int64_t c = 0; c < n_ff; ++c) f[(e * n_embd + r) * n_ff + c] = c == 0 ? float(e + 1) : 0.0f;
  for (int32_t e = 0; e < n_expert; ++e)
    down.views.push_back(Weight{.type = QuantType::F32, .n_in = n_ff, .n_out = n_embd, .row_bytes = size_t(n_ff) * 4,
                                .data = down.bytes.data() + size_t(n_embd * n_ff * 4) * size_t(e)});
  std::vector<float> logits(static_cast<size_t>(n_expert));
  for (int32_t e = 0; e < n_expert; ++e) logits[size_t(e)] = float((e * 7) % 5);  // values 0..4, many ties
  const std::vector<float> x = test::gaussian(size_t(n_embd), 3, 1.0f);
  for (const int32_t k : {1, 3, 17}) {
    const MoeArgs a{.out = {.data = nullptr, .rows = 1, .cols = n_embd},
                    .x = {.data = const_cast<float*>(x.data()), .rows = 1, .cols = n_embd},
                    .logits = {.data = logits.data(), .rows = 1, .cols = n_expert},
                    .gate = keep[0].views.data(), .up = keep[1].views.data(), .down = down.views.data(),
                    .n_expert = n_expert, .n_used = k, .norm_topk = true, .act = Activation::silu};
    const std::vector<float> want = run_moe(*cpu, a, false);
    const std::vector<float> got = run_moe(*gpu, a, true);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4f * (1.0f + std::fabs(want[i]))) << "k=" << k << " at " << i;
  }
}

#endif

}  // namespace
}  // namespace brisk
