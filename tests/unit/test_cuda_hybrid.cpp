// Hybrid linear-attention models (Qwen3.5 dense and MoE, Qwen3-Next) on CUDA against the CPU
// backend: a prompt longer than one delta-rule chunk in one prefill step (the chunked kernel) and
// in steps of 64 (graph steps, the recurrent kernel), then greedy decode steps; the chunked kernel
// against its kill switch; graphs and step replay against launch by launch; two interleaved
// sequences; a second turn restored from a device snapshot of the recurrent state against a cold
// run. Skips without a CUDA build, a GPU or the fixtures. Tolerances as CudaModel.MatchesCpu (F32
// weights: 1e-2 of the largest logit, the GEMM rounds prefill activations to BF16); runs on the
// same device that differ only in the order of float sums: 1e-3.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "scoped_env.h"
#include "core/error.h"
#include "runtime/engine_api.h"
#ifdef BRISK_HAVE_CUDA
#include "backend/cuda/cuda_devices.h"
#endif

namespace brisk {
namespace {

#ifndef BRISK_HAVE_CUDA
TEST(CudaHybrid, MatchesCpu) { GTEST_SKIP() << "CUDA backend not built"; }
#else

// "own/NAME": tests/fixtures/models/NAME; else a Hugging Face folder of the shared fixtures.
std::string hybrid_path(const std::string& name) {
  if (name.rfind("own/", 0) == 0) return std::string(BRISK_FIXTURES) + "/models/" + name.substr(4);
  return std::string(BRISK_SHARED_DATA) + "/models/" + name + "/hf";
}

std::vector<int32_t> hybrid_prompt(size_t n, int32_t n_vocab) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < n; ++i) ids.push_back(int32_t((i * 37 + 11) % size_t(n_vocab)));
  return ids;
}

struct HybridRun {
  std::vector<float> logits;  // the prompt's last position, then every decode step's
  std::vector<int32_t> greedy;
};

HybridRun run_hybrid(const std::shared_ptr<Model>& model, const std::string& device, const std::vector<int32_t>& prompt,
                     int32_t n_batch, int n_gen) {
  auto ctx = Context::create(model, {.n_ctx = 512, .n_seq_max = 1, .n_batch = n_batch, .kv_type = QuantType::F32,
                                     .n_threads = 2, .device = device});
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < prompt.size(); ++i)
    batch.push_back({.token = prompt[i], .pos = int32_t(i), .seq = 0, .want_logits = i + 1 == prompt.size()});
  ctx->decode(batch);
  HybridRun r;
  const int32_t nv = ctx->n_vocab();
  int32_t pos = int32_t(prompt.size());
  for (int i = 0; i <= n_gen; ++i) {
    const float* l = ctx->logits(0);
    r.logits.insert(r.logits.end(), l, l + nv);
    if (i == n_gen) break;
    const int32_t next = int32_t(std::max_element(l, l + nv) - l);
    r.greedy.push_back(next);
    ctx->decode({{.token = next, .pos = pos++, .seq = 0, .want_logits = true}});
  }
  return r;
}

float hybrid_max_abs(const std::vector<float>& a) {
  float m = 0.0f;
  for (float v : a) m = std::max(m, std::fabs(v));
  return m;
}

// Largest difference over the steps up to the first greedy difference (later steps follow other
// tokens).
float hybrid_diff(const HybridRun& a, const HybridRun& b, size_t nv) {
  size_t steps = 0;
  while (steps < a.greedy.size() && a.greedy[steps] == b.greedy[steps]) ++steps;
  float m = 0.0f;
  for (size_t i = 0; i < (steps + 1) * nv && i < a.logits.size(); ++i) m = std::max(m, std::fabs(a.logits[i] - b.logits[i]));
  return m;
}

class CudaHybrid : public ::testing::TestWithParam<std::string> {
 protected:
  std::shared_ptr<Model> load() {
    std::string reason;
    if (cuda::enumerate_devices(&reason).empty()) return nullptr;
    const std::string path = hybrid_path(GetParam());
    if (!std::filesystem::exists(path)) return nullptr;
    return Model::load({.path = path});
  }
};

