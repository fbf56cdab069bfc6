// Random-weight models of the shape table (models/random_model.h), as `brisk make-random-model`
// writes them and as `brisk cuda-bench` builds them in memory: the same bytes either way, the
// same logits through Model::load and model_load_gguf_bytes, repeated rows when asked,
// mixture-of-experts shapes that load and run, and Whisper shapes (an encoder pass of two windows).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/mapped_file.h"
#include "models/random_model.h"
#include "runtime/engine_api.h"
#include "runtime/engine_parts.h"
#include "temp_files.h"

namespace brisk {
namespace {

std::vector<float> random_model_logits(const std::shared_ptr<Model>& model) {
  auto ctx = Context::create(model, {.n_ctx = 64, .n_seq_max = 1, .n_batch = 16, .n_threads = 2});
  std::vector<BatchToken> batch;
  for (int32_t i = 0; i < 6; ++i) batch.push_back({.token = (i * 11 + 3) % 512, .pos = i, .seq = 0, .want_logits = i == 5});
  ctx->decode(batch);
  return std::vector<float>(ctx->logits(0), ctx->logits(0) + ctx->n_vocab());
}

TEST(RandomModel, MemoryAndFileAreTheSameModel) {
  RandomModelParams p = random_model_preset("tiny");
  p.type = QuantType::Q8_0;
  p.n_vocab = 512;
  const std::string path = (testing::process_temp_dir() / "random_same.gguf").string();
  random_model_write(p, path);
  const auto mem = random_model_gguf(p);
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(file.size(), mem->size());
  EXPECT_EQ(std::memcmp(file.data(), mem->data(), file.size()), 0);
  EXPECT_EQ(random_model_logits(Model::load({.path = path})), random_model_logits(model_load_gguf_bytes(mem)));
}

TEST(RandomModel, DistinctRowsRepeat) {
  RandomModelParams p = random_model_preset("tiny");
  p.distinct_rows = 3;
  const auto bytes = random_model_gguf(p);
  const gguf::File f = gguf::File::parse(bytes);
  int n_matrices = 0;
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (t.ne.size() < 2) continue;
    ++n_matrices;
    const size_t rb = size_t(*quant_row_bytes(t.type, t.ne[0]));
    const auto* d = static_cast<const uint8_t*>(t.data);
    EXPECT_NE(std::memcmp(d, d + rb, rb), 0) << t.name << ": rows 0 and 1 are drawn apart";
    for (uint64_t r = 3; r < t.n_bytes / rb; ++r)
      ASSERT_EQ(std::memcmp(d + r * rb, d + (r % 3) * rb, rb), 0) << t.name << " row " << r;
  }
  EXPECT_GT(n_matrices, 10);
}

// A small model of the Qwen3-MoE layout: routers in F32, experts stacked 3-D, as GGUF files.
TEST(RandomModel, MixtureOfExpertsRuns) {
  RandomModelParams p = random_model_preset("qwen3-30b-a3b");
  p.n_vocab = 512;
  p.n_embd = 64;
  p.n_layer = 2;
  p.n_head = 4;
  p.n_head_kv = 2;
  p.head_dim = 16;
  p.n_ff = 96;
  p.n_expert = 8;
  p.n_expert_used = 2;
  p.n_ff_exp = 32;
  p.type = QuantType::Q8_0;
  const auto bytes = random_model_gguf(p);
  const gguf::File f = gguf::File::parse(bytes);
  ASSERT_NE(f.find_tensor("blk.1.ffn_gate_inp.weight"), nullptr);
  EXPECT_EQ(f.find_tensor("blk.1.ffn_gate_inp.weight")->type, QuantType::F32);
  ASSERT_NE(f.find_tensor("blk.0.ffn_down_exps.weight"), nullptr);
  EXPECT_EQ(f.find_tensor("blk.0.ffn_down_exps.weight")->ne, (std::vector<uint64_t>{32, 64, 8}));
  auto model = model_load_gguf_bytes(bytes);
  EXPECT_EQ(model->info().architecture, "qwen3moe");
  for (float v : random_model_logits(model)) ASSERT_TRUE(std::isfinite(v));
}

TEST(RandomModel, ShapeTableNamesItsShapes) {
  const std::vector<std::string> names = random_model_shapes();
  for (const char* n : {"tiny", "qwen2.5-0.5b", "llama-3.1-8b", "qwen3-8b", "qwen3-30b-a3b"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  try {
    random_model_preset("no-such-model");
    FAIL() << "an unknown shape was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("qwen3-30b-a3b"), std::string::npos) << e.what();
  }
}

// Whisper shapes: the published sizes, and the toy shape built in memory loads as a Whisper GGUF
// whose encoder fills the cross-attention state of two windows in one pass (encoder_windows 2)
// as one window at a time does, and whose decoder then gives finite logits.
TEST(RandomModel, WhisperShapesLoadAndRun) {
  const RandomModelParams turbo = random_model_preset("whisper-large-v3-turbo");
  EXPECT_EQ(turbo.arch, "whisper");
  EXPECT_EQ(turbo.n_embd, 1280);
  EXPECT_EQ(turbo.n_layer, 4);
  EXPECT_EQ(turbo.n_enc_layer, 32);
  EXPECT_EQ(turbo.n_mels, 128);
  EXPECT_EQ(random_model_preset("whisper-base").n_enc_layer, 6);
  RandomModelParams p = random_model_preset("whisper-toy");
  p.type = QuantType::F16;
  auto model = model_load_gguf_bytes(random_model_gguf(p));
  EXPECT_EQ(model->info().architecture, "whisper");
  std::vector<std::vector<float>> logits;
  for (int32_t windows : {1, 2}) {
    auto ctx = Context::create(model, {.n_ctx = 16, .n_seq_max = 2, .n_batch = 8, .n_threads = 2,
                                       .encoder_windows = windows});
    const EncoderShape es = ctx->encoder_shape();
    ASSERT_EQ(es.n_frames, 3000);
    ASSERT_EQ(es.n_features, 80);
    std::vector<float> f0(size_t(es.n_frames) * size_t(es.n_features)), f1(f0.size());
    for (size_t i = 0; i < f0.size(); ++i) {
      f0[i] = float(int(i % 23) - 11) / 11.0f;
      f1[i] = float(int(i % 17) - 8) / 8.0f;
    }
    ctx->encode({{.seq = 0, .features = f0.data()}, {.seq = 1, .features = f1.data()}});
    ctx->decode({{.token = 1, .pos = 0, .seq = 0, .want_logits = true}, {.token = 1, .pos = 0, .seq = 1, .want_logits = true}});
    for (int32_t s = 0; s < 2; ++s) logits.emplace_back(ctx->logits(s), ctx->logits(s) + ctx->n_vocab());
  }
  for (const auto& l : logits)
    for (float v : l) ASSERT_TRUE(std::isfinite(v));
  EXPECT_NE(logits[0], logits[1]) << "two windows, two cross-attention states";
  for (size_t i = 0; i < logits[0].size(); ++i) {
    ASSERT_NEAR(logits[2][i], logits[0][i], 1e-4f * (1.0f + std::fabs(logits[0][i]))) << "window 0 at " << i;
    ASSERT_NEAR(logits[3][i], logits[1][i], 1e-4f * (1.0f + std::fabs(logits[1][i]))) << "window 1 at " << i;
  }
}

}  // namespace
}  // namespace brisk
