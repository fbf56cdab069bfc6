// Embeddings on the CUDA backend: dense attention over packed sequences (seq_start) with and
// without a local window against the CPU reference, tanh, and whole encoders run by an
// Embedder on `cuda` against the same Embedder on the CPU: the shared BERT fixture (hidden
// states and pooled vectors, and its transformers reference), random-weight NomicBERT and
// ModernBERT GGUFs (rotary positions, SwiGLU / GeGLU, local windows) and a cross-encoder's scores,
// each with inputs of lengths 1..90 packed in one forward. Skips without a CUDA build or a GPU.
//
// Tolerance: the GPU sums in float in other orders than the CPU (and uses other GEMM tilings);
// 1e-4 on hidden states of O(1), 1e-5 on L2-normalised vectors.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "kernels/cpu/encoder_ops.h"
#include "model_fixtures.h"
#include "models/random_model.h"
#include "random_values.h"
#include "runtime/embedder.h"
#include "runtime/engine_parts.h"
#ifdef BRISK_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_devices.h"
#endif

namespace brisk {
namespace {

#ifndef BRISK_HAVE_CUDA
TEST(CudaEmbed, Ops) { GTEST_SKIP() << "CUDA backend not built"; }
#else

bool cuda_embed_device(std::string* reason) { return !cuda::enumerate_devices(reason).empty(); }

#define REQUIRE_EMBED_GPU()                                 \
  std::string gpu_reason;                                   \
  if (!cuda_embed_device(&gpu_reason)) GTEST_SKIP() << "no CUDA device: " << gpu_reason

float cuda_embed_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = a.size() == b.size() ? 0.0f : INFINITY;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

TEST(CudaEmbed, PackedAndWindowedDenseAttentionMatchReference) {
  REQUIRE_EMBED_GPU();
  auto be = make_cuda_backend(0);
  const std::vector<int32_t> lens = {1, 9, 17, 2, 70, 8, 33, 100};
  std::vector<int32_t> start = {0};
  for (int32_t l : lens) start.push_back(start.back() + l);
  const int64_t rows = start.back();
  for (auto [n_head, n_head_kv, hd] : {std::tuple{4, 2, 64}, std::tuple{3, 3, 48}, std::tuple{2, 1, 128}})
    for (int32_t window : {0, 8, 1, 40}) {
      const int64_t qw = int64_t(n_head) * hd, kw = int64_t(n_head_kv) * hd;
      std::vector<float> q = test::gaussian(size_t(rows * qw), 61), k = test::gaussian(size_t(rows * kw), 62, 2.0f),
                         v = test::gaussian(size_t(rows * kw), 63), want(size_t(rows * qw)), got(size_t(rows * qw));
      auto dev = [&](const std::vector<float>& h) {
        auto* p = static_cast<float*>(be->alloc(sizeof(float) * h.size()));
        be->copy(p, h.data(), sizeof(float) * h.size());
        return p;
      };
      float *dq = dev(q), *dk = dev(k), *dv = dev(v), *dout = dev(got);
      const AttentionDenseArgs a{.out = {.data = dout, .rows = rows, .cols = qw}, .q = {.data = dq, .rows = rows, .cols = qw},
                                 .k = {.data = dk, .rows = rows, .cols = kw}, .v = {.data = dv, .rows = rows, .cols = kw},
                                 .n_seq = int32_t(lens.size()), .seq_start = start.data(), .n_head = n_head,
                                 .n_head_kv = n_head_kv, .head_dim = hd, .scale = float(1.0 / std::sqrt(double(hd))),
                                 .window = window};
      ASSERT_TRUE(be->attention_dense(a));
      be->copy(got.data(), dout, sizeof(float) * got.size());
      AttentionDenseArgs h = a;
      h.out = {.data = want.data(), .rows = rows, .cols = qw};
      h.q = {.data = q.data(), .rows = rows, .cols = qw};
      h.k = {.data = k.data(), .rows = rows, .cols = kw};
      h.v = {.data = v.data(), .rows = rows, .cols = kw};
      ref::attention_dense(h);
      EXPECT_LT(cuda_embed_diff(got, want), 1e-4f) << n_head << "/" << n_head_kv << " x " << hd << " window " << window;
      for (float* p : {dq, dk, dv, dout}) be->free(p);
    }
  // tanh (the classification head's pooler).
  std::vector<float> x = test::gaussian(300, 64, 3.0f), want(x.size()), got(x.size());
  auto* dx = static_cast<float*>(be->alloc(sizeof(float) * x.size()));
  be->copy(dx, x.data(), sizeof(float) * x.size());
  be->unary({.out = {.data = dx, .rows = 3, .cols = 100}, .x = {.data = dx, .rows = 3, .cols = 100}, .op = UnaryOp::tanh});
  be->copy(got.data(), dx, sizeof(float) * got.size());
  be->free(dx);
  ref::unary({.out = {.data = want.data(), .rows = 3, .cols = 100}, .x = {.data = x.data(), .rows = 3, .cols = 100},
              .op = UnaryOp::tanh});
  EXPECT_LT(cuda_embed_diff(got, want), 1e-6f);
}

// The same packed batch through an Embedder on each device.
void expect_cuda_equals_cpu(const std::shared_ptr<Model>& model, int32_t n_vocab, bool types, bool scores,
                            const std::string& what) {
  std::mt19937 rng(5);
  std::vector<EmbedInput> inputs;
  for (int32_t len : {1, 2, 7, 16, 17, 40, 90}) {
    EmbedInput in;
    for (int32_t t = 0; t < len; ++t) in.ids.push_back(int32_t(rng() % uint32_t(n_vocab)));
    if (types) in.types.assign(size_t(len), len % 2);
    inputs.push_back(std::move(in));
  }
  Embedder cpu(model, {.device = "cpu", .n_threads = 2});
  Embedder gpu(model, {.device = "cuda", .n_threads = 2});
  const auto hc = cpu.hidden(inputs), hg = gpu.hidden(inputs);
  for (size_t i = 0; i < inputs.size(); ++i) EXPECT_LT(cuda_embed_diff(hg[i], hc[i]), 1e-4f) << what << " input " << i;
  const auto ec = cpu.embed(inputs), eg = gpu.embed(inputs);
  for (size_t i = 0; i < inputs.size(); ++i) EXPECT_LT(cuda_embed_diff(eg[i], ec[i]), 1e-5f) << what << " input " << i;
  if (scores) {
    const auto cc = cpu.classify(inputs), cg = gpu.classify(inputs);
    for (size_t i = 0; i < inputs.size(); ++i) EXPECT_LT(cuda_embed_diff(cg[i], cc[i]), 1e-4f) << what << " pair " << i;
  }
}

TEST(CudaEmbed, EncodersMatchTheCpu) {
  REQUIRE_EMBED_GPU();
  for (const char* shape : {"bert-tiny", "bert-tiny-rerank", "nomic-tiny", "modernbert-tiny"}) {
    RandomModelParams p = random_model_preset(shape);
    p.n_threads = 2;
    expect_cuda_equals_cpu(model_load_gguf_bytes(random_model_gguf(p)), p.n_vocab, p.arch != "modern-bert",
                           p.n_cls_out > 0, shape);
  }
}

// The shared BERT fixture on the GPU against transformers (the CPU's tolerances).
TEST(CudaEmbed, BertFixtureMatchesTransformers) {
  REQUIRE_EMBED_GPU();
  REQUIRE_MODEL("wave2/bert_embed");
  std::ifstream in(model_dir("wave2/bert_embed") + "/ref.json");
  const nlohmann::json ref = nlohmann::json::parse(in);
  auto model = Model::load({.path = model_dir("wave2/bert_embed") + "/hf"});
  const EmbedInput x{.ids = ref["input_ids"].get<std::vector<int32_t>>(),
                     .types = ref["token_type_ids"].get<std::vector<int32_t>>()};
  Embedder gpu(model, {.device = "cuda"});
  std::vector<float> want;
  for (const auto& row : ref["last_hidden_state"])
    for (const auto& v : row) want.push_back(v.get<float>());
  EXPECT_LT(cuda_embed_diff(gpu.hidden({x})[0], want), 1e-4f);
  std::vector<float> pooled;
  for (const auto& v : ref["mean_pooled"]) pooled.push_back(v.get<float>());
  EXPECT_LT(cuda_embed_diff(gpu.embed({x})[0], pooled), 1e-5f);
  expect_cuda_equals_cpu(model, Embedder(model, {.n_threads = 1}).vocab_size(), true, false, "wave2/bert_embed");
}

#endif

}  // namespace
}  // namespace brisk