#define REQUIRE_HYBRID(model) \
  auto model = load();        \
  if (!model) GTEST_SKIP() << "no CUDA device or no fixture " << hybrid_path(GetParam())

// A 150-token prompt in one step (chunked delta rule: chunks 64 + 64 + 22) and in steps of 64
// (graph steps: the recurrent kernel over runs of 64 tokens), then 8 greedy steps, against the CPU.
TEST_P(CudaHybrid, PrefillAndDecodeMatchCpu) {
  REQUIRE_HYBRID(model);
  const std::vector<int32_t> prompt = hybrid_prompt(150, model->info().n_vocab);
  const HybridRun cpu = run_hybrid(model, "cpu", prompt, 512, 8);
  const float tol = 1e-2f * hybrid_max_abs(cpu.logits);
  const size_t nv = size_t(model->info().n_vocab);
  for (int32_t n_batch : {512, 64}) {
    const HybridRun gpu = run_hybrid(model, "cuda", prompt, n_batch, 8);
    const float diff = hybrid_diff(cpu, gpu, nv);
    std::printf("[cuda hybrid] %s, steps of %d: max |logit diff| %.3g (tolerance %.3g)\n", GetParam().c_str(), n_batch,
                double(diff), double(tol));
    EXPECT_LT(diff, tol) << GetParam() << " n_batch " << n_batch;
  }
}

// The chunked delta rule against the recurrent kernel on the same prompt (BRISK_NO_CUDA_CHUNKED_DELTA).
TEST_P(CudaHybrid, ChunkedDeltaMatchesRecurrent) {
  REQUIRE_HYBRID(model);
  const std::vector<int32_t> prompt = hybrid_prompt(200, model->info().n_vocab);
  const HybridRun chunked = run_hybrid(model, "cuda", prompt, 512, 2);
  HybridRun recurrent;
  {
    ScopedEnv off("BRISK_NO_CUDA_CHUNKED_DELTA", "1");
    recurrent = run_hybrid(model, "cuda", prompt, 512, 2);
  }
  EXPECT_LT(hybrid_diff(chunked, recurrent, size_t(model->info().n_vocab)), 1e-3f * hybrid_max_abs(recurrent.logits));
}

// Decode steps as graphs and replayed graphs give the bits of launch-by-launch steps.
TEST_P(CudaHybrid, GraphsMatchLaunchByLaunchBitExact) {
  REQUIRE_HYBRID(model);
  const std::vector<int32_t> prompt = hybrid_prompt(20, model->info().n_vocab);
  const HybridRun with = run_hybrid(model, "cuda", prompt, 64, 12);
  HybridRun without;
  {
    ScopedEnv off("BRISK_NO_CUDA_GRAPHS", "1");
    without = run_hybrid(model, "cuda", prompt, 64, 12);
  }
  ASSERT_EQ(with.logits.size(), without.logits.size());
  EXPECT_EQ(std::memcmp(with.logits.data(), without.logits.data(), sizeof(float) * with.logits.size()), 0);
  EXPECT_EQ(with.greedy, without.greedy);
}

// Two sequences interleaved in one prefill batch and then decoded together (one step, two state
// slots through the step's sequence ids) give the CPU's logits.
TEST_P(CudaHybrid, InterleavedSequencesMatchCpu) {
  REQUIRE_HYBRID(model);
  const int32_t nv = model->info().n_vocab;
  const std::vector<int32_t> a = hybrid_prompt(70, nv), b = hybrid_prompt(97, nv * 3 / 4 + 1);
  const auto run = [&](const std::string& device) {
    auto ctx = Context::create(model, {.n_ctx = 256, .n_seq_max = 2, .n_batch = 512, .kv_type = QuantType::F32,
                                       .n_threads = 2, .device = device});
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
      if (i < a.size()) batch.push_back({.token = a[i], .pos = int32_t(i), .seq = 0, .want_logits = i + 1 == a.size()});
      if (i < b.size()) batch.push_back({.token = b[i], .pos = int32_t(i), .seq = 1, .want_logits = i + 1 == b.size()});
    }
    ctx->decode(batch);
    std::vector<float> out(ctx->logits(0), ctx->logits(0) + 2 * size_t(nv));
    for (int step = 0; step < 3; ++step) {
      ctx->decode({{.token = 5 + step, .pos = int32_t(a.size()) + step, .seq = 0, .want_logits = true},
                   {.token = 7 + step, .pos = int32_t(b.size()) + step, .seq = 1, .want_logits = true}});
      out.insert(out.end(), ctx->logits(0), ctx->logits(0) + 2 * size_t(nv));
    }
    return out;
  };
  const std::vector<float> cpu = run("cpu"), gpu = run("cuda");
  ASSERT_EQ(cpu.size(), gpu.size());
  float diff = 0.0f;
  for (size_t i = 0; i < cpu.size(); ++i) diff = std::max(diff, std::fabs(cpu[i] - gpu[i]));
  EXPECT_LT(diff, 1e-2f * hybrid_max_abs(cpu)) << GetParam();
}

