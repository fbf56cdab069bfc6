// The CUDA backend's linear-attention ops (conv with its rolling window, L2 norm, gated RMS norm,
// sigmoid gate, gated delta rule) against the CPU backend's, on random inputs: several head
// layouts (grouped and tiled value heads, sizes that are not powers of two, the 128 x 128 heads
// of the published models), decode steps of distinct sequences, steps of up to 64 tokens (the
// recurrent kernel with runs of several tokens), prefill steps (the chunked kernel, runs across
// chunk boundaries) and the recurrent kernel on them (BRISK_NO_CUDA_CHUNKED_DELTA), with states
// carried over from earlier steps. Skips without a CUDA build or a GPU.
//
// Tolerances: both backends compute in F32 with other summation orders (warp-partial sums, the
// chunked products), so outputs and states agree to a few float roundings of sums of at most a
// few hundred terms of size O(1): 1e-4 relative to the largest value (an indexing or gating error
// is of the order of the values themselves). The conv moves inputs without arithmetic into its
// window, so the state must be equal bit for bit; its outputs are K-term sums (1e-5).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "delta_net_inputs.h"
#include "random_values.h"
#include "scoped_env.h"
#include "backend/backend.h"
#include "core/error.h"
#ifdef BRISK_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_devices.h"
#endif

