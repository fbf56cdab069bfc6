// The fixture models on CUDA against the CPU backend: last-position logits of a prompt and a
// greedy continuation. Skips without a CUDA build, a GPU, or the shared model fixtures.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>

#include "scoped_env.h"
#include "backend/kv_table.h"
#include "core/flags.h"
#include "runtime/engine_api.h"
#include "runtime/sampler.h"
#ifdef BRISK_HAVE_CUDA
#include "backend/cuda/cuda_devices.h"
#include "cuda_fixture.h"
#endif

namespace brisk {
namespace {

#ifndef BRISK_HAVE_CUDA
TEST(CudaModel, MatchesCpu) { GTEST_SKIP() << "CUDA backend not built"; }
#else

struct RunResult {
  std::vector<float> prompt_logits;  // last prompt position
  std::vector<int32_t> greedy;
  std::vector<float> all_logits;  // every step's logits, concatenated
};

RunResult run_on(const std::shared_ptr<Model>& model, const std::string& device, const std::vector<int32_t>& prompt, int n_gen,
                 QuantType kv = QuantType::F16, int32_t kv_block_size = kKvDefaultBlockSize) {
  auto ctx = Context::create(model, {.n_ctx = 256, .n_seq_max = 1, .n_batch = 64, .kv_type = kv, .n_threads = 2,
                                     .device = device, .kv_block_size = kv_block_size});
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
    r.all_logits.insert(r.all_logits.end(), l, l + nv);
    const int32_t next = int32_t(std::max_element(l, l + nv) - l);
    r.greedy.push_back(next);
    ctx->decode({{.token = next, .pos = pos++, .seq = 0, .want_logits = true}});
  }
  return r;
}

// "own/NAME": a Hugging Face folder of tests/fixtures/models (rope scalings, sliding window,
// biases, head_dim 32, the hybrids' grouped heads / MoE / Qwen3-Next forms, Gemma 4); "hf/NAME": the
// Hugging Face folder of a shared fixture (the hybrids, which have no GGUF there); else a GGUF of
// the shared fixtures.
std::string cuda_fixture_path(const std::string& name) {
  if (name.rfind("own/", 0) == 0) return std::string(BRISK_FIXTURES) + "/models/" + name.substr(4);
  if (name.rfind("hf/", 0) == 0) return std::string(BRISK_SHARED_DATA) + "/models/" + name.substr(3) + "/hf";
  return std::string(BRISK_SHARED_DATA) + "/models/" + name + ".gguf";
}

class CudaModel : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaModel, MatchesCpu) {
  std::string reason;
  if (cuda::enumerate_devices(&reason).empty()) GTEST_SKIP() << "no CUDA device: " << reason;
  const std::string& name = GetParam();
  const std::string path = cuda_fixture_path(name);
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "model fixture " << path << " is missing";
  auto model = Model::load({.path = path});
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(int32_t((i * 37 + 11) % model->info().n_vocab));
  // Blocks of 16 positions: the sliding-window layers of the Gemma 4 fixtures (windows of 8 to
  // 16 positions, shorter than the prompt) release and reuse blocks of their ring on both
  // backends.
  const int32_t block = name.find("gemma4") != std::string::npos ? 16 : kKvDefaultBlockSize;
  const RunResult cpu = run_on(model, "cpu", prompt, 12, QuantType::F16, block);
  const RunResult gpu = run_on(model, "cuda", prompt, 12, QuantType::F16, block);
  float max_abs = 0.0f, max_diff = 0.0f;
  for (size_t i = 0; i < cpu.prompt_logits.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(cpu.prompt_logits[i]));
    max_diff = std::max(max_diff, std::fabs(cpu.prompt_logits[i] - gpu.prompt_logits[i]));
  }
  std::printf("[cuda model] %s: max |logit diff| %.3g, relative to max |logit| %.3g\n", GetParam().c_str(),
              double(max_diff), double(max_diff / max_abs));
  // Q8_0 fixtures quantize every matmul input to 8 bits, as the CPU does. A relative
  // difference of 1e-6..1e-5 in an op (attention over the large scores of QK-normed heads,
  // summed in another order) can move one input across a rounding boundary, one quantization
  // step, which on these 64-wide models moves logits by a few percent (CudaTaps shows every
  // op agreeing to ~1e-5 before that). F32 fixtures have no such steps.
  const bool q8 = GetParam().find("q8_0") != std::string::npos;
  const float tol = (q8 ? 5e-2f : 1e-2f) * max_abs;
  EXPECT_LT(max_diff, tol) << GetParam();
  // Greedy tokens agree until a first difference, allowed only at a near-tie of the CPU's best
  // two logits (within the tolerance); the continuations differ after it.
  ASSERT_EQ(gpu.greedy.size(), cpu.greedy.size());
  const int32_t nv = int32_t(cpu.prompt_logits.size());
  for (size_t i = 0; i < cpu.greedy.size(); ++i) {
    if (gpu.greedy[i] == cpu.greedy[i]) continue;
    const float* l = cpu.all_logits.data() + i * size_t(nv);
    std::vector<float> sorted(l, l + nv);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    std::printf("[cuda model] %s: greedy step %zu differs (cpu %d, cuda %d), cpu top-2 margin %.3g\n",
                GetParam().c_str(), i, cpu.greedy[i], gpu.greedy[i], double(sorted[0] - sorted[1]));
    EXPECT_TRUE(q8 && sorted[0] - sorted[1] < tol) << GetParam() << " greedy step " << i;
    break;
  }
}

