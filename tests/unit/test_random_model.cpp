// Random-weight models of the shape table (models/random_model.h), as `brisk make-random-model`
// writes them and as `brisk cuda-bench` builds them in memory: the same bytes either way, the
// same logits through Model::load and model_load_gguf_bytes, repeated rows when asked, and
// mixture-of-experts shapes that load and run.
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

}  // namespace
}  // namespace brisk
