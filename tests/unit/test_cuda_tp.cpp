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
#include "tp_greedy.h"
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

// The prompt both runs decode after.
const std::vector<int32_t> kTpCudaPrompt = {1, 15, 200, 31, 7, 512, 99, 3};

ContextOptions tp_cuda_options(const std::string& device, int32_t tp) {
  return {.n_ctx = 256, .n_seq_max = 1, .n_batch = 512, .kv_type = QuantType::F16, .device = device, .tp = tp};
}

TEST(TpCuda, WorldOfOneMatchesThePlainContext) {
  std::string why;
  auto model = load_shared_llama_on_cuda(&why);
  if (!model) GTEST_SKIP() << why;
  std::vector<std::vector<float>> l_plain, l_tp;
  auto plain = Context::create(model, tp_cuda_options("cuda:0", 0));
  const std::vector<int32_t> g_plain = tp_greedy(*plain, kTpCudaPrompt, 32, &l_plain);
  auto one = Context::create(model, tp_cuda_options("cuda:0", 1));
  EXPECT_EQ(one->options().tp, 1);
  EXPECT_EQ(one->options().device, "cuda:0");
  const std::vector<int32_t> g_tp = tp_greedy(*one, kTpCudaPrompt, 32, &l_tp);
  EXPECT_EQ(g_tp, g_plain);
  EXPECT_LE(tp_worst_difference(l_plain, l_tp), 1e-5f);
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
  const std::vector<int32_t> g1 = tp_greedy(*single, kTpCudaPrompt, 32, &l1);
  auto two = Context::create(model, tp_cuda_options("cuda:0,1", 0));
  EXPECT_EQ(two->options().tp, 2);
  EXPECT_EQ(two->options().device, "cuda:0,1");
  const std::vector<int32_t> g2 = tp_greedy(*two, kTpCudaPrompt, 32, &l2);
  EXPECT_EQ(g2, g1);
  EXPECT_LE(tp_worst_difference(l1, l2), 2e-3f);
}

#endif

}  // namespace
}  // namespace brisk::test