// BF16 and Q8_0 KV caches on both backends (the same cache bits): the prompt and 12 greedy steps
// against the CPU, on the Hugging Face fixtures (F32 weights; Q8_0 needs head_dim a multiple of
// 32), and against the CPU's own F16-cache run.
TEST(CudaModel, CacheTypesMatchCpu) {
  std::string reason;
  if (cuda::enumerate_devices(&reason).empty()) GTEST_SKIP() << "no CUDA device: " << reason;
  struct Case { const char* name; QuantType kv; };
  for (const Case cs : {Case{"llama_llama3", QuantType::BF16}, Case{"qwen2_untied", QuantType::BF16},
                        Case{"mistral_window", QuantType::BF16}, Case{"qwen3_mha_tied", QuantType::BF16},
                        Case{"qwen3_mha_tied", QuantType::Q8_0}, Case{"gemma4_window_kvshare", QuantType::BF16}}) {
    const char* name = cs.name;
    auto model = Model::load({.path = std::string(BRISK_FIXTURES) + "/models/" + name});
    std::vector<int32_t> prompt;
    for (int i = 0; i < 40; ++i) prompt.push_back(int32_t((i * 37 + 11) % model->info().n_vocab));
    const RunResult cpu = run_on(model, "cpu", prompt, 12, cs.kv);
    const RunResult gpu = run_on(model, "cuda", prompt, 12, cs.kv);
    const RunResult f16 = run_on(model, "cpu", prompt, 12, QuantType::F16);
    // Steps up to the first greedy difference between any two runs (each step's logits follow
    // the tokens picked before it).
    const size_t nv = cpu.prompt_logits.size();
    size_t steps = 0;
    while (steps < cpu.greedy.size() && gpu.greedy[steps] == cpu.greedy[steps] && f16.greedy[steps] == cpu.greedy[steps])
      ++steps;
    steps = std::min(steps + 1, cpu.greedy.size());
    float max_abs = 0.0f, diff = 0.0f, diff_f16 = 0.0f;
    for (size_t i = 0; i < steps * nv; ++i) {
      max_abs = std::max(max_abs, std::fabs(cpu.all_logits[i]));
      diff = std::max(diff, std::fabs(cpu.all_logits[i] - gpu.all_logits[i]));
      diff_f16 = std::max(diff_f16, std::fabs(cpu.all_logits[i] - f16.all_logits[i]));
    }
    std::printf("[cuda model] %s, %s cache, %zu steps: max |logit diff| %.3g (CPU F16 cache: %.3g), relative to max "
                "|logit| %.3g\n",
                name, std::string(quant_type_info(cs.kv).name).c_str(), steps, double(diff), double(diff_f16), double(diff / max_abs));
    EXPECT_LT(diff, 2e-2f * max_abs) << name << " " << quant_type_info(cs.kv).name;
    EXPECT_LT(diff_f16, 5e-2f * max_abs) << name << " " << quant_type_info(cs.kv).name;
  }
}

