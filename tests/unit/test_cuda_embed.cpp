// Embeddings on the CUDA backend: dense attention over packed sequences (seq_start) with and
// without a local window against the CPU reference, tanh, and whole encoders run by an
// Embedder on `cuda` against the same Embedder on the CPU: the shared BERT fixture (hidden
// states and pooled vectors, and its transformers reference), random-weight NomicBERT and
// ModernBERT GGUFs (rotary positions, SwiGLU / GeGLU, local windows) and a cross-encoder's scores,
// each with inputs of lengths 1..90 packed in one forward; the tensor-core dense attention
// against the FP32 kernel (BRISK_NO_CUDA_DENSE_ATTENTION_TC), with the q / k / v biases taken as
// it reads the rows, and BERT's fused forms bit-equal to their kill switches; EmbeddingGemma (a bidirectional
// decoder with a sliding window, through its Context) against sentence-transformers and the CPU.
// Skips without a CUDA build or a GPU.
//
// Tolerance: the GPU sums in float in other orders than the CPU (and uses other GEMM tilings);
// 1e-4 on hidden states of O(1), 1e-5 on L2-normalised vectors.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "embed_reference.h"
#include "formats/json_file.h"
#include "kernels/cpu/encoder_ops.h"
#include "model_fixtures.h"
#include "models/random_model.h"
#include "quant/types.h"
#include "random_values.h"
#include "runtime/embedder.h"
#include "runtime/engine_parts.h"
#include "scoped_env.h"
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
      EXPECT_LT(test::embed_max_diff(got, want), 1e-4f) << n_head << "/" << n_head_kv << " x " << hd << " window " << window;
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
  EXPECT_LT(test::embed_max_diff(got, want), 1e-6f);
}

