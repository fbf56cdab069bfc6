// The sampler chain on the device (Backend::sample_rows, kernels/cuda/sample.cu) against the
// host Sampler: with the same parameters, seed and history, the device draws the same tokens.
// Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "scoped_env.h"
#include "backend/backend.h"
#include "core/error.h"
#include "core/flags.h"
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
TEST(CudaSample, Chain) { GTEST_SKIP() << "CUDA backend not built"; }
#else

std::unique_ptr<Backend> sample_cuda_or_null() {
  std::string reason;
  if (cuda::enumerate_devices(&reason).empty()) return nullptr;
  return make_cuda_backend(0);
}

// Logits of one row: gaussian * scale, with a few NaN / -inf entries and (ties) values
// rounded to steps of 0.25 so that equal logits meet at the top-k threshold.
std::vector<float> logits_row(int64_t n, uint32_t seed, float scale, bool ties) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) {
    x = d(rng) * scale;
    if (ties) x = std::round(x * 4.0f) / 4.0f;
  }
  v[size_t(n / 3)] = std::numeric_limits<float>::quiet_NaN();
  v[size_t(n / 5)] = -std::numeric_limits<float>::infinity();
  return v;
}

struct Case {
  const char* name;
  SamplerParams p;
  float scale;
  bool ties;
};

std::vector<Case> cases() {
  const float ban = -std::numeric_limits<float>::infinity();
  return {
      {"top-k 40, top-p, min-p", SamplerParams{.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f}, 3.0f,
       false},
      {"top-k 1", SamplerParams{.temperature = 1.0f, .top_k = 1, .top_p = 1.0f, .min_p = 0.0f}, 2.0f, false},
      {"top-k 1024 only, hot", SamplerParams{.temperature = 1.7f, .top_k = 1024, .top_p = 1.0f, .min_p = 0.0f}, 1.0f,
       false},
      {"top-k 200 with ties", SamplerParams{.temperature = 1.0f, .top_k = 200, .top_p = 0.9f, .min_p = 0.0f}, 2.0f,
       true},
      {"min-p only", SamplerParams{.temperature = 0.7f, .top_k = 512, .top_p = 1.0f, .min_p = 0.2f}, 4.0f, false},
      {"penalties and bias",
       SamplerParams{.temperature = 0.9f,
                     .top_k = 64,
                     .top_p = 0.9f,
                     .min_p = 0.02f,
                     .repeat_penalty = 1.3f,
                     .presence_penalty = 0.4f,
                     .frequency_penalty = 0.25f,
                     .penalty_last_n = 16,
                     .logit_bias = {{5, 2.5f}, {7, ban}, {5, -0.75f}, {11, 9.0f}}},
       3.0f, false},
      {"greedy with penalties",
       SamplerParams{.temperature = 0.0f, .repeat_penalty = 1.5f, .penalty_last_n = -1, .logit_bias = {{3, 1.0f}}},
       2.0f, true},
  };
}

// For each case and vocabulary: 24 draws, each on a fresh logits row, the host sampler on the
// host row and a twin sampler's device spec on the device copy; both accept the host's token.
TEST(CudaSample, DeviceChainDrawsWhatTheHostSamplerDraws) {
  auto be = sample_cuda_or_null();
  if (!be) GTEST_SKIP() << "no CUDA device";
  for (const int64_t n_vocab : {int64_t(1500), int64_t(151936)}) {
    auto* dev = static_cast<float*>(be->alloc(sizeof(float) * size_t(n_vocab)));
    for (const Case& c : cases()) {
      Sampler host(c.p, int32_t(n_vocab)), twin(c.p, int32_t(n_vocab));
      for (int32_t t : {5, 9, 5, 11, 13, 5, 9}) {
        host.accept(t);
        twin.accept(t);
      }
      int differ = 0;
      for (int draw = 0; draw < 24; ++draw) {
        const std::vector<float> row = logits_row(n_vocab, uint32_t(1000 * draw + n_vocab), c.scale, c.ties);
        be->copy(dev, row.data(), sizeof(float) * row.size());
        const int32_t want = host.sample(row.data());
        DeviceSampleSpec spec;
        std::vector<DeviceSampleEdit> edits;
        twin.device_spec(&spec, &edits);
        int32_t got = -7;
        ASSERT_TRUE(be->sample_rows(Mat{.data = dev, .rows = 1, .cols = n_vocab}, &spec, edits.data(),
                                    int32_t(edits.size()), &got));
        differ += got != want;
        EXPECT_EQ(got, want) << c.name << ", vocab " << n_vocab << ", draw " << draw;
        host.accept(want);
        twin.accept(want);
      }
      EXPECT_EQ(differ, 0) << c.name;
    }
    be->free(dev);
  }
}