// Every named intermediate of a prompt forward (taps) on CUDA against the CPU: prints the
// relative difference of each, so that a divergence points at the op that starts it.
std::map<std::string, std::vector<float>> prompt_taps(const std::shared_ptr<Model>& model, const std::string& device,
                                                       const std::vector<int32_t>& prompt) {
  auto ctx = Context::create(model, {.n_ctx = 256, .n_seq_max = 1, .n_batch = 64, .n_threads = 2, .device = device});
  std::map<std::string, std::vector<float>> taps;
  std::vector<std::string> order;
  ctx->set_tap([&](const std::string& name, int layer, const float* data, int64_t rows, int64_t cols) {
    char key[96];
    std::snprintf(key, sizeof key, "%02d %s", layer + 1, name.c_str());
    taps[key].assign(data, data + rows * cols);
  });
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < prompt.size(); ++i)
    batch.push_back({.token = prompt[i], .pos = int32_t(i), .seq = 0, .want_logits = i + 1 == prompt.size()});
  ctx->decode(batch);
  return taps;
}

class CudaTaps : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaTaps, TrackCpu) {
  std::string reason;
  if (cuda::enumerate_devices(&reason).empty()) GTEST_SKIP() << "no CUDA device: " << reason;
  const std::string path = cuda_fixture_path(GetParam());
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "model fixture " << path << " is missing";
  auto model = Model::load({.path = path});
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(int32_t((i * 37 + 11) % model->info().n_vocab));
  const auto cpu = prompt_taps(model, "cpu", prompt);
  // The prompt's matmuls on the GEMV, which rounds activations through the weight format's
  // vec_dot_type as the CPU does (the BF16 tensor-core GEMM is checked by CudaModel and CudaGemm).
  ::setenv("BRISK_NO_CUDA_GEMM", "1", 1);
  flags_reload();
  const auto gpu = prompt_taps(model, "cuda", prompt);
  ::unsetenv("BRISK_NO_CUDA_GEMM");
  flags_reload();
  ASSERT_EQ(cpu.size(), gpu.size());
  for (const auto& [key, want] : cpu) {
    const auto it = gpu.find(key);
    ASSERT_NE(it, gpu.end()) << key;
    ASSERT_EQ(it->second.size(), want.size()) << key;
    float mx = 0.0f, diff = 0.0f;
    size_t at = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      mx = std::max(mx, std::fabs(want[i]));
      const float d = std::fabs(want[i] - it->second[i]);
      if (d > diff) { diff = d; at = i; }
    }
    std::printf("[cuda taps] %s %-18s max |diff| %.3g relative %.3g (at %zu)\n", GetParam().c_str(), key.c_str(),
                double(diff), double(diff / std::max(mx, 1e-30f)), at);
    EXPECT_LT(diff, 1e-2f * mx + 1e-6f) << GetParam() << " " << key;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaTaps,
                         ::testing::Values("qwen3/model-q8_0", "qwen3/model-f32", "qwen2/model-q8_0", "hf/qwen3_5",
                                           "own/qwen3_5_grouped_heads", "own/qwen3_next_mlp_only"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '/', '_');
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// Decode steps replayed from CUDA graphs give the same bits as launch-by-launch steps
// (BRISK_NO_CUDA_GRAPHS=1), prompt and every greedy step.
TEST(CudaGraphs, DecodeMatchesNoGraphsBitExact) {
  std::string skip;
  auto model = load_shared_llama_on_cuda(&skip);
  if (!model) GTEST_SKIP() << skip;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 9; ++i) prompt.push_back(int32_t((i * 53 + 5) % model->info().n_vocab));
  const RunResult with = run_on(model, "cuda", prompt, 10);
  ::setenv("BRISK_NO_CUDA_GRAPHS", "1", 1);
  flags_reload();
  const RunResult without = run_on(model, "cuda", prompt, 10);
  ::unsetenv("BRISK_NO_CUDA_GRAPHS");
  flags_reload();
  ASSERT_EQ(with.all_logits.size(), without.all_logits.size());
  EXPECT_EQ(std::memcmp(with.all_logits.data(), without.all_logits.data(), sizeof(float) * with.all_logits.size()), 0);
  EXPECT_EQ(with.greedy, without.greedy);
}

