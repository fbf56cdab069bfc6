// The fixture models on CUDA against the CPU backend: last-position logits of a prompt and a
// greedy continuation. Skips without a CUDA build, a GPU, or the shared model fixtures.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "runtime/engine_api.h"
#ifdef BRISK_HAVE_CUDA
#include "backend/cuda/cuda_devices.h"
#endif

namespace brisk {
namespace {

#ifndef BRISK_HAVE_CUDA
TEST(CudaModel, MatchesCpu) { GTEST_SKIP() << "CUDA backend not built"; }
#else

struct RunResult {
  std::vector<float> prompt_logits;  // last prompt position
  std::vector<int32_t> greedy;
};

RunResult run_on(const std::shared_ptr<Model>& model, const std::string& device, const std::vector<int32_t>& prompt, int n_gen) {
  auto ctx = Context::create(model, {.n_ctx = 256, .n_seq_max = 1, .n_batch = 64, .n_threads = 2, .device = device});
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < prompt.size(); ++i)
    batch.push_back({.token = prompt[i], .pos = int32_t(i), .seq = 0, .want_logits = i + 1 == prompt.size()});
  ctx->decode(batch);
  RunResult r;
  const int32_t nv = ctx->n_vocab();
  r.prompt_logits.assign(ctx->logits(0), ctx->logits(0) + nv);
  int32_t pos = int32_t(prompt.size());
  for (int i = 0; i < n_gen; ++i) {
    const float* l = ctx->logits(0);
    const int32_t next = int32_t(std::max_element(l, l + nv) - l);
    r.greedy.push_back(next);
    ctx->decode({{.token = next, .pos = pos++, .seq = 0, .want_logits = true}});
  }
  return r;
}

class CudaModel : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaModel, MatchesCpu) {
  std::string reason;
  if (cuda::enumerate_devices(&reason).empty()) GTEST_SKIP() << "no CUDA device: " << reason;
  const std::string path = std::string(BRISK_SHARED_DATA) + "/models/" + GetParam() + ".gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "shared model fixture " << path << " is missing";
  auto model = Model::load({.path = path});
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(int32_t((i * 37 + 11) % model->info().n_vocab));
  const RunResult cpu = run_on(model, "cpu", prompt, 12);
  const RunResult gpu = run_on(model, "cuda", prompt, 12);
  float max_abs = 0.0f, max_diff = 0.0f;
  for (size_t i = 0; i < cpu.prompt_logits.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(cpu.prompt_logits[i]));
    max_diff = std::max(max_diff, std::fabs(cpu.prompt_logits[i] - gpu.prompt_logits[i]));
  }
  std::printf("[cuda model] %s: max |logit diff| %.3g, relative to max |logit| %.3g\n", GetParam().c_str(),
              double(max_diff), double(max_diff / max_abs));
  EXPECT_LT(max_diff, 1e-2f * max_abs) << GetParam();
  EXPECT_EQ(gpu.greedy, cpu.greedy) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaModel,
                         ::testing::Values("llama/model-f32", "llama/model-q8_0", "qwen2/model-f32",
                                           "qwen2/model-q8_0", "qwen3/model-f32", "qwen3/model-q8_0",
                                           "mistral/model-f32", "mistral/model-q8_0"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '/', '_');
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

#endif

}  // namespace
}  // namespace brisk