namespace brisk {
namespace {

#ifndef BRISK_HAVE_CUDA
TEST(CudaDeltaNet, Ops) { GTEST_SKIP() << "CUDA backend not built"; }
#else

std::unique_ptr<Backend> cuda_delta_backend() {
  std::string reason;
  if (cuda::enumerate_devices(&reason).empty()) return nullptr;
  return make_cuda_backend(0);
}

#define REQUIRE_CUDA(be)            \
  auto be = cuda_delta_backend();   \
  if (!be) GTEST_SKIP() << "no CUDA device"

// Device copies of host vectors, freed with the holder.
struct DeviceCopies {
  Backend& be;
  std::vector<void*> held;
  explicit DeviceCopies(Backend& b) : be(b) {}
  ~DeviceCopies() {
    for (void* p : held) be.free(p);
  }
  float* put(const std::vector<float>& h) {
    auto* d = static_cast<float*>(be.alloc(sizeof(float) * std::max<size_t>(h.size(), 1)));
    held.push_back(d);
    be.copy(d, h.data(), sizeof(float) * h.size());
    return d;
  }
  std::vector<float> get(const float* d, size_t n) {
    std::vector<float> h(n);
    be.copy(h.data(), d, sizeof(float) * n);
    return h;
  }
};


// The args of `in` for rows [r0, r0 + rows) with every array on the device (dev: the copies of
// q, k, v, alpha, beta, the state, the output, rate and dt_bias, in that order: the backend would
// cache host constants by address, which a later case's vectors may reuse); seq / pos stay host
// arrays, as a step's.
DeltaRuleArgs device_args(test::DeltaInputs& in, std::vector<float>& host_out, const test::DeltaBatch& b,
                          int64_t r0, int64_t rows, const std::vector<float*>& dev) {
  DeltaRuleArgs a = in.args(host_out, b, r0, rows);
  const int64_t kw = int64_t(in.c.n_k_head) * in.c.k_dim, vw = int64_t(in.c.n_v_head) * in.c.v_dim;
  a.q.data = dev[0] + r0 * kw;
  a.k.data = dev[1] + r0 * kw;
  a.v.data = dev[2] + r0 * vw;
  a.alpha.data = dev[3] + r0 * in.c.n_v_head;
  a.beta.data = dev[4] + r0 * in.c.n_v_head;
  a.state.data = dev[5];
  a.out.data = dev[6] + r0 * vw;
  a.decay_rate = dev[7];
  a.dt_bias = dev[8];
  return a;
}

struct DeltaRun {
  std::vector<float> out, state;
};

// The batch through the CUDA backend in calls of `step` tokens.
DeltaRun run_cuda_delta(Backend& be, const test::DeltaCase& c, const test::DeltaBatch& b, uint32_t seed, int64_t step) {
  test::DeltaInputs in(c, b.n(), seed);
  std::vector<float> host_out(size_t(b.n() * c.n_v_head * c.v_dim));
  DeviceCopies dc(be);
  const std::vector<float*> dev = {dc.put(in.q), dc.put(in.k), dc.put(in.v), dc.put(in.alpha), dc.put(in.beta),
                                   dc.put(in.state), dc.put(host_out), dc.put(in.rate), dc.put(in.dt)};
  for (int64_t r0 = 0; r0 < b.n(); r0 += step)
    be.delta_rule(device_args(in, host_out, b, r0, std::min(step, b.n() - r0), dev));
  return DeltaRun{.out = dc.get(dev[6], host_out.size()), .state = dc.get(dev[5], in.state.size())};
}

DeltaRun run_cpu_delta(const test::DeltaCase& c, const test::DeltaBatch& b, uint32_t seed) {
  auto cpu = make_cpu_backend(2);
  test::DeltaInputs in(c, b.n(), seed);
  DeltaRun r{.out = std::vector<float>(size_t(b.n() * c.n_v_head * c.v_dim)), .state = {}};
  cpu->delta_rule(in.args(r.out, b, 0, b.n()));
  r.state = in.state;
  return r;
}

const test::DeltaCase kCudaDeltaCases[] = {
    {1, 2, 16, 24, false}, {2, 4, 16, 32, false}, {2, 4, 16, 32, true}, {2, 2, 32, 16, false},
    {3, 6, 20, 12, true},  {1, 3, 40, 72, false}, {4, 4, 128, 128, false}, {2, 4, 128, 128, true},
};

std::string case_name(const test::DeltaCase& c) {
  return "heads " + std::to_string(c.n_k_head) + "/" + std::to_string(c.n_v_head) + " dims " +
         std::to_string(c.k_dim) + "/" + std::to_string(c.v_dim) + (c.tiled ? " tiled" : "");
}

void expect_delta_close(const DeltaRun& got, const DeltaRun& want, const std::string& what) {
  EXPECT_GT(test::delta_max_abs(want.out), 0.01f) << what;
  EXPECT_LT(test::delta_max_diff(got.out, want.out), 1e-4f * std::max(1.0f, test::delta_max_abs(want.out))) << what << ": output";
  EXPECT_LT(test::delta_max_diff(got.state, want.state), 1e-4f * std::max(1.0f, test::delta_max_abs(want.state))) << what << ": state";
}

TEST(CudaDeltaNet, DeltaRuleMatchesCpu) {
  REQUIRE_CUDA(be);
  struct Shape {
    const char* name;
    test::DeltaBatch b;
    bool recurrent_only;
  };
  const Shape shapes[] = {
      {"decode of two sequences", test::DeltaBatch(1, 40, 1, 17), false},
      {"step of 29 tokens", test::DeltaBatch(20, 0, 9, 40), false},            // recurrent kernel, runs
      {"prefill (chunks 64 + 64 + 22)", test::DeltaBatch(150, 0, 5, 40), false},  // chunked kernel
      {"prefill, recurrent kernel", test::DeltaBatch(150, 0, 5, 40), true},
  };
  for (const test::DeltaCase& c : kCudaDeltaCases)
    for (const Shape& s : shapes) {
      std::unique_ptr<ScopedEnv> off;
      if (s.recurrent_only) off = std::make_unique<ScopedEnv>("BRISK_NO_CUDA_CHUNKED_DELTA", "1");
      const DeltaRun want = run_cpu_delta(c, s.b, 11);
      const DeltaRun got = run_cuda_delta(*be, c, s.b, 11, s.b.n());
      expect_delta_close(got, want, case_name(c) + ", " + s.name);
    }
}

// The chunked kernel with each chunk's rows staged in shared memory gives the bits of the one
// that reads them from global memory (BRISK_NO_CUDA_DELTA_STAGE): the same operations in the
// same order.
TEST(CudaDeltaNet, ChunkedStagingIsBitExact) {
  REQUIRE_CUDA(be);
  const test::DeltaBatch b(150, 0, 5, 40);
  for (const test::DeltaCase& c : kCudaDeltaCases) {
    const DeltaRun staged = run_cuda_delta(*be, c, b, 13, b.n());
    DeltaRun plain;
    {
      ScopedEnv off("BRISK_NO_CUDA_DELTA_STAGE", "1");
      plain = run_cuda_delta(*be, c, b, 13, b.n());
    }
    ASSERT_EQ(staged.out.size(), plain.out.size());
    EXPECT_EQ(0, std::memcmp(staged.out.data(), plain.out.data(), sizeof(float) * plain.out.size())) << case_name(c);
    EXPECT_EQ(0, std::memcmp(staged.state.data(), plain.state.data(), sizeof(float) * plain.state.size()))
        << case_name(c);
  }
}

// The same tokens in one call (chunked), in calls of 7 tokens (recurrent, runs of several tokens
// per sequence) and one token at a time give the same outputs and state.
TEST(CudaDeltaNet, DeltaRuleStepSizesAgree) {
  REQUIRE_CUDA(be);
  for (const test::DeltaCase& c : {test::DeltaCase{2, 4, 16, 32, false}, test::DeltaCase{2, 4, 128, 128, false}}) {
    const test::DeltaBatch b(70, 0, 30, 0);
    const DeltaRun whole = run_cuda_delta(*be, c, b, 21, b.n());
    for (int64_t step : {int64_t(7), int64_t(1)}) {
      const DeltaRun got = run_cuda_delta(*be, c, b, 21, step);
      expect_delta_close(got, whole, case_name(c) + ", steps of " + std::to_string(step));
    }
  }
}

TEST(CudaDeltaNet, ConvStateMatchesCpu) {
  REQUIRE_CUDA(be);
  auto cpu = make_cpu_backend(2);
  for (int32_t kernel : {1, 2, 4, 5}) {
    for (int64_t channels : {int64_t(7), int64_t(80), int64_t(200)}) {
      // Sequence 2 continues its window; a decode step of two sequences; a prefill from 0 with a
      // short continuation.
      for (const test::DeltaBatch& b :
           {test::DeltaBatch(9, 0, 2, 13), test::DeltaBatch(1, 20, 1, 6), test::DeltaBatch(100, 0, 3, 7)}) {
        for (bool silu : {true, false}) {
          const std::string what = "kernel " + std::to_string(kernel) + " channels " + std::to_string(channels) +
                                   " tokens " + std::to_string(b.n()) + (silu ? " silu" : "");
          std::vector<float> x = test::gaussian(size_t(b.n() * channels), 31);
          std::vector<float> w = test::gaussian(size_t(channels * kernel), 32);
          const int64_t slot = int64_t(kernel - 1) * channels;
          std::vector<float> state = test::gaussian(size_t(3 * std::max<int64_t>(slot, 1)), 33);
          std::vector<float> want(x.size()), got_host(x.size(), 5.0f);
          ConvStateArgs a{.out = {.data = want.data(), .rows = b.n(), .cols = channels},
                          .x = {.data = x.data(), .rows = b.n(), .cols = channels},
                          .weight = w.data(),
                          .kernel = kernel,
                          .state = {.data = state.data(), .slot_floats = slot, .n_slots = 3},
                          .seq = b.seq.data(),
                          .pos = b.pos.data(),
                          .silu = silu};
          DeviceCopies dc(*be);
          ConvStateArgs d = a;
          d.weight = dc.put(w);  // device memory: host constants are cached by address
          d.x.data = dc.put(x);
          d.out.data = dc.put(got_host);
          d.state.data = dc.put(state);
          cpu->conv_state(a);
          be->conv_state(d);
          const std::vector<float> got = dc.get(d.out.data, x.size());
          const std::vector<float> got_state = dc.get(d.state.data, state.size());
          EXPECT_LT(test::delta_max_diff(got, want), 1e-5f * std::max(1.0f, test::delta_max_abs(want))) << what;
          EXPECT_EQ(got_state, state) << what;
        }
      }
    }
  }
}

TEST(CudaDeltaNet, NormsAndGateMatchCpu) {
  REQUIRE_CUDA(be);
  auto cpu = make_cpu_backend(2);
  for (const int64_t rows : {int64_t(1), int64_t(5), int64_t(70)}) {
    const int64_t cols = 96;
    const std::vector<float> x = test::gaussian(size_t(rows * cols), 41), z = test::gaussian(x.size(), 42);
    const std::vector<float> g1 = test::gaussian(size_t(rows), 44);
    DeviceCopies dc(*be);
    float* dx = dc.put(x);
    float* dz = dc.put(z);
    float* dg1 = dc.put(g1);
    std::vector<float> want(x.size()), in_place = x;
    const auto m = [&](float* p, int64_t c) { return Mat{.data = p, .rows = rows, .cols = c}; };
    for (int64_t group : {int64_t(24), int64_t(0)}) {
      float* dout = dc.put(want);
      cpu->l2_norm({.out = m(want.data(), cols), .x = m(const_cast<float*>(x.data()), cols), .group = group});
      be->l2_norm({.out = m(dout, cols), .x = m(dx, cols), .group = group});
      EXPECT_LT(test::delta_max_diff(dc.get(dout, x.size()), want), 1e-6f) << "l2 group " << group << " rows " << rows;
    }
    // Groups of 96 (three elements a lane), 48 and 24 (lanes without elements): the weight holds
    // exactly `group` floats, as the model's norm weight [v_dim] does.
    for (int64_t group : {int64_t(24), int64_t(48), int64_t(96)}) {
      const std::vector<float> w = test::gaussian(size_t(group), 43);
      const float* dw = dc.put(w);  // device memory: host constants are cached by address
      float* dout = dc.put(want);
      const GatedRmsNormArgs a{.out = m(want.data(), cols), .x = m(const_cast<float*>(x.data()), cols),
                               .z = m(const_cast<float*>(z.data()), cols), .weight = w.data(), .group = group,
                               .eps = 1e-6f};
      cpu->gated_rms_norm(a);
      GatedRmsNormArgs d = a;
      d.out = m(dout, cols);
      d.x = m(dx, cols);
      d.z = m(dz, cols);
      d.weight = dw;
      be->gated_rms_norm(d);
      EXPECT_LT(test::delta_max_diff(dc.get(dout, x.size()), want), 1e-5f * std::max(1.0f, test::delta_max_abs(want)))
          << "gated norm group " << group << " rows " << rows;
      // In place (out = x), as the model runs it.
      float* dxi = dc.put(x);
      d.out = m(dxi, cols);
      d.x = m(dxi, cols);
      be->gated_rms_norm(d);
      EXPECT_LT(test::delta_max_diff(dc.get(dxi, x.size()), want), 1e-5f * std::max(1.0f, test::delta_max_abs(want)))
          << "gated norm in place, group " << group;
    }
    for (bool per_row : {false, true}) {
      float* dout = dc.put(want);
      const SigmoidMulArgs a{.out = m(want.data(), cols), .x = m(const_cast<float*>(x.data()), cols),
                             .gate = per_row ? m(const_cast<float*>(g1.data()), 1) : m(const_cast<float*>(z.data()), cols)};
      cpu->sigmoid_mul(a);
      be->sigmoid_mul({.out = m(dout, cols), .x = m(dx, cols), .gate = per_row ? m(dg1, 1) : m(dz, cols)});
      EXPECT_LT(test::delta_max_diff(dc.get(dout, x.size()), want), 1e-6f * std::max(1.0f, test::delta_max_abs(want)))
          << "sigmoid_mul per_row " << per_row;
    }
  }
}

TEST(CudaDeltaNet, BadArgumentsAreErrors) {
  REQUIRE_CUDA(be);
  const test::DeltaCase c{2, 4, 16, 16, false};
  const test::DeltaBatch b(2, 0, 0, 0);
  test::DeltaInputs in(c, b.n(), 1);
  std::vector<float> host_out(size_t(b.n() * 4 * 16));
  DeviceCopies dc(*be);
  const std::vector<float*> dev = {dc.put(in.q), dc.put(in.k), dc.put(in.v), dc.put(in.alpha), dc.put(in.beta),
                                   dc.put(in.state), dc.put(host_out), dc.put(in.rate), dc.put(in.dt)};
  DeltaRuleArgs a = device_args(in, host_out, b, 0, b.n(), dev);
  a.n_v_head = 3;  // not a multiple of the 2 key heads
  EXPECT_THROW(be->delta_rule(a), Error);
  a = device_args(in, host_out, b, 0, b.n(), dev);
  const std::vector<int32_t> bad_seq = {0, 3};  // past the 3 state slots
  a.seq = bad_seq.data();
  EXPECT_THROW(be->delta_rule(a), Error);
  a = device_args(in, host_out, b, 0, b.n(), dev);
  a.state.data = in.state.data();  // host memory
  EXPECT_THROW(be->delta_rule(a), Error);
}

// A delta-net layer's q and k L2 norms in graph steps: one launch for both (the launch count
// drops by one), the same bits as a launch each (BRISK_NO_CUDA_NORM_MERGE) and as eager steps.
TEST(CudaDeltaNet, QkL2NormsShareALaunch) {
  REQUIRE_CUDA(probe);
  (void)probe;
  for (const int64_t rows : {int64_t(1), int64_t(5)}) {
    const int64_t qw = 16 * 128, kw = 16 * 128;
    const std::vector<float> q0 = test::gaussian(size_t(rows * qw), 61), k0 = test::gaussian(size_t(rows * kw), 62);
    struct Got { std::vector<float> q, k; size_t launches = 0; };
    auto run = [&](bool graphs, bool merge) {
      std::optional<ScopedEnv> off;
      if (!merge) off.emplace("BRISK_NO_CUDA_NORM_MERGE", "1");
      auto be = make_cuda_backend(0, graphs);
      DeviceCopies dc(*be);
      float* dq = dc.put(q0);
      float* dk = dc.put(k0);
      std::vector<int32_t> ids(size_t(rows), 0), pos(size_t(rows), 0), seq(size_t(rows), 0), out_rows(size_t(rows), 0);
      for (int64_t i = 0; i < rows; ++i) pos[size_t(i)] = int32_t(i), out_rows[size_t(i)] = int32_t(i);
      for (int step = 0; step < 3; ++step) {  // captured, then replayed
        be->begin_step({.n_tok = int32_t(rows), .ids = ids.data(), .pos = pos.data(), .seq = seq.data(), .n_out = int32_t(rows),
                        .out_rows = out_rows.data()});
        be->l2_norm({.out = {.data = dq, .rows = rows, .cols = qw}, .x = {.data = dq, .rows = rows, .cols = qw}, .group = 128});
        be->l2_norm({.out = {.data = dk, .rows = rows, .cols = kw}, .x = {.data = dk, .rows = rows, .cols = kw}, .group = 128});
        be->end_step();
      }
      return Got{dc.get(dq, q0.size()), dc.get(dk, k0.size()), cuda_step_launches(*be)};
    };
    const Got merged = run(true, true), apart = run(true, false), eager = run(false, true);
    EXPECT_EQ(merged.launches + 1, apart.launches) << rows << " rows";
    EXPECT_EQ(merged.q, apart.q) << rows << " rows";
    EXPECT_EQ(merged.k, apart.k) << rows << " rows";
    EXPECT_EQ(merged.q, eager.q) << rows << " rows";
    EXPECT_EQ(merged.k, eager.k) << rows << " rows";
  }
}

// A delta-net layer's conv followed by the in-place L2 norms of its q and k columns, in graph
// steps: the norms run inside the conv's launch (two launches fewer), with the same outputs and
// conv state as a launch each (BRISK_NO_CUDA_NORM_MERGE), as eager steps and with the window
// written in a second launch (BRISK_NO_CUDA_CONV_INLINE_STATE; one-token steps write it in the
// conv's). Steps of 1 token and of 5 tokens of three sequences (the verify / batch shape), over
// three steps (the state carries).
TEST(CudaDeltaNet, ConvAndQkL2NormsShareALaunch) {
  REQUIRE_CUDA(probe);
  (void)probe;
  const int64_t kd = 2 * 128, vd = 4 * 128, C = 2 * kd + vd;
  const int32_t taps = 4;
  const std::vector<float> w = test::gaussian(size_t(C * taps), 71);
  for (const std::vector<int32_t>& seq : {std::vector<int32_t>{1}, std::vector<int32_t>{0, 1, 0, 1, 2}}) {
    const int64_t rows = int64_t(seq.size());
    struct Got { std::vector<float> out, state; size_t launches = 0; };
    auto run = [&](bool graphs, bool merge, bool inline_state = true) {
      std::optional<ScopedEnv> off, two;
      if (!merge) off.emplace("BRISK_NO_CUDA_NORM_MERGE", "1");
      if (!inline_state) two.emplace("BRISK_NO_CUDA_CONV_INLINE_STATE", "1");
      auto be = make_cuda_backend(0, graphs);
      DeviceCopies dc(*be);
      const int64_t slot = int64_t(taps - 1) * C;
      float* dw = dc.put(w);
      float* dstate = dc.put(std::vector<float>(size_t(3 * slot), 0.0f));
      float* dout = dc.put(std::vector<float>(size_t(rows * C), 0.0f));
      float* dx = dc.put(std::vector<float>(size_t(rows * C), 0.0f));
      std::vector<int32_t> ids(size_t(rows), 0), pos(size_t(rows), 0), out_rows(size_t(rows), 0);
      std::vector<float> outs;
      for (int step = 0; step < 3; ++step) {  // eager, captured, replayed
        std::vector<int32_t> seen(3, 0);
        for (int64_t i = 0; i < rows; ++i) {
          const int32_t s = seq[size_t(i)];
          int32_t n_s = 0;
          for (const int32_t u : seq) n_s += u == s;
          pos[size_t(i)] = step * n_s + seen[size_t(s)]++;
          out_rows[size_t(i)] = int32_t(i);
        }
        const std::vector<float> x = test::gaussian(size_t(rows * C), uint32_t(80 + step));
        be->copy(dx, x.data(), sizeof(float) * x.size());
        be->begin_step({.n_tok = int32_t(rows), .ids = ids.data(), .pos = pos.data(), .seq = seq.data(),
                        .n_out = int32_t(rows), .out_rows = out_rows.data()});
        const Mat out{.data = dout, .rows = rows, .cols = C};
        be->conv_state({.out = out, .x = {.data = dx, .rows = rows, .cols = C}, .weight = dw, .kernel = taps,
                        .state = {.data = dstate, .slot_floats = slot, .n_slots = 3}, .seq = seq.data(),
                        .pos = pos.data(), .silu = true});
        const Mat q{.data = dout, .rows = rows, .cols = kd, .stride = C};
        const Mat k{.data = dout + kd, .rows = rows, .cols = kd, .stride = C};
        be->l2_norm({.out = q, .x = q, .group = 128});
        be->l2_norm({.out = k, .x = k, .group = 128});
        be->end_step();
        const std::vector<float> o = dc.get(dout, size_t(rows * C));
        outs.insert(outs.end(), o.begin(), o.end());
      }
      return Got{outs, dc.get(dstate, size_t(3 * slot)), cuda_step_launches(*be)};
    };
    const Got merged = run(true, true), apart = run(true, false), eager = run(false, true);
    EXPECT_EQ(merged.launches + 2, apart.launches) << rows << " rows";
    EXPECT_EQ(merged.out, apart.out) << rows << " rows";
    EXPECT_EQ(merged.state, apart.state) << rows << " rows";
    EXPECT_EQ(merged.out, eager.out) << rows << " rows";
    EXPECT_EQ(merged.state, eager.state) << rows << " rows";
    // One token writes the conv window in the conv's launch: the same window as a second launch.
    const Got two = run(true, true, false);
    EXPECT_EQ(merged.out, two.out) << rows << " rows, window in a second launch";
    EXPECT_EQ(merged.state, two.state) << rows << " rows, window in a second launch";
    // The norms took effect: every q / k head of the last step has unit length.
    for (int64_t h = 0; h < 2 * kd / 128; ++h) {
      double ss = 0.0;
      for (int64_t i = 0; i < 128; ++i) ss += double(merged.out[size_t(2 * rows * C + h * 128 + i)]) *
                                              merged.out[size_t(2 * rows * C + h * 128 + i)];
      EXPECT_NEAR(ss, 1.0, 1e-4) << "head " << h;
    }
  }
}

#endif

}  // namespace
}  // namespace brisk