// The same on Gemma 4's layer kinds (per-layer embeddings, KV-shared layers, K = V layers,
// MoE with per-expert scales, sliding-window layers whose ring releases and reuses blocks of 16
// positions during the 40 steps).
TEST(CudaGraphs, Gemma4DecodeMatchesNoGraphsBitExact) {
  std::string reason;
  if (cuda::enumerate_devices(&reason).empty()) GTEST_SKIP() << "no CUDA device: " << reason;
  for (const char* name : {"gemma4_window_kvshare", "gemma4_ple_moe_wide"}) {
    auto model = Model::load({.path = std::string(BRISK_FIXTURES) + "/models/" + name});
    std::vector<int32_t> prompt;
    for (int i = 0; i < 9; ++i) prompt.push_back(int32_t((i * 53 + 5) % model->info().n_vocab));
    const RunResult with = run_on(model, "cuda", prompt, 40, QuantType::F16, 16);
    ::setenv("BRISK_NO_CUDA_GRAPHS", "1", 1);
    flags_reload();
    const RunResult without = run_on(model, "cuda", prompt, 40, QuantType::F16, 16);
    ::unsetenv("BRISK_NO_CUDA_GRAPHS");
    flags_reload();
    ASSERT_EQ(with.all_logits.size(), without.all_logits.size()) << name;
    EXPECT_EQ(std::memcmp(with.all_logits.data(), without.all_logits.data(), sizeof(float) * with.all_logits.size()), 0)
        << name;
    EXPECT_EQ(with.greedy, without.greedy) << name;
  }
}

// Decode steps that replay the previous step's graph (Backend::replay_step) give the bits of
// steps issued op by op: 300 one-token steps (past the first KV block of 256 positions and
// through the capacity's doublings), then two sequences whose one-token steps alternate (each
// step shaped unlike the one before it), then steps of both together, then one sequence again.
TEST(CudaGraphs, StepReplayMatchesOpByOpBitExact) {
  std::string skip;
  auto model = load_shared_llama_on_cuda(&skip);
  if (!model) GTEST_SKIP() << skip;
  const int32_t nv = model->info().n_vocab;
  const auto run = [&]() {
    auto ctx = Context::create(model, {.n_ctx = 512, .n_seq_max = 2, .n_batch = 64, .n_threads = 2, .device = "cuda"});
    std::vector<float> all;
    const auto keep = [&](int32_t n) {
      for (int32_t i = 0; i < n; ++i) all.insert(all.end(), ctx->logits(i), ctx->logits(i) + nv);
    };
    int32_t pos0 = 0, pos1 = 0;
    for (int i = 0; i < 300; ++i) {
      ctx->decode({{.token = int32_t((i * 31 + 3) % nv), .pos = pos0++, .seq = 0, .want_logits = true}});
      keep(1);
    }
    for (int i = 0; i < 20; ++i) {
      const int32_t s = i % 2;
      int32_t& p = s == 0 ? pos0 : pos1;
      ctx->decode({{.token = int32_t((i * 17 + 5) % nv), .pos = p++, .seq = s, .want_logits = true}});
      keep(1);
    }
    for (int i = 0; i < 8; ++i) {
      ctx->decode({{.token = int32_t((i * 13 + 1) % nv), .pos = pos0++, .seq = 0, .want_logits = true},
                   {.token = int32_t((i * 7 + 2) % nv), .pos = pos1++, .seq = 1, .want_logits = true}});
      keep(2);
    }
    for (int i = 0; i < 6; ++i) {
      ctx->decode({{.token = int32_t((i * 11 + 9) % nv), .pos = pos1++, .seq = 1, .want_logits = true}});
      keep(1);
    }
    return all;
  };
  const std::vector<float> replayed = run();
  std::vector<float> op_by_op;
  {
    ScopedEnv off("BRISK_NO_CUDA_STEP_REPLAY", "1");
    op_by_op = run();
  }
  ASSERT_EQ(replayed.size(), op_by_op.size());
  EXPECT_EQ(std::memcmp(replayed.data(), op_by_op.data(), sizeof(float) * replayed.size()), 0);
}