// A second turn restored from a snapshot of the device state (cut back to 64 of 100 positions,
// and copied to another sequence) gives the logits of a cold run of the whole second prompt.
TEST_P(CudaHybrid, SecondTurnFromSnapshotEqualsColdRun) {
  REQUIRE_HYBRID(model);
  const int32_t nv = model->info().n_vocab;
  const std::vector<int32_t> turn1 = hybrid_prompt(100, nv);
  auto ctx = Context::create(model, {.n_ctx = 256, .n_seq_max = 2, .n_batch = 512, .kv_type = QuantType::F32,
                                     .n_threads = 2, .device = "cuda", .state_snapshot_interval = 16,
                                     .state_snapshots = 4});
  const auto feed = [&](Context& c, const std::vector<int32_t>& ids, int32_t seq, int32_t start) {
    std::vector<BatchToken> b;
    for (size_t i = 0; i < ids.size(); ++i)
      b.push_back({.token = ids[i], .pos = start + int32_t(i), .seq = seq, .want_logits = i + 1 == ids.size()});
    c.decode(b);
    return std::vector<float>(c.logits(0), c.logits(0) + nv);
  };
  feed(*ctx, std::vector<int32_t>(turn1.begin(), turn1.begin() + 70), 0, 0);
  for (size_t i = 70; i < turn1.size(); ++i) feed(*ctx, {turn1[i]}, 0, int32_t(i));
  EXPECT_GT(ctx->state_snapshots(), 0);
  const int32_t keep = ctx->seq_restorable(0, 66);
  EXPECT_EQ(keep, 64);
  std::vector<int32_t> turn2(turn1.begin(), turn1.begin() + 66);
  for (int32_t t : {11, 12, 13, 14, 15, 16, 17, 18, 19, 20}) turn2.push_back(t % nv);
  const std::vector<int32_t> rest(turn2.begin() + keep, turn2.end());
  ctx->seq_copy(0, 1, keep);
  const std::vector<float> copied = feed(*ctx, rest, 1, keep);
  ctx->seq_truncate(0, keep);
  const std::vector<float> restored = feed(*ctx, rest, 0, keep);
  auto cold = Context::create(model, {.n_ctx = 256, .n_seq_max = 1, .n_batch = 512, .kv_type = QuantType::F32,
                                      .n_threads = 2, .device = "cuda"});
  const std::vector<float> want = feed(*cold, turn2, 0, 0);
  float d1 = 0.0f, d2 = 0.0f;
  for (size_t i = 0; i < want.size(); ++i) {
    d1 = std::max(d1, std::fabs(restored[i] - want[i]));
    d2 = std::max(d2, std::fabs(copied[i] - want[i]));
  }
  EXPECT_LT(d1, 1e-3f * hybrid_max_abs(want)) << "restored";
  EXPECT_LT(d2, 1e-3f * hybrid_max_abs(want)) << "copied";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaHybrid,
                         ::testing::Values("qwen3_5", "qwen3_5_moe", "wave2/qwen3_5_moe", "wave2/qwen3_next",
                                           "own/qwen3_5_grouped_heads", "own/qwen3_5_moe_text_config_mtp",
                                           "own/qwen3_next_mlp_only"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '/', '_');
                           return n;
                         });

#endif

}  // namespace
}  // namespace brisk
