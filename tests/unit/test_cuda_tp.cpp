// Tensor parallelism on CUDA (runtime/tp_context.h): a world of one GPU through the
// tensor-parallel runner against the plain context (the same shard, runner and step code with
// the all-reduce left out), and, where the machine has two GPUs and NCCL, the model split over
// both against one GPU (logits within 2e-3 of the largest logit: the partial sums of the
// attention output and MLP down projection are added in another order; greedy ids identical).
// Both skip without the devices.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model_fixtures.h"
#include "runtime/engine_api.h"
#ifdef BRISK_HAVE_CUDA
#include "backend/cuda/cuda_devices.h"
#include "backend/cuda/cuda_nccl.h"
#include "cuda_fixture.h"
#endif

namespace brisk::test {
namespace {

#ifndef BRISK_HAVE_CUDA
TEST(TpCuda, WorldOfOneMatchesThePlainContext) { GTEST_SKIP() << "CUDA backend not built"; }
#else

std::vector<int32_t> tp_cuda_greedy(Context& ctx, int32_t n, std::vector<std::vector<float>>* logits) {
  const std::vector<int32_t> prompt = {1, 15, 200, 31, 7, 512, 99, 3};
  std::vector<BatchToken> b;
  for (size_t i = 0; i < prompt.size(); ++i)
    b.push_back({.token = prompt[i], .pos = int32_t(i), .seq = 0, .want_logits = i + 1 == prompt.size()});
  ctx.decode(b);
  std::vector<int32_t> ids;
  const int32_t nv = ctx.n_vocab();
  for (int32_t step = 0; step < n; ++step) {
    const float* l = ctx.logits(0);
    logits->emplace_back(l, l + nv);
    ids.push_back(int32_t(std::max_element(l, l + nv) - l));
    ctx.decode({{.token = ids.back(), .pos = int32_t(prompt.size()) + step, .seq = 0, .want_logits = true}});
  }
  return ids;
}

// The largest |a - b| over every step, relative to the step's largest |a|.
float tp_cuda_worst(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  float worst = 0.0f;
  for (size_t s = 0; s < a.size(); ++s) {
    float peak = 1.0f;
    for (float v : a[s]) peak = std::max(peak, std::fabs(v));
    for (size_t i = 0; i < a[s].size(); ++i) worst = std::max(worst, std::fabs(a[s][i] - b[s][i]) / peak);
  }
  return worst;
}

ContextOptions tp_cuda_options(const std::string& device, int32_t tp) {
  return {.n_ctx = 256, .n_seq_max = 1, .n_batch = 512, .kv_type = QuantType::F16, .device = device, .tp = tp};
}

TEST(TpCuda, WorldOfOneMatchesThePlainContext) {
  std::string why;
  auto model = load_shared_llama_on_cuda(&why);
  if (!model) GTEST_SKIP() << why;
  std::vector<std::vector<float>> l_plain, l_tp;
  auto plain = Context::create(model, tp_cuda_options("cuda:0", 0));
  const std::vector<int32_t> g_plain = tp_cuda_greedy(*plain, 32, &l_plain);
  auto one = Context::create(model, tp_cuda_options("cuda:0", 1));
  EXPECT_EQ(one->options().tp, 1);
  EXPECT_EQ(one->options().device, "cuda:0");
  const std::vector<int32_t> g_tp = tp_cuda_greedy(*one, 32, &l_tp);
  EXPECT_EQ(g_tp, g_plain);
  EXPECT_LE(tp_cuda_worst(l_plain, l_tp), 1e-5f);
}

TEST(TpCuda, TwoGpusMatchOne) {
  std::string why;
  const size_t n_dev = cuda::enumerate_devices(&why).size();
  if (n_dev < 2) GTEST_SKIP() << "needs 2 CUDA devices, found " << n_dev << (why.empty() ? "" : ": " + why);
  if (const std::string r = cuda::nccl_unavailable_reason(); !r.empty()) GTEST_SKIP() << r;
  REQUIRE_MODEL("llama");
  // F32: the 80 MLP columns per rank are not whole Q8_0 blocks.
  auto model = Model::load({.path = model_dir("llama") + "/model-f32.gguf"});
  std::vector<std::vector<float>> l1, l2;
  auto single = Context::create(model, tp_cuda_options("cuda:0", 0));
  const std::vector<int32_t> g1 = tp_cuda_greedy(*single, 32, &l1);
  auto two = Context::create(model, tp_cuda_options("cuda:0,1", 0));
  EXPECT_EQ(two->options().tp, 2);
  EXPECT_EQ(two->options().device, "cuda:0,1");
  const std::vector<int32_t> g2 = tp_cuda_greedy(*two, 32, &l2);
  EXPECT_EQ(g2, g1);
  EXPECT_LE(tp_cuda_worst(l1, l2), 2e-3f);
}

#endif

}  // namespace
}  // namespace brisk::test