// Prefix sharing on the GPU (blocks of 16): a sequence copied from another (whole blocks
// shared, the partial last one copied), one truncated into a shared block and continued
// (copy-on-write), and the source itself, decoded together in one graph-replayed step, give the
// bits of the same sequences computed with private blocks by the same batches.
TEST(CudaPaged, SeqCopyMatchesRecomputeBitExact) {
  std::string skip;
  auto model = load_shared_llama_on_cuda(&skip);
  if (!model) GTEST_SKIP() << skip;
  std::vector<int32_t> p;
  for (int i = 0; i < 40; ++i) p.push_back(int32_t((i * 29 + 7) % model->info().n_vocab));
  const auto batch = [&](int32_t seq, int32_t from, int32_t to) {
    std::vector<BatchToken> b;
    for (int32_t i = from; i < to; ++i) b.push_back({.token = p[size_t(i)], .pos = i, .seq = seq, .want_logits = i + 1 == to});
    return b;
  };
  const ContextOptions opt{.n_ctx = 256, .n_seq_max = 3, .n_batch = 64, .n_threads = 2, .device = "cuda",
                           .kv_block_size = 16};
  const std::vector<BatchToken> step = {{.token = 3, .pos = 40, .seq = 0, .want_logits = true},
                                        {.token = 5, .pos = 40, .seq = 1, .want_logits = true},
                                        {.token = 7, .pos = 40, .seq = 2, .want_logits = true}};
  const auto logits = [](Context& c, int32_t n) {
    std::vector<float> all;
    for (int32_t i = 0; i < n; ++i) all.insert(all.end(), c.logits(i), c.logits(i) + c.n_vocab());
    return all;
  };
  // Shared: sequence 0's prompt, copied whole to 1 and truncated to 20 in 2, 2 then refilled.
  auto shared = Context::create(model, opt);
  shared->decode(batch(0, 0, 40));
  shared->seq_copy(0, 1, 40);
  shared->seq_copy(0, 2, 40);
  shared->seq_truncate(2, 20);
  shared->decode(batch(2, 20, 40));
  const std::vector<float> shared_refill = logits(*shared, 1);
  shared->decode(step);
  const std::vector<float> shared_step = logits(*shared, 3);
  // Private: every sequence computes its own prompt with the same batches.
  auto own = Context::create(model, opt);
  for (int32_t s = 0; s < 3; ++s) own->decode(batch(s, 0, 40));
  own->seq_truncate(2, 20);
  own->decode(batch(2, 20, 40));
  const std::vector<float> own_refill = logits(*own, 1);
  own->decode(step);
  const std::vector<float> own_step = logits(*own, 3);
  ASSERT_EQ(shared_step.size(), own_step.size());
  EXPECT_EQ(std::memcmp(shared_refill.data(), own_refill.data(), sizeof(float) * own_refill.size()), 0);
  EXPECT_EQ(std::memcmp(shared_step.data(), own_step.data(), sizeof(float) * own_step.size()), 0);
}