// Several rows in one call, each with its own spec and edit range; a row with everything
// banned gives -1 (the host sampler throws on it).
TEST(CudaSample, RowsKeepTheirOwnSpecs) {
  auto be = sample_cuda_or_null();
  if (!be) GTEST_SKIP() << "no CUDA device";
  const int64_t n_vocab = 3000, rows = 3;
  std::vector<float> x;
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<float> row = logits_row(n_vocab, uint32_t(77 + r), 2.0f, false);
    x.insert(x.end(), row.begin(), row.end());
  }
  for (int64_t c = 0; c < n_vocab; ++c) x[size_t(2 * n_vocab + c)] = -std::numeric_limits<float>::infinity();
  auto* dev = static_cast<float*>(be->alloc(sizeof(float) * x.size()));
  be->copy(dev, x.data(), sizeof(float) * x.size());
  const SamplerParams pa{.temperature = 0.9f, .top_k = 20, .logit_bias = {{17, 30.0f}}};
  const SamplerParams pb{.temperature = 1.2f, .top_k = 300, .top_p = 0.5f, .repeat_penalty = 2.0f};
  Sampler ha(pa, int32_t(n_vocab)), ta(pa, int32_t(n_vocab)), hb(pb, int32_t(n_vocab)), tb(pb, int32_t(n_vocab)),
      tc(pb, int32_t(n_vocab));
  hb.accept(1);
  tb.accept(1);
  std::vector<DeviceSampleSpec> specs(3);
  std::vector<DeviceSampleEdit> edits;
  ta.device_spec(&specs[0], &edits);
  tb.device_spec(&specs[1], &edits);
  tc.device_spec(&specs[2], &edits);
  std::vector<int32_t> ids(3, -7);
  ASSERT_TRUE(be->sample_rows(Mat{.data = dev, .rows = rows, .cols = n_vocab}, specs.data(), edits.data(),
                              int32_t(edits.size()), ids.data()));
  EXPECT_EQ(ids[0], ha.sample(x.data()));
  EXPECT_EQ(ids[0], 17);  // the +30 bias
  EXPECT_EQ(ids[1], hb.sample(x.data() + n_vocab));
  EXPECT_EQ(ids[2], -1);
  // Bad specs are refused before anything runs.
  specs[0].top_k = kDeviceSampleMaxTopK + 1;
  EXPECT_THROW(be->sample_rows(Mat{.data = dev, .rows = 1, .cols = n_vocab}, specs.data(), edits.data(),
                               int32_t(edits.size()), ids.data()),
               Error);
  specs[0].top_k = 20;
  specs[0].n_edits = int32_t(edits.size()) + 1;
  EXPECT_THROW(be->sample_rows(Mat{.data = dev, .rows = 1, .cols = n_vocab}, specs.data(), edits.data(),
                               int32_t(edits.size()), ids.data()),
               Error);
  be->free(dev);
}

// Sampled generation on a fixture model: device sampling gives the tokens of host sampling
// from the copied logits (BRISK_NO_DEVICE_SAMPLING), and keeps only ids.
TEST(CudaSample, GenerateMatchesHostSampling) {
  std::string skip;
  auto model = load_shared_llama_on_cuda(&skip);
  if (!model) GTEST_SKIP() << skip;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 20; ++i) prompt.push_back(int32_t((i * 29 + 3) % model->info().n_vocab));
  auto run = [&](bool host) {
    std::unique_ptr<ScopedEnv> off;
    if (host) off = std::make_unique<ScopedEnv>("BRISK_NO_DEVICE_SAMPLING", "1");
    auto ctx = Context::create(model, {.n_ctx = 128, .n_seq_max = 1, .n_batch = 64, .device = "cuda"});
    GenerateParams gp{.max_tokens = 32,
                      .sampling = SamplerParams{.temperature = 1.5f, .top_k = 50, .top_p = 0.98f, .min_p = 0.0f,
                                                .repeat_penalty = 1.1f, .seed = 1234},
                      .stop_at_end_of_generation = false};
    const GenerateResult r = generate(*ctx, nullptr, prompt, gp);
    EXPECT_EQ(ctx->device_ids() != nullptr, !host);
    return r.tokens;
  };
  const std::vector<int32_t> device_tokens = run(false), host_tokens = run(true);
  ASSERT_EQ(device_tokens.size(), 32u);
  EXPECT_EQ(device_tokens, host_tokens);
}

#endif

}  // namespace
}  // namespace brisk
