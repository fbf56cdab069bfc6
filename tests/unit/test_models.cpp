// Llama-family models against the transformers float32 references in
// $BRISK_SHARED_DATA/models/ARCH/ref.json, from the HF folder and from llama.cpp's GGUF
// conversions; quantized variants against the float model with a check_logprobs_close-style
// rule; batching, chunking and sequence operations of the Context.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model_fixtures.h"
#include "model_harness.h"
#include "core/error.h"
#include "core/flags.h"
#include "formats/gguf.h"
#include "formats/json_file.h"
#include "models/random_model.h"
#include "runtime/engine_api.h"

namespace brisk::test {
namespace {

namespace fs = std::filesystem;

// The toy MoE fixture's continuation alternates between near-tied tokens, and a flipped expert
// choice makes its quantization error larger: a quarter of the steps must be clear there.
int32_t min_quant_steps(const std::string& arch) { return arch == "qwen3_moe" ? 8 : 16; }

class ModelRef : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelRef, HfFolderMatchesTransformers) {
  REQUIRE_MODEL(GetParam());
  check_exact(GetParam(), model_dir(GetParam()) + "/hf");
}

TEST_P(ModelRef, GgufF32MatchesTransformers) {
  REQUIRE_MODEL(GetParam());
  check_exact(GetParam(), model_dir(GetParam()) + "/model-f32.gguf");
}

TEST_P(ModelRef, GgufQ8_0FollowsReference) {
  REQUIRE_MODEL(GetParam());
  check_quantized(GetParam(), {.path = model_dir(GetParam()) + "/model-q8_0.gguf"}, min_quant_steps(GetParam()));
}

TEST_P(ModelRef, LoadTimeQ8_0FollowsReference) {
  REQUIRE_MODEL(GetParam());
  check_quantized(GetParam(), {.path = model_dir(GetParam()) + "/hf", .quant = "q8_0"}, min_quant_steps(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Models, ModelRef, ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gemma3", "qwen3_moe"),
                         [](const auto& info) { return info.param; });

// The project's own fixtures (tools/make_fixtures): rope scaling variants, tied/untied, GQA/MHA,
// a prompt longer than the sliding window.
class OwnFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(OwnFixture, MatchesTransformers) {
  const std::string dir = std::string(BRISK_FIXTURES) + "/models/" + GetParam();
  ASSERT_TRUE(fs::exists(dir + "/ref.json")) << dir;
  check_exact_ref(load_ref_file(dir + "/ref.json"), GetParam(), dir);
}

INSTANTIATE_TEST_SUITE_P(Models, OwnFixture,
                         ::testing::Values("llama_tied_gqa", "llama_linear", "llama_llama3", "llama_yarn",
                                           "mistral_window", "qwen2_untied", "qwen3_mha_tied"),
                         [](const auto& info) { return info.param; });

TEST(ModelContext, F16CacheStaysCloseToReference) {
  REQUIRE_MODEL("qwen3");
  const Ref ref = load_ref("qwen3");
  auto model = Model::load({.path = model_dir("qwen3") + "/model-f32.gguf"});
  auto ctx = make_ctx(model, QuantType::F16);
  ctx->decode(prompt_batch(ref.input_ids, 0, 0, true));
  float max_diff = 0.0f;
  for (int32_t i = 0; i < ctx->n_vocab(); ++i)
    max_diff = std::max(max_diff, std::fabs(ctx->logits(int32_t(ref.input_ids.size()) - 1)[i] - ref.last_logits[size_t(i)]));
  EXPECT_LT(max_diff, 5e-3f);
  for (size_t p = 0; p < ref.input_ids.size(); ++p) EXPECT_EQ(argmax(ctx->logits(int32_t(p)), ctx->n_vocab()), ref.argmax[p]);
}

TEST(ModelContext, Q8_0CacheKeepsTopTokens) {
  REQUIRE_MODEL("qwen3");  // head_dim 32: whole Q8_0 blocks per head
  const Ref ref = load_ref("qwen3");
  auto model = Model::load({.path = model_dir("qwen3") + "/hf"});
  auto ctx = make_ctx(model, QuantType::Q8_0);
  ctx->decode(prompt_batch(ref.input_ids, 0, 0, false));
  expect_top5_close(ctx->logits(0), ref.last_logits, "q8_0 KV cache");
  auto llama = Model::load({.path = model_dir("llama") + "/hf"});  // head_dim 16
  EXPECT_THROW(make_ctx(llama, QuantType::Q8_0), Error);
}

TEST(ModelContext, ChunkedPromptEqualsOneBatch) {
  REQUIRE_MODEL("llama");
  const Ref ref = load_ref("llama");
  auto model = Model::load({.path = model_dir("llama") + "/hf"});
  auto whole = make_ctx(model), chunked = make_ctx(model, QuantType::F32, 7);
  whole->decode(prompt_batch(ref.input_ids, 0, 0, false));
  chunked->decode(prompt_batch(ref.input_ids, 0, 0, false));
  for (int32_t i = 0; i < whole->n_vocab(); ++i) EXPECT_NEAR(whole->logits(0)[i], chunked->logits(0)[i], 1e-5f);
  EXPECT_EQ(chunked->seq_length(0), int32_t(ref.input_ids.size()));
}

TEST(ModelContext, TwoSequencesBatchedEqualEachAlone) {
  REQUIRE_MODEL("qwen2");
  const Ref ref = load_ref("qwen2");
  auto model = Model::load({.path = model_dir("qwen2") + "/model-f32.gguf"});
  const std::vector<int32_t> a(ref.input_ids.begin(), ref.input_ids.begin() + 30);
  const std::vector<int32_t> b(ref.input_ids.begin() + 20, ref.input_ids.end());
  auto ctx = make_ctx(model, QuantType::F32, 512, 2);
  // Interleave the two prompts in one batch; then one decode step for both.
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    if (i < a.size()) batch.push_back({.token = a[i], .pos = int32_t(i), .seq = 0, .want_logits = i + 1 == a.size()});
    if (i < b.size()) batch.push_back({.token = b[i], .pos = int32_t(i), .seq = 1, .want_logits = i + 1 == b.size()});
  }
  ctx->decode(batch);
  std::vector<float> la(ctx->logits(0), ctx->logits(0) + ctx->n_vocab());
  std::vector<float> lb(ctx->logits(1), ctx->logits(1) + ctx->n_vocab());
  ctx->decode({{.token = 5, .pos = int32_t(a.size()), .seq = 0, .want_logits = true},
               {.token = 7, .pos = int32_t(b.size()), .seq = 1, .want_logits = true}});
  for (int s = 0; s < 2; ++s) {
    const auto& ids = s == 0 ? a : b;
    auto alone = make_ctx(model);
    alone->decode(prompt_batch(ids, 0, 0, false));
    const auto& first = s == 0 ? la : lb;
    for (int32_t i = 0; i < alone->n_vocab(); ++i) ASSERT_NEAR(alone->logits(0)[i], first[size_t(i)], 1e-5f);
    alone->decode({{.token = s == 0 ? 5 : 7, .pos = int32_t(ids.size()), .seq = 0, .want_logits = true}});
    for (int32_t i = 0; i < alone->n_vocab(); ++i) ASSERT_NEAR(alone->logits(0)[i], ctx->logits(s)[i], 1e-5f);
  }
}

TEST(ModelContext, SequenceCopyTruncateAndValidation) {
  REQUIRE_MODEL("mistral");
  const Ref ref = load_ref("mistral");
  auto model = Model::load({.path = model_dir("mistral") + "/hf"});
  auto ctx = make_ctx(model, QuantType::F16, 512, 2);
  ctx->decode(prompt_batch(ref.input_ids, 0, 0, false));
  const int32_t n = int32_t(ref.input_ids.size());
  ctx->seq_copy(0, 1, n - 1);
  EXPECT_EQ(ctx->seq_length(1), n - 1);
  // Re-running the last prompt token on the copy reproduces the logits.
  std::vector<float> want(ctx->logits(0), ctx->logits(0) + ctx->n_vocab());
  ctx->decode({{.token = ref.input_ids.back(), .pos = n - 1, .seq = 1, .want_logits = true}});
  for (int32_t i = 0; i < ctx->n_vocab(); ++i) ASSERT_NEAR(ctx->logits(0)[i], want[size_t(i)], 1e-5f);
  ctx->seq_truncate(1, 10);
  EXPECT_EQ(ctx->seq_length(1), 10);
  // Bad input: errors, state unchanged.
  EXPECT_THROW(ctx->decode({{.token = 5000, .pos = 10, .seq = 1}}), Error);
  EXPECT_THROW(ctx->decode({{.token = 1, .pos = 12, .seq = 1}}), Error);
  EXPECT_THROW(ctx->decode({{.token = 1, .pos = 0, .seq = 2}}), Error);
  EXPECT_THROW(ctx->decode({{.token = -1, .pos = 10, .seq = 1}}), Error);
  EXPECT_EQ(ctx->seq_length(1), 10);
  EXPECT_EQ(ctx->seq_length(0), n);
  EXPECT_THROW(ctx->logits(1), Error);
}

TEST(ModelContext, KvCacheGrowthKeepsContents) {
  REQUIRE_MODEL("qwen2");
  const Ref ref = load_ref("qwen2");
  auto model = Model::load({.path = model_dir("qwen2") + "/hf"});
  std::vector<int32_t> ids;
  while (ids.size() < 300) ids.insert(ids.end(), ref.input_ids.begin(), ref.input_ids.end());
  ids.resize(300);
  auto one = Context::create(model, {.n_ctx = 1024, .n_batch = 512, .kv_type = QuantType::F32, .n_threads = 1});
  auto grown = Context::create(model, {.n_ctx = 1024, .n_batch = 512, .kv_type = QuantType::F32, .n_threads = 1});
  one->decode(prompt_batch(ids, 0, 0, false));
  // 250 positions fit the initial capacity (256); the next 50 force a grow-and-copy.
  grown->decode(prompt_batch(std::vector<int32_t>(ids.begin(), ids.begin() + 250), 0, 0, false));
  grown->decode(prompt_batch(std::vector<int32_t>(ids.begin() + 250, ids.end()), 0, 250, false));
  for (int32_t i = 0; i < one->n_vocab(); ++i) ASSERT_NEAR(one->logits(0)[i], grown->logits(0)[i], 1e-5f);
  // The context is capped at n_ctx.
  auto small = Context::create(model, {.n_ctx = 16, .n_batch = 8, .kv_type = QuantType::F32, .n_threads = 1});
  EXPECT_THROW(small->decode(prompt_batch(std::vector<int32_t>(ids.begin(), ids.begin() + 17), 0, 0, false)), Error);
  EXPECT_EQ(small->seq_length(0), 0);
}

// Prefix sharing: a sequence copied from another (whole KV blocks shared, a partial last block
// copied) and continued gives the logits of computing its whole prompt from scratch; so does a
// copy truncated into a shared block and continued (copy-on-write), and the source sequence,
// continued after both, is untouched by their writes. Blocks of 16 positions, F32, F16 and BF16.
TEST(ModelContext, SeqCopySharesBlocksAndMatchesRecompute) {
  REQUIRE_MODEL("qwen2");
  const Ref ref = load_ref("qwen2");
  auto model = Model::load({.path = model_dir("qwen2") + "/hf"});
  std::vector<int32_t> ids;
  while (ids.size() < 46) ids.insert(ids.end(), ref.input_ids.begin(), ref.input_ids.end());
  ids.resize(46);
  const auto part = [&](size_t a, size_t b) { return std::vector<int32_t>(ids.begin() + long(a), ids.begin() + long(b)); };
  for (const QuantType kv : {QuantType::F32, QuantType::F16, QuantType::BF16}) {
    const ContextOptions opt{.n_ctx = 256, .n_seq_max = 3, .n_batch = 64, .kv_type = kv, .n_threads = 2,
                             .kv_block_size = 16};
    // Reference: each prompt computed alone.
    auto fresh = Context::create(model, opt);
    fresh->decode(prompt_batch(part(0, 45), 0, 0, false));
    const std::vector<float> want45(fresh->logits(0), fresh->logits(0) + fresh->n_vocab());
    fresh->decode(prompt_batch(part(45, 46), 0, 45, false));
    const std::vector<float> want46(fresh->logits(0), fresh->logits(0) + fresh->n_vocab());

    auto ctx = Context::create(model, opt);
    ctx->decode(prompt_batch(part(0, 45), 0, 0, false));
    ctx->seq_copy(0, 1, 40);  // blocks 0, 1 shared; rows 32..39 copied
    EXPECT_EQ(ctx->seq_length(1), 40);
    ctx->decode(prompt_batch(part(40, 45), 1, 40, false));
    float err = 0.0f;
    for (int32_t i = 0; i < ctx->n_vocab(); ++i) err = std::max(err, std::fabs(ctx->logits(0)[i] - want45[size_t(i)]));
    EXPECT_LT(err, 1e-4f) << "copied prefix " << quant_type_info(kv).name;
    ctx->seq_copy(0, 2, 45);
    ctx->seq_truncate(2, 20);  // block 1 still shared with sequence 0: the next write copies it
    ctx->decode(prompt_batch(part(20, 45), 2, 20, false));
    err = 0.0f;
    for (int32_t i = 0; i < ctx->n_vocab(); ++i) err = std::max(err, std::fabs(ctx->logits(0)[i] - want45[size_t(i)]));
    EXPECT_LT(err, 1e-4f) << "copy-on-write " << quant_type_info(kv).name;
    ctx->decode(prompt_batch(part(45, 46), 0, 45, false));
    err = 0.0f;
    for (int32_t i = 0; i < ctx->n_vocab(); ++i) err = std::max(err, std::fabs(ctx->logits(0)[i] - want46[size_t(i)]));
    EXPECT_LT(err, 1e-4f) << "source after sharing " << quant_type_info(kv).name;
  }
}

TEST(ModelContext, ReferenceOpsKillSwitchGivesSameLogits) {
  REQUIRE_MODEL("qwen3");
  const Ref ref = load_ref("qwen3");
  // Float weights: with quantized activations, float-rounding differences between the kernels
  // and the references can flip an activation's Q8_0 rounding and show up as ~1e-3.
  auto model = Model::load({.path = model_dir("qwen3") + "/hf"});
  auto fast = make_ctx(model);
  fast->decode(prompt_batch(ref.input_ids, 0, 0, false));
  setenv("BRISK_REF_OPS", "1", 1);
  flags_reload();
  auto slow = make_ctx(model);
  unsetenv("BRISK_REF_OPS");
  flags_reload();
  slow->decode(prompt_batch(ref.input_ids, 0, 0, false));
  for (int32_t i = 0; i < fast->n_vocab(); ++i) ASSERT_NEAR(fast->logits(0)[i], slow->logits(0)[i], 1e-4f);
}

TEST(ModelLoad, LoadTimeQuantTypes) {
  REQUIRE_MODEL("qwen2");
  const Ref ref = load_ref("qwen2");
  for (const char* q : {"q4_0", "q4_k", "f16", "bf16"}) {
    auto model = Model::load({.path = model_dir("qwen2") + "/hf", .quant = q});
    EXPECT_LT(model->info().weight_bytes, Model::load({.path = model_dir("qwen2") + "/hf"})->info().weight_bytes) << q;
    auto ctx = make_ctx(model);
    ctx->decode(prompt_batch(ref.input_ids, 0, 0, false));
    float err = 0.0f;
    for (int32_t i = 0; i < ctx->n_vocab(); ++i) err = std::max(err, std::fabs(ctx->logits(0)[i] - ref.last_logits[size_t(i)]));
    const bool four_bit = q[0] == 'q';
    // What the bounds protect: the 4-bit formats round each weight of this random 64-wide model
    // to one of 16 levels (q4_k falls back to q4_0 on rows shorter than 256), which moves its
    // logits (largest |logit| 2.35) by 0.92 here; 1.5 still fails a wrong block layout, scale or
    // row order (off by the logits' whole size), and the reference's top token must stay in the
    // top 10 below. F16 measured 0.003, BF16 0.025 (8-bit mantissa): 0.05 covers both.
    EXPECT_LT(err, four_bit ? 1.5f : 0.05f) << q;
    const auto top = topk(ctx->logits(0), ctx->n_vocab(), four_bit ? 10 : 1);
    EXPECT_NE(std::find(top.begin(), top.end(), ref.top5[0]), top.end()) << q;
  }
}

TEST(ModelLoad, RandomGgufRunsWithoutSharedData) {
  const std::string path = ::testing::TempDir() + "/brisk_random_tiny.gguf";
  for (const char* arch : {"llama", "qwen2", "qwen3"}) {
    RandomModelParams p = random_model_preset("tiny");
    p.arch = arch;
    p.type = QuantType::Q8_0;
    p.tie_embeddings = std::string(arch) != "llama";
    random_model_write(p, path);
    auto model = Model::load({.path = path});
    EXPECT_EQ(model->info().architecture, arch);
    EXPECT_EQ(model->tokenizer(), nullptr);
    auto ctx = make_ctx(model, QuantType::F16, 4);
    ctx->decode(prompt_batch({1, 2, 3, 4, 5, 6, 7, 8, 9}, 0, 0, true));
    for (int32_t i = 0; i < 9; ++i)
      for (int32_t v = 0; v < ctx->n_vocab(); ++v) ASSERT_TRUE(std::isfinite(ctx->logits(i)[v]));
  }
  // Metadata that disagrees with the tensors is an error naming the tensor.
  {
    const gguf::File good = gguf::File::open(path);
    gguf::Writer w;
    for (const auto& [key, value] : good.metadata()) w.set(key, value);
    w.set("qwen3.embedding_length", gguf::Value::from_u32(128));
    for (const auto& t : good.tensors()) w.add_tensor(t.name, t.type, t.ne, t.data, t.n_bytes);
    const std::string bad = ::testing::TempDir() + "/brisk_random_bad.gguf";
    w.write(bad);
    try {
      Model::load({.path = bad});
      ADD_FAILURE() << "mismatched metadata accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("token_embd.weight"), std::string::npos) << e.what();
    }
    std::remove(bad.c_str());
  }
  std::remove(path.c_str());
}

TEST(ModelLoad, BadConfigValuesAreErrorsNamingTheKey) {
  REQUIRE_MODEL("llama");
  const nlohmann::json good = read_json_file(model_dir("llama") + "/hf/config.json");
  const fs::path dir = fs::path(::testing::TempDir()) / "brisk_bad_config";
  fs::create_directories(dir);
  fs::remove(dir / "model.safetensors");
  fs::create_symlink(model_dir("llama") + "/hf/model.safetensors", dir / "model.safetensors");
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {{{"num_attention_heads", "four"}}, "num_attention_heads"},
      {{{"rms_norm_eps", 1e300}}, "rms_norm_eps"},
      {{{"num_hidden_layers", 2.5}}, "num_hidden_layers"},
      {{{"hidden_act", "relu"}}, "hidden_act"},
      {{{"num_key_value_heads", 3}}, "KV heads"},
      {{{"hidden_size", 128}}, "token_embd.weight"},
      {{{"rope_parameters", {{"rope_type", "dynamic"}, {"rope_theta", 10000.0}}}}, "dynamic"},
  };
  for (const auto& [patch, needle] : cases) {
    nlohmann::json cfg = good;
    cfg.merge_patch(patch);
    std::ofstream(dir / "config.json") << cfg.dump();
    brisk::test::expect_load_error(dir.string(), needle, patch.dump());
  }
  fs::remove_all(dir);
}

TEST(ModelLoad, ErrorsNameThePath) {
  EXPECT_THROW(Model::load({.path = "/nonexistent/model.gguf"}), Error);
  REQUIRE_MODEL("llama");
  EXPECT_THROW(Model::load({.path = model_dir("llama") + "/model-f32.gguf", .quant = "q8_0"}), Error);
  EXPECT_THROW(Model::load({.path = model_dir("llama") + "/hf", .quant = "q3_k"}), Error);
}

}  // namespace
}  // namespace brisk::test