// Per-row device sampling (Context::set_next_device_samplers, what the server uses): three
// sequences with their own samplers (greedy, top-k with temperature, penalties) draw on the
// GPU the tokens their twins draw on the host from the same logits, step after step.
TEST(CudaSample, RowSamplersMatchHostSampling) {
  std::string skip;
  auto model = load_shared_llama_on_cuda(&skip);
  if (!model) GTEST_SKIP() << skip;
  const int32_t nv = model->info().n_vocab;
  const std::vector<SamplerParams> params = {
      SamplerParams{.temperature = 0.0f},
      SamplerParams{.temperature = 0.9f, .top_k = 40, .top_p = 0.9f, .min_p = 0.02f, .seed = 7},
      SamplerParams{.temperature = 1.2f, .top_k = 100, .repeat_penalty = 1.3f, .presence_penalty = 0.5f, .seed = 11}};
  std::vector<Sampler> dev, host;
  for (const SamplerParams& p : params) {
    dev.emplace_back(p, nv);
    host.emplace_back(p, nv);
  }
  const ContextOptions opt{.n_ctx = 128, .n_seq_max = 3, .n_batch = 64, .n_threads = 2, .device = "cuda"};
  auto a = Context::create(model, opt), b = Context::create(model, opt);
  std::vector<BatchToken> batch;
  for (int32_t s = 0; s < 3; ++s)
    for (int32_t i = 0; i < 6; ++i)
      batch.push_back({.token = (i * 31 + s * 7 + 1) % nv, .pos = i, .seq = s, .want_logits = i == 5});
  for (int step = 0; step < 16; ++step) {
    ASSERT_TRUE(a->set_next_device_samplers({&dev[0], &dev[1], &dev[2]}));
    a->decode(batch);
    b->decode(batch);
    ASSERT_NE(a->device_ids(), nullptr);
    std::vector<BatchToken> next;
    for (int32_t s = 0; s < 3; ++s) {
      const int32_t want = host[size_t(s)].sample(b->logits(s));
      ASSERT_EQ(a->device_ids()[s], want) << "sequence " << s << " step " << step;
      host[size_t(s)].accept(want);
      dev[size_t(s)].accept(want);
      next.push_back({.token = want, .pos = 6 + step, .seq = s, .want_logits = true});
    }
    batch = next;
  }
  // The next decode samples on the host again unless asked.
  a->decode(batch);
  EXPECT_EQ(a->device_ids(), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaModel,
                         ::testing::Values("llama/model-f32", "llama/model-q8_0", "qwen2/model-f32",
                                           "qwen2/model-q8_0", "qwen3/model-f32", "qwen3/model-q8_0",
                                           "mistral/model-f32", "mistral/model-q8_0", "gemma3/model-f32",
                                           "gemma3/model-q8_0", "qwen3_moe/model-f32", "qwen3_moe/model-q8_0",
                                           "own/llama_tied_gqa", "own/llama_linear", "own/llama_llama3",
                                           "own/llama_yarn", "own/mistral_window", "own/qwen2_untied",
                                           "own/qwen3_mha_tied", "hf/qwen3_5", "hf/qwen3_5_moe",
                                           "hf/wave2/qwen3_5_moe", "hf/wave2/qwen3_next",
                                           "own/qwen3_5_grouped_heads", "own/qwen3_5_moe_text_config_mtp",
                                           "own/qwen3_next_mlp_only", "hf/wave2/gemma4_text_ple_kvshare",
                                           "hf/wave2/gemma4_text_keqv", "hf/wave2/gemma4_text_moe",
                                           "own/gemma4_window_kvshare", "own/gemma4_keqv_moe",
                                           "own/gemma4_ple_moe_wide"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '/', '_');
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

#endif

}  // namespace
}  // namespace brisk
