// The mixture-of-experts, scale and soft-cap ops: CPU backend against the scalar references over
// weight formats, activations, top-k settings and per-expert scales, and the routing against
// hand-computed values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

#include "moe_experts.h"
#include "random_values.h"
#include "scoped_env.h"
#include "backend/backend.h"
#include "core/error.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/ref.h"
#include "quant/types.h"

namespace brisk {
namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale) { return test::gaussian(n, seed, scale); }

using test::Experts;
using test::make_experts;

TEST(OpsMoe, MatchesReferenceOverFormatsAndTopK) {
  auto be = make_cpu_backend(2);
  const int64_t n_tok = 9, n_embd = 64, n_ff = 32;
  const int32_t n_expert = 6;
  std::vector<float> x = randn(size_t(n_tok * n_embd), 1, 1.0f);
  std::vector<float> logits = randn(size_t(n_tok * n_expert), 2, 2.0f);
  for (QuantType type : {QuantType::F32, QuantType::Q8_0}) {
    const Experts gate = make_experts(type, n_embd, n_ff, n_expert, 3);
    const Experts up = make_experts(type, n_embd, n_ff, n_expert, 4);
    const Experts down = make_experts(type, n_ff, n_embd, n_expert, 5);
    for (int32_t k : {1, 2, 6}) {
      for (bool norm : {false, true}) {
        for (Activation act : {Activation::silu, Activation::gelu_tanh}) {
          std::vector<float> got(x.size(), 7.0f), want(x.size());
          MoeArgs a{.out = {.data = got.data(), .rows = n_tok, .cols = n_embd},
                    .x = {.data = x.data(), .rows = n_tok, .cols = n_embd},
                    .logits = {.data = logits.data(), .rows = n_tok, .cols = n_expert},
                    .gate = gate.views.data(), .up = up.views.data(), .down = down.views.data(),
                    .n_expert = n_expert, .n_used = k, .norm_topk = norm, .act = act};
          be->moe(a);
          a.out.data = want.data();
          ref::moe(a);
          float err = 0.0f, mag = 0.0f;
          for (size_t i = 0; i < got.size(); ++i) {
            err = std::max(err, std::fabs(got[i] - want[i]));
            mag = std::max(mag, std::fabs(want[i]));
          }
          EXPECT_GT(mag, 1e-3f);
          // Q8_0: the activations are rounded to Q8_0 blocks, where a last-bit difference of the
          // gate output may move one rounding step.
          const float tol = type == QuantType::F32 ? 1e-4f : 1e-2f * mag;
          EXPECT_LT(err, tol) << quant_type_info(type).name << " k=" << k << " norm=" << norm;
        }
      }
    }
  }
}

TEST(OpsMoe, RoutingPicksTopKAndRenormalizes) {
  // Probabilities 1/8, 2/8, 4/8, 1/8 (logits ln 1, ln 2, ln 4, ln 1): top-2 = experts 2, 1.
  std::vector<float> l = {0.0f, std::log(2.0f), std::log(4.0f), 0.0f};
  MoeArgs a{.out = {}, .x = {}, .logits = {.data = l.data(), .rows = 1, .cols = 4}, .n_expert = 4, .n_used = 2, .norm_topk = false};
  int32_t ids[2];
  float w[2];
  cpu::moe_route_rows(a, ids, w, 0, 1);
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(ids[1], 1);
  EXPECT_NEAR(w[0], 0.5f, 1e-6f);
  EXPECT_NEAR(w[1], 0.25f, 1e-6f);
  a.norm_topk = true;
  cpu::moe_route_rows(a, ids, w, 0, 1);
  EXPECT_NEAR(w[0], 2.0f / 3.0f, 1e-6f);
  EXPECT_NEAR(w[1], 1.0f / 3.0f, 1e-6f);
  // Ties go to the lower expert id.
  std::vector<float> tie = {1.0f, 3.0f, 3.0f, 3.0f};
  a.logits.data = tie.data();
  cpu::moe_route_rows(a, ids, w, 0, 1);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 2);
}