// The tensor-core kernel (head_dim 16 / 32 / 64 / 128) against the FP32 kernel and the reference:
// packed sequences of lengths 1..130, local windows, GQA, rows with a stride.
TEST(CudaEmbed, DenseAttentionTensorCoresMatchFp32Kernel) {
  REQUIRE_EMBED_GPU();
  auto be = make_cuda_backend(0);
  const std::vector<int32_t> lens = {1, 63, 64, 65, 130, 7, 128, 2};
  std::vector<int32_t> start = {0};
  for (int32_t l : lens) start.push_back(start.back() + l);
  const int64_t rows = start.back();
  for (auto [n_head, n_head_kv, hd] : {std::tuple{3, 1, 16}, std::tuple{4, 4, 32}, std::tuple{4, 2, 64}, std::tuple{2, 1, 128}})
    for (int32_t window : {0, 1, 8, 70}) {
      const int64_t qw = int64_t(n_head) * hd, kw = int64_t(n_head_kv) * hd;
      // q / k / v as column slices of one [rows, qw + 2 kw] buffer (a fused qkv output).
      const int64_t ld = qw + 2 * kw;
      std::vector<float> qkv = test::gaussian(size_t(rows * ld), 71 + hd, 1.5f), want(size_t(rows * qw));
      auto* dqkv = static_cast<float*>(be->alloc(sizeof(float) * qkv.size()));
      be->copy(dqkv, qkv.data(), sizeof(float) * qkv.size());
      auto* dout = static_cast<float*>(be->alloc(sizeof(float) * size_t(rows * qw)));
      const AttentionDenseArgs a{.out = {.data = dout, .rows = rows, .cols = qw},
                                 .q = {.data = dqkv, .rows = rows, .cols = qw, .stride = ld},
                                 .k = {.data = dqkv + qw, .rows = rows, .cols = kw, .stride = ld},
                                 .v = {.data = dqkv + qw + kw, .rows = rows, .cols = kw, .stride = ld},
                                 .n_seq = int32_t(lens.size()), .seq_start = start.data(), .n_head = n_head,
                                 .n_head_kv = n_head_kv, .head_dim = hd, .scale = float(1.0 / std::sqrt(double(hd))),
                                 .window = window};
      AttentionDenseArgs h = a;
      h.out = {.data = want.data(), .rows = rows, .cols = qw};
      h.q.data = qkv.data();
      h.k.data = qkv.data() + qw;
      h.v.data = qkv.data() + qw + kw;
      ref::attention_dense(h);
      std::vector<float> got[2];
      for (int fp32 = 0; fp32 < 2; ++fp32) {
        ScopedEnv off("BRISK_NO_CUDA_DENSE_ATTENTION_TC", fp32 ? "1" : "0");
        ASSERT_TRUE(be->attention_dense(a));
        got[fp32].resize(want.size());
        be->copy(got[fp32].data(), dout, sizeof(float) * want.size());
        EXPECT_LT(test::embed_max_diff(got[fp32], want), 1e-4f)
            << (fp32 ? "fp32 " : "tensor cores ") << n_head << "/" << n_head_kv << " x " << hd << " window " << window;
      }
      EXPECT_LT(test::embed_max_diff(got[0], got[1]), 1e-4f) << n_head << "/" << n_head_kv << " x " << hd << " window " << window;
      be->free(dqkv);
      be->free(dout);
    }
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
  for (size_t i = 0; i < inputs.size(); ++i) EXPECT_LT(test::embed_max_diff(hg[i], hc[i]), 1e-4f) << what << " input " << i;
  const auto ec = cpu.embed(inputs), eg = gpu.embed(inputs);
  for (size_t i = 0; i < inputs.size(); ++i) EXPECT_LT(test::embed_max_diff(eg[i], ec[i]), 1e-5f) << what << " input " << i;
  if (scores) {
    const auto cc = cpu.classify(inputs), cg = gpu.classify(inputs);
    for (size_t i = 0; i < inputs.size(); ++i) EXPECT_LT(test::embed_max_diff(cg[i], cc[i]), 1e-4f) << what << " pair " << i;
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

// BF16 weights (the tensor-core GEMM): the fused epilogues (bias + GELU, residual add + bias +
// LayerNorm, the next GEMM's BF16 rounding in the same launch) give the bits of the separate
// launches; the tensor-core attention agrees with the FP32 kernel to float roundings.
TEST(CudaEmbed, EncoderEpiloguesMatchSeparateLaunches) {
  REQUIRE_EMBED_GPU();
  for (const char* shape : {"bert-tiny", "bert-tiny-rerank", "nomic-tiny", "modernbert-tiny"}) {
    RandomModelParams p = random_model_preset(shape);
    p.n_threads = 2;
    p.type = QuantType::BF16;
    auto model = model_load_gguf_bytes(random_model_gguf(p));
    std::mt19937 rng(9);
    std::vector<EmbedInput> inputs;
    for (int32_t len : {1, 3, 16, 33, 64, 90, 130}) {
      EmbedInput in;
      for (int32_t t = 0; t < len; ++t) in.ids.push_back(int32_t(rng() % uint32_t(p.n_vocab)));
      inputs.push_back(std::move(in));
    }
    auto run = [&](const char* fuse_off, const char* tc_off, const char* other_switch = nullptr) {
      ScopedEnv f("BRISK_NO_CUDA_ENCODER_FUSE", fuse_off);
      ScopedEnv t("BRISK_NO_CUDA_DENSE_ATTENTION_TC", tc_off);
      std::optional<ScopedEnv> o;
      if (other_switch) o.emplace(other_switch, "1");
      Embedder gpu(model, {.device = "cuda", .n_threads = 2});
      return gpu.hidden(inputs);
    };
    const auto fused = run("0", "0"), apart = run("1", "0"), fp32 = run("0", "1");
    const auto scalar_act = run("0", "0", "BRISK_NO_CUDA_VEC4_ACT");
    const auto narrow = run("0", "0", "BRISK_NO_CUDA_ATTENTION_WIDE");
    const auto unstaged = run("0", "0", "BRISK_NO_CUDA_ATTENTION_STAGE");
    const auto act_row = run("0", "0", "BRISK_NO_CUDA_ACT_ROWS4");
    const auto norm_passes = run("0", "0", "BRISK_NO_CUDA_ENCODER_NORM_REGS");
    for (size_t i = 0; i < inputs.size(); ++i) {
      EXPECT_EQ(fused[i], apart[i]) << shape << " input " << i;
      EXPECT_EQ(fused[i], scalar_act[i]) << shape << " input " << i << " (activation one element per thread)";
      EXPECT_EQ(fused[i], narrow[i]) << shape << " input " << i << " (attention 64 rows per block)";
      EXPECT_EQ(fused[i], unstaged[i]) << shape << " input " << i << " (attention tiles through registers)";
      EXPECT_EQ(fused[i], act_row[i]) << shape << " input " << i << " (activation a row at a time)";
      // The attentions differ by ~1e-5; the next GEMM's BF16 rounding of its input turns that
      // into whole BF16 steps where a value sits near a rounding boundary: 2^-8 of the value's
      // magnitude each, a few of them over the layers.
      float mag = 1.0f;
      for (float v : fp32[i]) mag = std::max(mag, std::fabs(v));
      EXPECT_LT(test::embed_max_diff(fused[i], fp32[i]), 4.0f * mag / 256.0f) << shape << " input " << i;
      // The LayerNorm's three-pass kernel sums the mean and variance in another order: float
      // roundings, which the next GEMM's BF16 rounding can turn into BF16 steps in the same way.
      EXPECT_LT(test::embed_max_diff(fused[i], norm_passes[i]), 4.0f * mag / 256.0f) << shape << " input " << i;
    }
    // Pooled on the device (mean / CLS / last) or on the host from the copied rows: the same bits.
    Embedder gpu(model, {.device = "cuda", .n_threads = 2});
    for (PoolingMode mode : {PoolingMode::mean, PoolingMode::cls, PoolingMode::last}) {
      gpu.set_pooling_mode(mode);
      const auto dev = gpu.embed(inputs);
      ScopedEnv host("BRISK_NO_CUDA_POOLING", "1");
      const auto back = gpu.embed(inputs);
      for (size_t i = 0; i < inputs.size(); ++i) EXPECT_EQ(dev[i], back[i]) << shape << " pooling " << int(mode) << " input " << i;
    }
  }
}

// The q / k / v biases taken by the tensor-core attention as it reads the rows: the bits of the
// same attention over rows that already hold the bias (the sums the bias launch stores), for
// dense and strided rows, GQA and windows. And the activation launch past 65535 rows.
TEST(CudaEmbed, DenseAttentionBiasEqualsBiasAddedFirst) {
  REQUIRE_EMBED_GPU();
  auto be = make_cuda_backend(0);
  const std::vector<int32_t> lens = {1, 63, 64, 65, 130, 7};
  std::vector<int32_t> start = {0};
  for (int32_t l : lens) start.push_back(start.back() + l);
  const int64_t rows = start.back();
  auto dev = [&](const std::vector<float>& h) {
    auto* p = static_cast<float*>(be->alloc(sizeof(float) * h.size()));
    be->copy(p, h.data(), sizeof(float) * h.size());
    return p;
  };
  for (auto [n_head, n_head_kv, hd] : {std::tuple{4, 4, 16}, std::tuple{4, 2, 64}, std::tuple{2, 1, 128}})
    for (int32_t window : {0, 8}) {
      const int64_t qw = int64_t(n_head) * hd, kw = int64_t(n_head_kv) * hd, ld = qw + 2 * kw;
      const std::vector<float> qkv = test::gaussian(size_t(rows * ld), 81 + hd, 1.5f);
      const std::vector<float> bias = test::gaussian(size_t(ld), 91 + hd, 0.7f);
      std::vector<float> biased = qkv;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < ld; ++c) biased[size_t(r * ld + c)] += bias[size_t(c)];
      float *draw = dev(qkv), *dbiased = dev(biased), *dbias = dev(bias);
      auto* dout = static_cast<float*>(be->alloc(sizeof(float) * size_t(rows * qw)));
      auto args = [&](float* base) {
        return AttentionDenseArgs{.out = {.data = dout, .rows = rows, .cols = qw},
                                  .q = {.data = base, .rows = rows, .cols = qw, .stride = ld},
                                  .k = {.data = base + qw, .rows = rows, .cols = kw, .stride = ld},
                                  .v = {.data = base + qw + kw, .rows = rows, .cols = kw, .stride = ld},
                                  .n_seq = int32_t(lens.size()), .seq_start = start.data(), .n_head = n_head,
                                  .n_head_kv = n_head_kv, .head_dim = hd, .scale = float(1.0 / std::sqrt(double(hd))),
                                  .window = window};
      };
      std::vector<float> want(size_t(rows * qw)), got(want.size());
      ASSERT_TRUE(be->attention_dense(args(dbiased)));
      be->copy(want.data(), dout, sizeof(float) * want.size());
      AttentionDenseArgs a = args(draw);
      a.q_bias = dbias, a.k_bias = dbias + qw, a.v_bias = dbias + qw + kw;
      ASSERT_TRUE(be->attention_dense_bias(a));
      ASSERT_TRUE(be->attention_dense(a));
      be->copy(got.data(), dout, sizeof(float) * got.size());
      EXPECT_EQ(got, want) << n_head << "/" << n_head_kv << " x " << hd << " window " << window;
      // 64 query rows per block, and K / V tiles through registers: the same bits.
      for (const char* sw : {"BRISK_NO_CUDA_ATTENTION_WIDE", "BRISK_NO_CUDA_ATTENTION_STAGE"}) {
        ScopedEnv off(sw, "1");
        std::vector<float> other(want.size());
        ASSERT_TRUE(be->attention_dense(a));
        be->copy(other.data(), dout, sizeof(float) * other.size());
        EXPECT_EQ(other, got) << sw << " " << n_head << "/" << n_head_kv << " x " << hd << " window " << window;
      }
      {
        ScopedEnv off("BRISK_NO_CUDA_ATTENTION_BIAS", "1");
        EXPECT_FALSE(be->attention_dense_bias(a));
      }
      for (float* p : {draw, dbiased, dbias, dout}) be->free(p);
    }
  // GELU over 70000 rows of 3 (the row blocks of the grid wrap) against the reference.
  const int64_t n_rows = 70000;
  std::vector<float> x = test::gaussian(size_t(n_rows * 3), 65, 2.0f), want(x.size()), got(x.size());
  float* dx = dev(x);
  be->unary({.out = {.data = dx, .rows = n_rows, .cols = 3}, .x = {.data = dx, .rows = n_rows, .cols = 3}});
  be->copy(got.data(), dx, sizeof(float) * got.size());
  be->free(dx);
  ref::unary({.out = {.data = want.data(), .rows = n_rows, .cols = 3}, .x = {.data = x.data(), .rows = n_rows, .cols = 3}});
  EXPECT_LT(test::embed_max_diff(got, want), 1e-5f);
  // Four columns per thread over 270001 rows (four rows per thread: the row groups wrap, and the
  // last group is short) against the reference.
  const int64_t n4 = 270001;
  std::vector<float> x4 = test::gaussian(size_t(n4 * 4), 66, 2.0f), want4(x4.size()), got4(x4.size());
  float* dx4 = dev(x4);
  be->unary({.out = {.data = dx4, .rows = n4, .cols = 4}, .x = {.data = dx4, .rows = n4, .cols = 4}});
  be->copy(got4.data(), dx4, sizeof(float) * got4.size());
  be->free(dx4);
  ref::unary({.out = {.data = want4.data(), .rows = n4, .cols = 4}, .x = {.data = x4.data(), .rows = n4, .cols = 4}});
  EXPECT_LT(test::embed_max_diff(got4, want4), 1e-5f);
}

// BERT encoders with the q / k / v biases in the attention and without the dead stores (the
// activation's F32 rows before the down matmul, the matmul output + bias before the residual
// add): the bits of the kill switches' separate launches, F32 and BF16 weights, hidden states
// and cross-encoder scores.
TEST(CudaEmbed, AttentionBiasAndSkippedStoresMatchSeparateLaunches) {
  REQUIRE_EMBED_GPU();
  for (const char* shape : {"bert-tiny", "bert-tiny-rerank"})
    for (QuantType type : {QuantType::F32, QuantType::BF16}) {
      RandomModelParams p = random_model_preset(shape);
      p.n_threads = 2;
      p.type = type;
      auto model = model_load_gguf_bytes(random_model_gguf(p));
      std::mt19937 rng(11);
      std::vector<EmbedInput> inputs;
      for (int32_t len : {1, 5, 16, 64, 65, 130}) {
        EmbedInput in;
        for (int32_t t = 0; t < len; ++t) in.ids.push_back(int32_t(rng() % uint32_t(p.n_vocab)));
        in.types.assign(size_t(len), len % 2);
        inputs.push_back(std::move(in));
      }
      auto run = [&](const char* bias_off, const char* skip_off) {
        ScopedEnv b("BRISK_NO_CUDA_ATTENTION_BIAS", bias_off);
        ScopedEnv s("BRISK_NO_CUDA_SKIP_DEAD_WRITES", skip_off);
        Embedder gpu(model, {.device = "cuda", .n_threads = 2});
        auto out = gpu.hidden(inputs);
        if (p.n_cls_out > 0)
          for (auto& v : gpu.classify(inputs)) out.push_back(std::move(v));
        return out;
      };
      const auto base = run("1", "1");
      for (auto [bias_off, skip_off] : {std::pair{"0", "0"}, std::pair{"0", "1"}, std::pair{"1", "0"}}) {
        const auto got = run(bias_off, skip_off);
        ASSERT_EQ(got.size(), base.size());
        for (size_t i = 0; i < got.size(); ++i)
          EXPECT_EQ(got[i], base[i]) << shape << " " << quant_type_info(type).name << " bias_off " << bias_off
                                     << " skip_off " << skip_off << " output " << i;
      }
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
  EXPECT_LT(test::embed_max_diff(gpu.hidden({x})[0], want), 1e-4f);
  std::vector<float> pooled;
  for (const auto& v : ref["mean_pooled"]) pooled.push_back(v.get<float>());
  EXPECT_LT(test::embed_max_diff(gpu.embed({x})[0], pooled), 1e-5f);
  expect_cuda_equals_cpu(model, Embedder(model, {.n_threads = 1}).vocab_size(), true, false, "wave2/bert_embed");
}

// EmbeddingGemma (bidirectional Gemma 3, a sliding layer of window 16) through its Context on
// the GPU: the fixture's sentence-transformers vectors and the CPU's, its inputs packed in one call.
TEST(CudaEmbed, EmbeddingGemmaFixtureMatchesSentenceTransformers) {
  REQUIRE_EMBED_GPU();
  const std::string dir = std::string(BRISK_FIXTURES) + "/models/embed_gemma";
  if (!std::filesystem::exists(dir + "/ref.json")) GTEST_SKIP() << dir << " is not here";
  const nlohmann::json ref = read_json_file(dir + "/ref.json");
  auto model = Model::load({.path = dir + "/hf"});
  std::vector<EmbedInput> in;
  for (const auto& ids : ref.at("inputs")) in.push_back({.ids = ids.get<std::vector<int32_t>>()});
  Embedder gpu(model, {.device = "cuda", .n_threads = 2});
  Embedder cpu(model, {.device = "cpu", .n_threads = 2});
  std::vector<float> hidden;
  for (const auto& row : ref["last_hidden_state"])
    for (const auto& v : row) hidden.push_back(v.get<float>());
  EXPECT_LT(test::embed_max_diff(gpu.hidden({in[0]})[0], hidden), 1e-4f);
  const auto eg = gpu.embed(in), ec = cpu.embed(in);
  ASSERT_EQ(eg.size(), ref.at("embeddings").size());
  for (size_t i = 0; i < eg.size(); ++i) {
    std::vector<float> want;
    for (const auto& v : ref["embeddings"][i]) want.push_back(v.get<float>());
    EXPECT_LT(test::embed_max_diff(eg[i], want), 1e-5f) << "input " << i;
    EXPECT_LT(test::embed_max_diff(eg[i], ec[i]), 1e-5f) << "input " << i;
  }
  // Each input alone gives its packed vector.
  for (size_t i = 0; i < in.size(); ++i) EXPECT_LT(test::embed_max_diff(gpu.embed({in[i]})[0], eg[i]), 1e-5f) << "input " << i;
}

#endif

}  // namespace
}  // namespace brisk
