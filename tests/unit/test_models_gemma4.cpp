// Gemma 4 (text) against the transformers float32 references of the shared wave-2 fixtures
// (per-layer embeddings with KV sharing and a window smaller than the prompt, K = V with
// global KV heads, an MoE block beside the MLP) and of the project's own fixtures
// (tests/fixtures/models/gemma4_*, when generated): from the HF folder (with KV blocks small
// enough that sliding layers release and reuse blocks), from brisk's own F32 GGUF conversion,
// quantized to Q8_0; the config in transformers' per_layer_config form and as the text_config of
// Gemma4ForConditionalGeneration; the windowed cache against the whole one; the memory plan.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/flags.h"
#include "formats/json_file.h"
#include "model_fixtures.h"
#include "model_harness.h"
#include "models/gemma_decoder.h"
#include "models/random_model.h"
#include "quantize/hf_to_gguf.h"
#include "quantize/quantize_gguf.h"
#include "runtime/engine_api.h"
#include "runtime/kv_cache.h"
#include "runtime/loaded_model.h"

namespace brisk {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kGemma4Cases = {"wave2/gemma4_text_ple_kvshare", "wave2/gemma4_text_keqv",
                                              "wave2/gemma4_text_moe"};

std::string g4_case_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param.substr(info.param.find('/') + 1);
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

fs::path g4_temp_dir(const std::string& tag) {
  const fs::path d = fs::path(::testing::TempDir()) / ("brisk_gemma4_" + tag);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

class Gemma4Ref : public ::testing::TestWithParam<std::string> {};

TEST_P(Gemma4Ref, HfFolderMatchesTransformers) {
  REQUIRE_MODEL(GetParam());
  brisk::test::check_exact(GetParam(), model_dir(GetParam()) + "/hf");
}

// Blocks of 16 positions: the sliding layers (window 6) release the blocks that fall out of
// their window while the 24 prompt and 32 generated tokens pass, and reuse them.
TEST_P(Gemma4Ref, WindowedCacheInSmallBlocksMatchesTransformers) {
  REQUIRE_MODEL(GetParam());
  brisk::test::check_exact_ref(brisk::test::load_ref(GetParam()), GetParam(), model_dir(GetParam()) + "/hf", 16);
}

TEST_P(Gemma4Ref, GgufF32ConversionMatchesTransformers) {
  REQUIRE_MODEL(GetParam());
  const fs::path dir = g4_temp_dir(g4_case_name({GetParam(), 0}) + "_f32");
  const std::string path = (dir / "model-f32.gguf").string();
  hf_to_gguf_f32(model_dir(GetParam()) + "/hf", path);
  brisk::test::check_exact(GetParam(), path);
  fs::remove_all(dir);
}

// Q8_0 (at load and through brisk's own conversion): the top-5 of the last prompt position
// contains the reference's; along the greedy continuation, every step whose float margin is
// above twice the Q8_0 logit error picks the reference token. The logits of these fixtures span
// about 4 and Q8_0 moves them by 0.1-0.3 (attention scale 1 over normalized q / k makes the
// softmax sharp; the MoE router's scales are N(0, 0.1²), near ties): at least 3 of the 32 steps
// are clear.
TEST_P(Gemma4Ref, Q8_0FollowsReference) {
  REQUIRE_MODEL(GetParam());
  brisk::test::check_quantized(GetParam(), {.path = model_dir(GetParam()) + "/hf", .quant = "q8_0"}, 3);
  const fs::path dir = g4_temp_dir(g4_case_name({GetParam(), 0}) + "_q8");
  const std::string path = (dir / "model-q8_0.gguf").string();
  quantize_gguf({.in = model_dir(GetParam()) + "/hf", .out = path, .recipe = *quant_recipe_from_name("Q8_0")});
  brisk::test::check_quantized(GetParam(), {.path = path}, 3);
  fs::remove_all(dir);
}

// The whole cache (BRISK_NO_KV_WINDOW) and the windowed one give the same logits at every
// position of a prompt many windows long, fed in chunks.
TEST_P(Gemma4Ref, WindowedCacheEqualsWholeCache) {
  REQUIRE_MODEL(GetParam());
  const brisk::test::Ref ref = brisk::test::load_ref(GetParam());
  auto model = Model::load({.path = model_dir(GetParam()) + "/hf"});
  std::vector<int32_t> ids;
  while (ids.size() < 100) ids.insert(ids.end(), ref.input_ids.begin(), ref.input_ids.end());
  ids.resize(100);
  const ContextOptions opt{.n_ctx = 256, .n_batch = 7, .kv_type = QuantType::F32, .n_threads = 2, .kv_block_size = 16};
  const std::vector<float> windowed = brisk::test::all_logits(model, ids, opt),
                           whole = brisk::test::all_logits(model, ids, opt, "BRISK_NO_KV_WINDOW");
  ASSERT_EQ(windowed.size(), whole.size());
  for (size_t i = 0; i < windowed.size(); ++i) ASSERT_NEAR(windowed[i], whole[i], 1e-5f) << i;
}

INSTANTIATE_TEST_SUITE_P(Models, Gemma4Ref, ::testing::ValuesIn(kGemma4Cases), g4_case_name);

// Sequence operations on a windowed cache (window 6, blocks of 16): a copy or truncation whose
// window is still held keeps its length and continues exactly; one that reaches released blocks
// keeps nothing, and computing the prefix again gives the same logits; two sequences batched
// together equal each alone.
TEST(Gemma4Windowed, SequenceOpsKeepOrRecompute) {
  const char* fixture = "wave2/gemma4_text_ple_kvshare";
  REQUIRE_MODEL(fixture);
  const brisk::test::Ref ref = brisk::test::load_ref(fixture);
  auto model = Model::load({.path = model_dir(fixture) + "/hf"});
  std::vector<int32_t> ids;
  while (ids.size() < 64) ids.insert(ids.end(), ref.input_ids.begin(), ref.input_ids.end());
  ids.resize(64);
  const auto part = [&](size_t a, size_t b) { return std::vector<int32_t>(ids.begin() + long(a), ids.begin() + long(b)); };
  // Chunks of 8: the blocks a chunk no longer attends to are released before it runs.
  const ContextOptions opt{.n_ctx = 128, .n_seq_max = 2, .n_batch = 8, .kv_type = QuantType::F32, .n_threads = 2,
                           .kv_block_size = 16};
  auto want = [&](size_t n) {  // logits after ids[0, n) computed alone
    auto fresh = Context::create(model, opt);
    fresh->decode(brisk::test::prompt_batch(part(0, n), 0, 0, false));
    return std::vector<float>(fresh->logits(0), fresh->logits(0) + fresh->n_vocab());
  };
  auto expect_logits = [&](const Context& ctx, const std::vector<float>& w, const char* what) {
    float err = 0.0f;
    for (int32_t i = 0; i < ctx.n_vocab(); ++i) err = std::max(err, std::fabs(ctx.logits(0)[i] - w[size_t(i)]));
    EXPECT_LT(err, 1e-4f) << what;
  };
  const std::vector<float> want60 = want(60), want64 = want(64), want30 = want(30);
  auto ctx = Context::create(model, opt);
  ctx->decode(brisk::test::prompt_batch(part(0, 60), 0, 0, false));
  expect_logits(*ctx, want60, "prompt of 60");
  ctx->seq_copy(0, 1, 58);  // window 53..57 held (block 3, positions 48..63)
  EXPECT_EQ(ctx->seq_length(1), 58);
  ctx->decode(brisk::test::prompt_batch(part(58, 60), 1, 58, false));
  expect_logits(*ctx, want60, "copy within the window, continued");
  ctx->seq_copy(0, 1, 20);  // window 15..19 released: nothing kept
  EXPECT_EQ(ctx->seq_length(1), 0);
  ctx->decode(brisk::test::prompt_batch(part(0, 30), 1, 0, false));
  expect_logits(*ctx, want30, "copy into released blocks, computed again");
  ctx->seq_truncate(0, 10);
  EXPECT_EQ(ctx->seq_length(0), 0);
  ctx->decode(brisk::test::prompt_batch(part(0, 60), 0, 0, false));
  // Both sequences in one batch: 60..63 of sequence 0 and 30..63 of sequence 1.
  std::vector<BatchToken> batch;
  for (int32_t p = 30; p < 64; ++p) {
    if (p >= 60) batch.push_back({.token = ids[size_t(p)], .pos = p, .seq = 0, .want_logits = p == 63});
    batch.push_back({.token = ids[size_t(p)], .pos = p, .seq = 1, .want_logits = p == 63});
  }
  ctx->decode(batch);
  for (int r = 0; r < 2; ++r) {
    float err = 0.0f;
    for (int32_t i = 0; i < ctx->n_vocab(); ++i) err = std::max(err, std::fabs(ctx->logits(r)[i] - want64[size_t(i)]));
    EXPECT_LT(err, 1e-4f) << "batched sequence " << r;
  }
}

// The project's own Gemma 4 fixtures (tools/make_fixtures/make_fixtures.py --only gemma4_*): other
// seeds and shapes, a window smaller than a 40-token prompt, several KV-shared layers of both
// kinds. They need transformers to generate; the test skips while they are absent.
class Gemma4OwnFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(Gemma4OwnFixture, MatchesTransformers) {
  const std::string dir = std::string(BRISK_FIXTURES) + "/models/" + GetParam();
  if (!fs::exists(dir + "/ref.json")) GTEST_SKIP() << dir << " is not generated yet (tools/make_fixtures)";
  const brisk::test::Ref ref = brisk::test::load_ref_file(dir + "/ref.json");
  brisk::test::check_exact_ref(ref, GetParam(), dir);
  brisk::test::check_exact_ref(ref, GetParam(), dir, 16);
  const fs::path tmp = g4_temp_dir(GetParam() + "_own_f32");
  hf_to_gguf_f32(dir, (tmp / "model-f32.gguf").string());
  brisk::test::check_exact_ref(ref, GetParam(), (tmp / "model-f32.gguf").string(), 16);
  fs::remove_all(tmp);
}

INSTANTIATE_TEST_SUITE_P(Models, Gemma4OwnFixture,
                         ::testing::Values("gemma4_window_kvshare", "gemma4_keqv_moe", "gemma4_ple_moe_wide"),
                         [](const auto& info) { return info.param; });

// A folder with a fixture's weights (renamed through `rename` when given) and config.json.
fs::path g4_folder(const std::string& fixture, const nlohmann::json& cfg, const std::string& tag,
                     const std::string& prefix_from = "", const std::string& prefix_to = "") {
  const fs::path dir = g4_temp_dir(tag);
  const std::string src = model_dir(fixture) + "/hf/model.safetensors";
  if (prefix_from.empty()) {
    fs::create_symlink(src, dir / "model.safetensors");
  } else {  // same data, tensor names with another prefix in the header
    std::ifstream in(src, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
    nlohmann::json renamed = nlohmann::json::object();
    for (const auto& [name, info] : header.items())
      renamed[name.rfind(prefix_from, 0) == 0 ? prefix_to + name.substr(prefix_from.size()) : name] = info;
    const uint64_t data_len = bytes.size() - 8 - n;  // another tower's tensor after the data: dropped
    renamed["model.vision_tower.encoder.ignored"] = {
        {"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {data_len, data_len + 4}}};
    std::string h = renamed.dump();
    h.resize((h.size() + 7) / 8 * 8, ' ');
    const uint64_t hn = h.size();
    std::ofstream out(dir / "model.safetensors", std::ios::binary);
    out.write(reinterpret_cast<const char*>(&hn), 8);
    out << h << bytes.substr(8 + n) << std::string(4, '\0');
  }
  std::ofstream(dir / "config.json") << cfg.dump(2);
  return dir;
}

std::vector<float> g4_last_logits(const fs::path& dir, const std::vector<int32_t>& ids) {
  auto ctx = Context::create(Model::load({.path = dir.string()}),
                             {.n_ctx = 64, .n_batch = 64, .kv_type = QuantType::F32, .n_threads = 2});
  ctx->decode(brisk::test::prompt_batch(ids, 0, 0, false));
  return std::vector<float>(ctx->logits(0), ctx->logits(0) + ctx->n_vocab());
}

float g4_max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = a.size() == b.size() ? 0.0f : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// transformers writes its own configs with a per_layer_config map instead of global_head_dim /
// num_global_key_value_heads; both forms give the reference logits.
TEST(Gemma4Config, PerLayerConfigFormMatchesPublishedForm) {
  for (const char* fixture : {"wave2/gemma4_text_ple_kvshare", "wave2/gemma4_text_keqv"}) {
    REQUIRE_MODEL(fixture);
    nlohmann::json cfg = read_json_file(model_dir(fixture) + "/hf/config.json");
    nlohmann::json per_layer = nlohmann::json::object();
    for (size_t il = 0; il < cfg["layer_types"].size(); ++il) {
      if (cfg["layer_types"][il] != "full_attention") continue;
      nlohmann::json o = {{"head_dim", cfg["global_head_dim"]}};
      if (cfg["attention_k_eq_v"].get<bool>()) o["num_key_value_heads"] = cfg["num_global_key_value_heads"];
      per_layer[std::to_string(il)] = o;
    }
    cfg.erase("global_head_dim");
    cfg.erase("num_global_key_value_heads");
    cfg["per_layer_config"] = per_layer;
    const brisk::test::Ref ref = brisk::test::load_ref(fixture);
    const fs::path dir = g4_folder(fixture, cfg, "per_layer_config");
    EXPECT_LT(g4_max_diff(g4_last_logits(dir, ref.input_ids), ref.last_logits), 1e-4f) << fixture;
    fs::remove_all(dir);
  }
}

// Gemma4ForConditionalGeneration: the text model's settings in text_config, its weights under
// model.language_model.*, other towers ignored.
TEST(Gemma4Config, ConditionalGenerationTextPartMatches) {
  const char* fixture = "wave2/gemma4_text_ple_kvshare";
  REQUIRE_MODEL(fixture);
  const nlohmann::json text = read_json_file(model_dir(fixture) + "/hf/config.json");
  const nlohmann::json cfg = {{"architectures", {"Gemma4ForConditionalGeneration"}},
                              {"model_type", "gemma4"},
                              {"tie_word_embeddings", true},
                              {"text_config", text},
                              {"vision_config", {{"hidden_size", 8}}}};
  const fs::path dir = g4_folder(fixture, cfg, "conditional", "model.", "model.language_model.");
  const brisk::test::Ref ref = brisk::test::load_ref(fixture);
  EXPECT_LT(g4_max_diff(g4_last_logits(dir, ref.input_ids), ref.last_logits), 1e-4f);
  fs::remove_all(dir);
}

TEST(Gemma4Config, BadSettingsAreErrorsNamingThem) {
  const char* fixture = "wave2/gemma4_text_ple_kvshare";
  REQUIRE_MODEL(fixture);
  const nlohmann::json good = read_json_file(model_dir(fixture) + "/hf/config.json");
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {{{"num_kv_shared_layers", 5}}, "num_kv_shared_layers"},
      {{{"num_kv_shared_layers", 4}}, "shares the KV cache"},  // layer 1 (full) has no earlier full layer
      {{{"per_layer_config", {{"9", {{"head_dim", 32}}}}}}, "per_layer_config.9"},
      {{{"per_layer_config", {{"1", {{"sliding_window", 32}}}}}}, "per_layer_config.1.sliding_window"},
      {{{"global_head_dim", 64}}, "attn_q.weight"},
      {{{"hidden_size_per_layer_input", 16}}, "per_layer_token_embd.weight"},
      {{{"use_bidirectional_attention", "all"}}, "use_bidirectional_attention"},
      {{{"attention_k_eq_v", true}, {"num_global_key_value_heads", 3}}, "KV heads"},
  };
  for (const auto& [patch, needle] : cases) {
    nlohmann::json cfg = good;
    cfg.merge_patch(patch);
    const fs::path dir = g4_folder(fixture, cfg, "bad");
    brisk::test::expect_load_error(dir.string(), needle, patch.dump());
    fs::remove_all(dir);
  }
}

// A 128k context: the full-attention layers' caches hold every position, the sliding ones a
// window (plus one batch of positions), and KV-shared layers none.
TEST(Gemma4Memory, PlanCountsFullLayersAndOneWindowPerSlidingLayer) {
  const char* fixture = "wave2/gemma4_text_ple_kvshare";
  REQUIRE_MODEL(fixture);
  auto model = std::dynamic_pointer_cast<const LoadedModel>(Model::load({.path = model_dir(fixture) + "/hf"}));
  ASSERT_TRUE(model);
  const ModelConfig& c = model->config();
  const std::vector<LayerKvNeeds> needs = model->arch_->kv_layers(c);
  ASSERT_EQ(needs.size(), 5u);
  KvCacheOptions opt{.n_seq = 1, .n_ctx = 131072, .type = QuantType::F16, .block_size = 256, .max_step = 512};
  int64_t full_widths = 0, sliding_widths = 0;
  for (const LayerKvNeeds& n : needs) {
    opt.layers.push_back({.width = n.n_head_kv * n.head_dim, .window = n.window, .source = n.source});
    if (n.source >= 0) continue;
    (n.window > 0 ? sliding_widths : full_widths) += n.n_head_kv * n.head_dim;
  }
  EXPECT_EQ(needs[2].source, 0);  // the last three layers read the last earlier layer of their kind
  EXPECT_EQ(needs[3].source, 0);
  EXPECT_EQ(needs[4].source, 1);
  EXPECT_EQ(needs[1].source, -1);
  EXPECT_EQ(needs[1].window, 0);
  EXPECT_EQ(needs[0].window, c.sliding_window);
  const int64_t window_blocks = (c.sliding_window + 512 - 2) / 256 + 2;
  const uint64_t tables = 2 * 4 * 512;  // two groups' block tables, 512 blocks each
  const uint64_t want = uint64_t(2 * 2 * (131072 * full_widths + window_blocks * 256 * sliding_widths)) + tables;
  EXPECT_EQ(KvCache::plan_bytes(opt), want);
  KvCacheOptions whole = opt;
  for (KvLayerSpec& l : whole.layers) l.window = 0;
  EXPECT_EQ(KvCache::plan_bytes(whole), uint64_t(2 * 2 * 131072 * (full_widths + sliding_widths)) + 2048);
  EXPECT_NE(KvCache::plan_summary(opt).find("window"), std::string::npos) << KvCache::plan_summary(opt);
}

// The published Gemma 4 E2B config at 128k positions: 3 full layers of its first 15 hold every
// position, 12 sliding layers a 512-position window, the last 20 layers nothing of their own:
// about a third of the cache that keeps every position in every layer that owns one.
TEST(Gemma4Memory, PlanOfThePublishedE2BConfig) {
  nlohmann::json j = {{"model_type", "gemma4_text"}, {"hidden_size", 1536}, {"intermediate_size", 6144},
                      {"num_hidden_layers", 35}, {"num_attention_heads", 8}, {"num_key_value_heads", 1},
                      {"head_dim", 256}, {"global_head_dim", 512}, {"num_global_key_value_heads", nullptr},
                      {"attention_k_eq_v", false}, {"sliding_window", 512}, {"vocab_size", 262144},
                      {"hidden_size_per_layer_input", 256}, {"num_kv_shared_layers", 20},
                      {"use_double_wide_mlp", true}, {"max_position_embeddings", 131072}};
  nlohmann::json types = nlohmann::json::array();
  for (int il = 0; il < 35; ++il) types.push_back((il + 1) % 5 == 0 ? "full_attention" : "sliding_attention");
  j["layer_types"] = types;
  ModelConfig c;
  config_fill_from_hf(c, j);
  arch_gemma4().sanitize(c);
  c.finalize();
  KvCacheOptions opt{.n_seq = 1, .n_ctx = 131072, .type = QuantType::F16, .block_size = 256, .max_step = 512};
  int n_full = 0, n_sliding = 0, n_shared = 0;
  for (const LayerKvNeeds& n : gemma_kv_layers(c)) {
    opt.layers.push_back({.width = n.n_head_kv * n.head_dim, .window = n.window, .source = n.source});
    (n.source >= 0 ? n_shared : n.window > 0 ? n_sliding : n_full) += 1;
  }
  EXPECT_EQ(n_full, 3);
  EXPECT_EQ(n_sliding, 12);
  EXPECT_EQ(n_shared, 20);
  EXPECT_EQ(c.n_ff_of(34), 2 * 6144);
  const uint64_t full = 3ull * 131072 * 512 * 2 * 2, window = 12ull * 5 * 256 * 256 * 2 * 2;
  EXPECT_EQ(KvCache::plan_bytes(opt), full + window + 2 * 512 * 4);
  KvCacheOptions whole = opt;
  for (KvLayerSpec& l : whole.layers) l.window = 0;
  EXPECT_LT(KvCache::plan_bytes(opt) * 2, KvCache::plan_bytes(whole));
}

// Every Gemma 4 feature at toy size (make-random-model's gemma4-tiny: K = V full layers with their
// own head size, KV sharing of both kinds, double-wide MLPs, per-layer embeddings, an MoE block
// with per-expert scales, output scales) from a GGUF with llama.cpp's names: the CPU kernels
// agree with the scalar references (BRISK_REF_OPS) over a prompt longer than the window.
TEST(Gemma4Random, AllFeaturesMatchReferenceOps) {
  const std::string path = ::testing::TempDir() + "/brisk_gemma4_tiny.gguf";
  RandomModelParams p = random_model_preset("gemma4-tiny");
  random_model_write(p, path);
  auto model = Model::load({.path = path});
  EXPECT_EQ(model->info().architecture, "gemma4");
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < 40; ++i) ids.push_back((i * 37 + 11) % p.n_vocab);
  const ContextOptions opt{.n_ctx = 64, .n_batch = 16, .kv_type = QuantType::F32, .n_threads = 2, .kv_block_size = 16};
  const std::vector<float> fast = brisk::test::all_logits(model, ids, opt),
                           slow = brisk::test::all_logits(model, ids, opt, "BRISK_REF_OPS");
  float peak = 0.0f;
  for (size_t i = 0; i < fast.size(); ++i) {
    ASSERT_TRUE(std::isfinite(fast[i])) << i;
    ASSERT_NEAR(fast[i], slow[i], 1e-3f) << i;
    peak = std::max(peak, std::fabs(fast[i]));
  }
  EXPECT_GT(peak, 0.1f);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace brisk