// Per-expert scales (Gemma 4) multiply each chosen expert's weight after the renormalization;
// the CPU op and the reference agree, and the routing applies them.
TEST(OpsMoe, PerExpertScalesMultiplyTheWeights) {
  std::vector<float> l = {0.0f, std::log(2.0f), std::log(4.0f), 0.0f};
  const std::vector<float> scale = {1.0f, 3.0f, 0.5f, 1.0f};
  MoeArgs r{.out = {}, .x = {}, .logits = {.data = l.data(), .rows = 1, .cols = 4}, .n_expert = 4, .n_used = 2,
            .norm_topk = true, .expert_scale = scale.data()};
  int32_t ids[2];
  float w[2];
  cpu::moe_route_rows(r, ids, w, 0, 1);
  EXPECT_EQ(ids[0], 2);
  EXPECT_NEAR(w[0], 2.0f / 3.0f * 0.5f, 1e-6f);
  EXPECT_NEAR(w[1], 1.0f / 3.0f * 3.0f, 1e-6f);

  auto be = make_cpu_backend(2);
  EXPECT_TRUE(be->moe_expert_scale_supported());
  const int64_t n_tok = 7, n_embd = 64, n_ff = 32;
  const int32_t n_expert = 5;
  std::vector<float> x = randn(size_t(n_tok * n_embd), 11, 1.0f), logits = randn(size_t(n_tok * n_expert), 12, 2.0f);
  const std::vector<float> es = {0.5f, 1.5f, -0.25f, 2.0f, 1.0f};
  const Experts gate = make_experts(QuantType::F32, n_embd, n_ff, n_expert, 13);
  const Experts up = make_experts(QuantType::F32, n_embd, n_ff, n_expert, 14);
  const Experts down = make_experts(QuantType::F32, n_ff, n_embd, n_expert, 15);
  std::vector<float> got(x.size()), want(x.size()), plain(x.size());
  MoeArgs a{.out = {.data = got.data(), .rows = n_tok, .cols = n_embd}, .x = {.data = x.data(), .rows = n_tok, .cols = n_embd},
            .logits = {.data = logits.data(), .rows = n_tok, .cols = n_expert}, .gate = gate.views.data(),
            .up = up.views.data(), .down = down.views.data(), .n_expert = n_expert, .n_used = 2, .norm_topk = true,
            .act = Activation::gelu_tanh, .expert_scale = es.data()};
  be->moe(a);
  a.out.data = want.data();
  ref::moe(a);
  a.out.data = plain.data();
  a.expert_scale = nullptr;
  ref::moe(a);
  float err = 0.0f, change = 0.0f;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::fabs(got[i] - want[i]));
    change = std::max(change, std::fabs(want[i] - plain[i]));
  }
  EXPECT_LT(err, 1e-4f);
  EXPECT_GT(change, 1e-3f);
}

TEST(OpsScale, MatchesReferenceInPlaceAndApart) {
  auto be = make_cpu_backend(2);
  std::vector<float> x = randn(6 * 40, 21, 3.0f), out(x.size()), want(x.size());
  be->scale({.out = {.data = out.data(), .rows = 6, .cols = 40}, .x = {.data = x.data(), .rows = 6, .cols = 40},
             .scale = 0.70710677f});
  ref::scale({.out = {.data = want.data(), .rows = 6, .cols = 40}, .x = {.data = x.data(), .rows = 6, .cols = 40},
              .scale = 0.70710677f});
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(out[i], want[i], 1e-6f);
  be->scale({.out = {.data = x.data(), .rows = 6, .cols = 40}, .x = {.data = x.data(), .rows = 6, .cols = 40},
             .scale = 0.70710677f});
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(x[i], out[i]);
  EXPECT_THROW(be->scale({.out = {.data = out.data(), .rows = 5, .cols = 40}, .x = {.data = x.data(), .rows = 6, .cols = 40},
                          .scale = 2.0f}),
               Error);
}

