// The linear-attention ops (conv with a rolling state, L2 norm, gated RMS norm, sigmoid gate,
// gated delta rule): the CPU backend against the scalar references of kernels/cpu/ref.h over
// head layouts, sizes that are not powers of two, interleaved sequences, runs that cross chunk
// boundaries and states carried over from earlier steps; the chunked delta rule against its
// recurrent form (BRISK_NO_CHUNKED_DELTA), and a run split into steps of any size.
#include <gtest/gtest.h>

#include <cmath>

#include "delta_net_inputs.h"
#include "random_values.h"
#include "scoped_env.h"
#include "backend/backend.h"
#include "core/error.h"
#include "kernels/cpu/ref.h"

namespace brisk {
namespace {

std::vector<float> delta_randn(size_t n, uint32_t seed, float sigma = 1.0f) { return test::gaussian(n, seed, sigma); }

using test::delta_max_diff;
float max_abs(const std::vector<float>& a) { return test::delta_max_abs(a); }

Mat mat(std::vector<float>& v, int64_t rows, int64_t cols) { return Mat{.data = v.data(), .rows = rows, .cols = cols}; }

using Batch = test::DeltaBatch;
using test::DeltaCase;
using test::DeltaInputs;

const DeltaCase kDeltaCases[] = {
    {1, 2, 16, 24, false}, {2, 4, 16, 32, false}, {2, 4, 16, 32, true}, {2, 2, 32, 16, false},
    {3, 6, 20, 12, true},  {4, 4, 128, 128, false}, {1, 2, 24, 200, false},
};

// Runs check(label) once per build of the kernels (delta_net_x86.inc) this CPU can run: the best
// one, then under each kill switch that moves the dispatch down (the AVX-512 build's four-sweep
// decode step, AVX2, the baseline build).
template <typename Check>
void for_each_delta_build(Check check) {
  for (const char* off :
       {static_cast<const char*>(nullptr), "BRISK_NO_FUSED_DELTA_STEP", "BRISK_NO_AVX512", "BRISK_NO_SIMD_DELTA"}) {
    std::unique_ptr<ScopedEnv> env;
    if (off) env = std::make_unique<ScopedEnv>(off, "1");
    check(std::string(off ? off : "best build"));
  }
}

// Sequence 0 from position 0 (150 tokens: chunks 64 + 64 + 22), sequence 2 continuing a state
// from position 40 (5 tokens), interleaved.
TEST(OpsDeltaNet, DeltaRuleMatchesReference) {
  auto be = make_cpu_backend(2);
  for_each_delta_build([&](const std::string& build) {
    for (const DeltaCase& c : kDeltaCases) {
      const Batch b(150, 0, 5, 40);
      for (bool chunked : {true, false}) {
        DeltaInputs want_in(c, b.n(), 11), got_in(c, b.n(), 11);
        std::vector<float> want(size_t(b.n() * c.n_v_head * c.v_dim)), got(want.size(), 9.0f);
        ref::delta_rule(want_in.args(want, b, 0, b.n()));
        {
          std::unique_ptr<ScopedEnv> off;
          if (!chunked) off = std::make_unique<ScopedEnv>("BRISK_NO_CHUNKED_DELTA", "1");
          be->delta_rule(got_in.args(got, b, 0, b.n()));
        }
        const std::string what = "heads " + std::to_string(c.n_k_head) + "/" + std::to_string(c.n_v_head) + " dims " +
                                 std::to_string(c.k_dim) + "/" + std::to_string(c.v_dim) + (c.tiled ? " tiled" : "") +
                                 (chunked ? " chunked" : " recurrent") + ", " + build;
        EXPECT_GT(max_abs(want), 0.01f) << what;
        EXPECT_LT(delta_max_diff(got, want), 2e-5f * std::max(1.0f, max_abs(want))) << what;
        EXPECT_LT(delta_max_diff(got_in.state, want_in.state), 2e-5f * std::max(1.0f, max_abs(want_in.state))) << what;
      }
    }
  });
}

// The same tokens in one call, in calls of 7 tokens and one token at a time give the same
// outputs and state (the chunk boundaries fall elsewhere each time).
TEST(OpsDeltaNet, DeltaRuleStepSizesAgree) {
  auto be = make_cpu_backend(2);
  const DeltaCase c{2, 4, 16, 32, false};
  const Batch b(70, 0, 30, 0);
  std::vector<std::vector<float>> outs, states;
  for (int64_t step : {b.n(), int64_t(7), int64_t(1)}) {
    DeltaInputs in(c, b.n(), 21);
    std::vector<float> out(size_t(b.n() * c.n_v_head * c.v_dim));
    for (int64_t r0 = 0; r0 < b.n(); r0 += step) be->delta_rule(in.args(out, b, r0, std::min(step, b.n() - r0)));
    outs.push_back(out);
    states.push_back(in.state);
  }
  for (size_t i = 1; i < outs.size(); ++i) {
    EXPECT_LT(delta_max_diff(outs[i], outs[0]), 1e-5f * std::max(1.0f, max_abs(outs[0]))) << "variant " << i;
    EXPECT_LT(delta_max_diff(states[i], states[0]), 1e-5f * std::max(1.0f, max_abs(states[0]))) << "variant " << i;
  }
}

TEST(OpsDeltaNet, ConvStateMatchesReference) {
  auto be = make_cpu_backend(2);
  for_each_delta_build([&](const std::string& build) {
    for (int32_t kernel : {1, 2, 4, 5}) {
      for (int64_t channels : {int64_t(7), int64_t(80), int64_t(200)}) {
        const Batch b(9, 0, 2, 13);  // sequence 2 continues its window
        std::vector<float> x = delta_randn(size_t(b.n() * channels), 31);
        std::vector<float> w = delta_randn(size_t(channels * kernel), 32);
        const int64_t slot = int64_t(kernel - 1) * channels;
        std::vector<float> s_want = delta_randn(size_t(3 * std::max<int64_t>(slot, 1)), 33), s_got = s_want;
        std::vector<float> want(x.size()), got(x.size(), 5.0f);
        for (bool silu : {true, false}) {
          ConvStateArgs a{.out = mat(want, b.n(), channels), .x = mat(x, b.n(), channels), .weight = w.data(),
                          .kernel = kernel, .state = {.data = s_want.data(), .slot_floats = slot, .n_slots = 3},
                          .seq = b.seq.data(), .pos = b.pos.data(), .silu = silu};
          ref::conv_state(a);
          a.out.data = got.data();
          a.state.data = s_got.data();
          be->conv_state(a);
          EXPECT_LT(delta_max_diff(got, want), 1e-5f) << "kernel " << kernel << " channels " << channels << ", " << build;
          EXPECT_EQ(s_got, s_want) << "kernel " << kernel << " channels " << channels << ", " << build;
        }
      }
    }
  });
}

TEST(OpsDeltaNet, NormsAndGateMatchReference) {
  auto be = make_cpu_backend(2);
  const int64_t rows = 5, cols = 96;
  std::vector<float> x = delta_randn(size_t(rows * cols), 41), z = delta_randn(x.size(), 42), w = delta_randn(24, 43);
  std::vector<float> g1 = delta_randn(size_t(rows), 44);
  std::vector<float> want(x.size()), got(x.size());
  for (int64_t group : {int64_t(24), int64_t(0)}) {
    L2NormArgs l{.out = mat(want, rows, cols), .x = mat(x, rows, cols), .group = group};
    ref::l2_norm(l);
    l.out.data = got.data();
    be->l2_norm(l);
    EXPECT_LT(delta_max_diff(got, want), 1e-6f) << "l2 group " << group;
  }
  for_each_delta_build([&](const std::string& build) {
    GatedRmsNormArgs g{.out = mat(want, rows, cols), .x = mat(x, rows, cols), .z = mat(z, rows, cols),
                       .weight = w.data(), .group = 24, .eps = 1e-6f};
    ref::gated_rms_norm(g);
    g.out.data = got.data();
    be->gated_rms_norm(g);
    EXPECT_LT(delta_max_diff(got, want), 1e-5f) << build;
  });
  for (bool per_row : {false, true}) {
    SigmoidMulArgs s{.out = mat(want, rows, cols), .x = mat(x, rows, cols),
                     .gate = per_row ? mat(g1, rows, 1) : mat(z, rows, cols)};
    ref::sigmoid_mul(s);
    s.out.data = got.data();
    be->sigmoid_mul(s);
    EXPECT_LT(delta_max_diff(got, want), 1e-6f) << "per_row " << per_row;
  }
}

TEST(OpsDeltaNet, BadArgumentsAreErrors) {
  auto be = make_cpu_backend(1);
  const DeltaCase c{2, 3, 16, 16, false};  // 3 value heads over 2 key heads
  const Batch b(2, 0, 0, 0);
  DeltaInputs in({2, 4, 16, 16, false}, b.n(), 1);
  std::vector<float> out(size_t(b.n() * 4 * 16));
  DeltaRuleArgs a = in.args(out, b, 0, b.n());
  a.n_v_head = c.n_v_head;
  EXPECT_THROW(be->delta_rule(a), Error);
  a = in.args(out, b, 0, b.n());
  std::vector<int32_t> bad_seq = {0, 3};  // past the 3 state slots
  a.seq = bad_seq.data();
  EXPECT_THROW(be->delta_rule(a), Error);
}

// A backend without the linear-attention ops names the op and itself.
class NoStateOpsBackend final : public Backend {
 public:
  std::string name() const override { return "test"; }
  int n_threads() const override { return 1; }
  void* alloc(size_t) override { return nullptr; }
  void free(void*) override {}
  void matmul(const MatmulArgs&) override {}
  void rms_norm(const RmsNormArgs&) override {}
  void rope(const RopeArgs&) override {}
  void kv_store(const KvStoreArgs&) override {}
  void attention(const AttentionArgs&) override {}
  void gated_act(const GatedActArgs&) override {}
  void add(const AddArgs&) override {}
  void embedding(const EmbeddingArgs&) override {}
  void get_rows(const GetRowsArgs&) override {}
  void moe(const MoeArgs&) override {}
  void softcap(const SoftcapArgs&) override {}
};

TEST(OpsDeltaNet, MissingOpsNameOpAndBackend) {
  NoStateOpsBackend be;
  try {
    be.delta_rule({});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("delta_rule"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("test backend"), std::string::npos) << e.what();
  }
  EXPECT_THROW(be.conv_state({}), Error);
  EXPECT_THROW(be.l2_norm({}), Error);
  EXPECT_THROW(be.gated_rms_norm({}), Error);
  EXPECT_THROW(be.sigmoid_mul({}), Error);
}

}  // namespace
}  // namespace brisk