TEST(OpsMoe, BadArgumentsAreErrors) {
  auto be = make_cpu_backend(1);
  std::vector<float> x(64), out(64), l(4);
  const Experts g = make_experts(QuantType::F32, 64, 8, 4, 1), d = make_experts(QuantType::F32, 8, 64, 4, 2);
  MoeArgs a{.out = {.data = out.data(), .rows = 1, .cols = 64}, .x = {.data = x.data(), .rows = 1, .cols = 64},
            .logits = {.data = l.data(), .rows = 1, .cols = 4}, .gate = g.views.data(), .up = g.views.data(),
            .down = d.views.data(), .n_expert = 4, .n_used = 5};
  EXPECT_THROW(be->moe(a), Error);
  a.n_used = 2;
  a.down = g.views.data();  // wrong shape
  EXPECT_THROW(be->moe(a), Error);
  a.down = d.views.data();
  a.out = a.x;  // aliasing
  EXPECT_THROW(be->moe(a), Error);
}

TEST(OpsSoftcap, MatchesReferenceAndFormula) {
  auto be = make_cpu_backend(2);
  std::vector<float> x = randn(5 * 33, 9, 40.0f), want = x;
  const float cap = 30.0f;
  be->softcap({.x = {.data = x.data(), .rows = 5, .cols = 33}, .cap = cap});
  ref::softcap({.x = {.data = want.data(), .rows = 5, .cols = 33}, .cap = cap});
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(x[i], want[i], 1e-4f);
    EXPECT_LE(std::fabs(x[i]), cap);
  }
  std::vector<float> one = {30.0f};
  be->softcap({.x = {.data = one.data(), .rows = 1, .cols = 1}, .cap = cap});
  EXPECT_NEAR(one[0], 30.0f * std::tanh(1.0f), 1e-5f);
  EXPECT_THROW(be->softcap({.x = {.data = one.data(), .rows = 1, .cols = 1}, .cap = 0.0f}), Error);
}

// The AVX-512 tanh (and the split of one long row over the threads) against the reference, with
// and without BRISK_NO_FAST_SOFTCAP: within 5e-7 * cap everywhere, from x near 0 (where the
// formula 1 - 2 / (e^2y + 1) loses relative precision) to saturation; rows of a decode step's
// length (one long row, a masked tail) and several short ones.
TEST(OpsSoftcap, FastPathWithinToleranceOfReference) {
  auto be = make_cpu_backend(2);
  for (const char* off : {"0", "1"}) {
    ScopedEnv env("BRISK_NO_FAST_SOFTCAP", off);
    for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{1, 10007}, {3, 33}}) {
      for (const float cap : {30.0f, 15.0f}) {
        std::vector<float> x = randn(size_t(rows * cols), 11, 3.0f * cap);
        for (size_t i = 0; i < x.size(); i += 7) x[i] *= 1e-4f;  // near zero
        x[0] = 0.0f;
        x[1] = 1000.0f * cap;
        x[2] = -1000.0f * cap;
        std::vector<float> want = x;
        be->softcap({.x = {.data = x.data(), .rows = rows, .cols = cols}, .cap = cap});
        ref::softcap({.x = {.data = want.data(), .rows = rows, .cols = cols}, .cap = cap});
        float worst = 0.0f;
        for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(x[i] - want[i]));
        EXPECT_LE(worst, 5e-7f * cap) << rows << " x " << cols << " cap " << cap << " BRISK_NO_FAST_SOFTCAP=" << off;
        EXPECT_EQ(x[0], 0.0f);
        EXPECT_EQ(x[1], cap);
        EXPECT_EQ(x[2], -cap);
      }
    }
  }
}

}  // namespace
}  // namespace brisk
