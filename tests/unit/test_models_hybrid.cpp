// Hybrid linear-attention models (Qwen3.5 dense and MoE, Qwen3-Next) against their transformers
// float32 references: the shared fixtures (../shared/data/models/qwen3_5*, wave2/*) and the
// project's own (tests/fixtures/models/hybrid_*, made by tools/make_fixtures; skipped while
// absent), from the HF folder, from brisk's own F32 GGUF conversion and quantized to Q8_0; then
// what the recurrent state must keep: the same logits whatever the step sizes, interleaved
// sequences equal to each alone, a second turn from a snapshot equal to a cold run, and the
// errors for truncations the state cannot do and for configs that do not add up.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <tuple>

#include "model_harness.h"
#include "core/error.h"
#include "formats/gguf.h"
#include "models/hybrid_decoder.h"
#include "models/random_model.h"
#include "quantize/hf_to_gguf.h"
#include "quantize/quantize_gguf.h"
#include "runtime/chat_session.h"

namespace brisk::test {
namespace {

namespace fs = std::filesystem;

const char* const kShared[] = {"qwen3_5", "qwen3_5_moe", "wave2/qwen3_5_long", "wave2/qwen3_5_moe",
                               "wave2/qwen3_next"};
const char* const kOwn[] = {"qwen3_5_grouped_heads", "qwen3_5_moe_text_config_mtp", "qwen3_next_mlp_only"};

bool is_own(const std::string& name) {
  for (const char* own : kOwn)
    if (name == own) return true;
  return false;
}

// Shared fixtures: models/NAME/{hf/, ref.json}; the project's own: tests/fixtures/models/NAME/
// with the checkpoint and ref.json side by side.
std::string fixture_dir(const std::string& name) {
  return is_own(name) ? std::string(BRISK_FIXTURES) + "/models/" + name : model_dir(name);
}
std::string hf_dir(const std::string& name) { return is_own(name) ? fixture_dir(name) : fixture_dir(name) + "/hf"; }

#define REQUIRE_FIXTURE(name)                                                                \
  if (!fs::exists(fixture_dir(name) + "/ref.json"))                                          \
  GTEST_SKIP() << "model fixture " << fixture_dir(name) << " is missing (own fixtures: "     \
               << "tools/make_fixtures/make_fixtures.py --hybrid, on a machine with transformers)"

std::string test_name(const std::string& name) {
  std::string s = name;
  for (char& c : s)
    if (c == '/') c = '_';
  return s;
}

// brisk's own F32 GGUF conversion of a fixture, once per test run.
std::string converted_gguf(const std::string& name) {
  const std::string path = ::testing::TempDir() + "/brisk_hybrid_" + test_name(name) + "-f32.gguf";
  if (!fs::exists(path)) hf_to_gguf_f32(hf_dir(name), path);
  return path;
}

class HybridRef : public ::testing::TestWithParam<std::string> {};

TEST_P(HybridRef, HfFolderMatchesTransformers) {
  REQUIRE_FIXTURE(GetParam());
  check_exact_ref(load_ref_file(fixture_dir(GetParam()) + "/ref.json"), GetParam(), hf_dir(GetParam()));
}

TEST_P(HybridRef, OwnGgufF32MatchesTransformers) {
  REQUIRE_FIXTURE(GetParam());
  check_exact_ref(load_ref_file(fixture_dir(GetParam()) + "/ref.json"), GetParam(), converted_gguf(GetParam()));
}

// The toy hybrids' logits spread little (hidden 64, weights N(0, 0.08^2)): in some of them only
// about one continuation step in six is clear of Q8_0's logit error, so 4 of 32 must be.
TEST_P(HybridRef, LoadTimeQ8_0FollowsReference) {
  REQUIRE_FIXTURE(GetParam());
  check_quantized_ref(load_ref_file(fixture_dir(GetParam()) + "/ref.json"), GetParam(), hf_dir(GetParam()),
                      {.path = hf_dir(GetParam()), .quant = "q8_0"}, 4);
}

TEST_P(HybridRef, OwnGgufQ8_0FollowsReference) {
  REQUIRE_FIXTURE(GetParam());
  const std::string q8 = ::testing::TempDir() + "/brisk_hybrid_" + test_name(GetParam()) + "-q8_0.gguf";
  quantize_gguf({.in = converted_gguf(GetParam()), .out = q8, .recipe = *quant_recipe_from_name("Q8_0")});
  check_quantized_ref(load_ref_file(fixture_dir(GetParam()) + "/ref.json"), GetParam(), hf_dir(GetParam()), {.path = q8},
                      4);
  fs::remove(q8);
}

std::vector<std::string> all_fixtures() {
  std::vector<std::string> v(std::begin(kShared), std::end(kShared));
  v.insert(v.end(), std::begin(kOwn), std::end(kOwn));
  return v;
}

INSTANTIATE_TEST_SUITE_P(Models, HybridRef, ::testing::ValuesIn(all_fixtures()),
                         [](const auto& info) { return test_name(info.param); });

// Last-position logits of ids fed to sequence seq of ctx in steps of `step` tokens.
std::vector<float> feed(Context& ctx, const std::vector<int32_t>& ids, int32_t seq, int32_t start, size_t step) {
  for (size_t i = 0; i < ids.size(); i += step) {
    const size_t n = std::min(step, ids.size() - i);
    std::vector<BatchToken> b;
    for (size_t j = 0; j < n; ++j)
      b.push_back({.token = ids[i + j], .pos = start + int32_t(i + j), .seq = seq, .want_logits = i + j + 1 == ids.size()});
    ctx.decode(b);
  }
  return std::vector<float>(ctx.logits(0), ctx.logits(0) + ctx.n_vocab());
}

float hybrid_max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

// A prompt longer than one delta-rule chunk (64): the reference prompt and its continuation,
// repeated.
std::vector<int32_t> long_prompt(const Ref& ref, size_t n) {
  std::vector<int32_t> all = ref.input_ids;
  all.insert(all.end(), ref.greedy.begin(), ref.greedy.end());
  std::vector<int32_t> ids;
  while (ids.size() < n) ids.insert(ids.end(), all.begin(), all.end());
  ids.resize(n);
  return ids;
}

class HybridState : public ::testing::TestWithParam<std::string> {};

// One forward, forwards of 7 tokens and one token at a time: the same last logits.
TEST_P(HybridState, StepSizesGiveSameLogits) {
  REQUIRE_FIXTURE(GetParam());
  const Ref ref = load_ref_file(fixture_dir(GetParam()) + "/ref.json");
  auto model = Model::load({.path = hf_dir(GetParam())});
  const std::vector<int32_t> ids = long_prompt(ref, 150);
  std::vector<std::vector<float>> got;
  for (size_t step : {ids.size(), size_t(7), size_t(1)}) {
    auto ctx = make_ctx(model);
    got.push_back(feed(*ctx, ids, 0, 0, step));
  }
  EXPECT_LT(hybrid_max_diff(got[1], got[0]), 1e-5f) << "chunks of 7";
  EXPECT_LT(hybrid_max_diff(got[2], got[0]), 1e-5f) << "token by token";
}

// Two sequences whose tokens interleave in each batch (prefill, then a decode step for both)
// give the logits of each alone.
TEST_P(HybridState, InterleavedSequencesEqualEachAlone) {
  REQUIRE_FIXTURE(GetParam());
  const Ref ref = load_ref_file(fixture_dir(GetParam()) + "/ref.json");
  auto model = Model::load({.path = hf_dir(GetParam())});
  const std::vector<int32_t> a = long_prompt(ref, 70);  // ends first: logits(0)
  const std::vector<int32_t> long_b = long_prompt(ref, 90);
  const std::vector<int32_t> b(long_b.rbegin(), long_b.rend());
  auto ctx = make_ctx(model, QuantType::F32, 512, 2);
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    if (i < a.size()) batch.push_back({.token = a[i], .pos = int32_t(i), .seq = 0, .want_logits = i + 1 == a.size()});
    if (i < b.size()) batch.push_back({.token = b[i], .pos = int32_t(i), .seq = 1, .want_logits = i + 1 == b.size()});
  }
  ctx->decode(batch);
  const std::vector<float> la(ctx->logits(0), ctx->logits(0) + ctx->n_vocab());
  const std::vector<float> lb(ctx->logits(1), ctx->logits(1) + ctx->n_vocab());
  ctx->decode({{.token = 5, .pos = int32_t(a.size()), .seq = 0, .want_logits = true},
               {.token = 7, .pos = int32_t(b.size()), .seq = 1, .want_logits = true}});
  for (int s = 0; s < 2; ++s) {
    const auto& ids = s == 0 ? a : b;
    auto alone = make_ctx(model);
    EXPECT_LT(hybrid_max_diff(feed(*alone, ids, 0, 0, ids.size()), s == 0 ? la : lb), 1e-5f) << "sequence " << s;
    const std::vector<float> next = feed(*alone, {s == 0 ? 5 : 7}, 0, int32_t(ids.size()), 1);
    EXPECT_LT(hybrid_max_diff(next, std::vector<float>(ctx->logits(s), ctx->logits(s) + ctx->n_vocab())), 1e-5f)
        << "sequence " << s << " decode step";
  }
}

// A conversation's second turn: the sequence is cut back to a snapshot (the history diverges
// after it, as when a template drops reasoning), copied to another sequence, and continued; the
// logits equal a cold run of the whole second-turn prompt. A cut where no snapshot is throws and
// leaves the sequence as it was.
TEST_P(HybridState, SecondTurnFromSnapshotEqualsColdRun) {
  REQUIRE_FIXTURE(GetParam());
  const Ref ref = load_ref_file(fixture_dir(GetParam()) + "/ref.json");
  auto model = Model::load({.path = hf_dir(GetParam())});
  const std::vector<int32_t> turn1 = long_prompt(ref, 100);  // prompt 1 and its answer
  auto ctx = Context::create(model, {.n_ctx = 256, .n_seq_max = 2, .n_batch = 512, .kv_type = QuantType::F32,
                                     .n_threads = 2, .state_snapshot_interval = 16, .state_snapshots = 4});
  feed(*ctx, std::vector<int32_t>(turn1.begin(), turn1.begin() + 70), 0, 0, 70);  // prefill
  for (size_t i = 70; i < turn1.size(); ++i) feed(*ctx, {turn1[i]}, 0, int32_t(i), 1);  // decode
  EXPECT_GT(ctx->state_snapshots(), 0);
  // The second turn keeps the first 66 tokens; the state is known at 64 (a snapshot).
  const int32_t keep = ctx->seq_restorable(0, 66);
  EXPECT_EQ(keep, 64);
  EXPECT_EQ(ctx->seq_restorable(0, 100), 100);
  EXPECT_THROW(ctx->seq_truncate(0, 66), Error);
  EXPECT_THROW(ctx->seq_copy(0, 1, 66), Error);
  EXPECT_EQ(ctx->seq_length(0), 100);
  std::vector<int32_t> turn2(turn1.begin(), turn1.begin() + 66);
  for (int32_t t : {11, 12, 13, 14, 15, 16, 17, 18, 19, 20}) turn2.push_back(t);
  const std::vector<int32_t> rest(turn2.begin() + keep, turn2.end());
  ctx->seq_copy(0, 1, keep);
  const std::vector<float> copied = feed(*ctx, rest, 1, keep, rest.size());
  ctx->seq_truncate(0, keep);
  const std::vector<float> restored = feed(*ctx, rest, 0, keep, rest.size());
  auto cold = make_ctx(model);
  const std::vector<float> want = feed(*cold, turn2, 0, 0, turn2.size());
  EXPECT_LT(hybrid_max_diff(restored, want), 1e-5f);
  EXPECT_LT(hybrid_max_diff(copied, want), 1e-5f);
}

INSTANTIATE_TEST_SUITE_P(Models, HybridState, ::testing::Values("qwen3_5", "wave2/qwen3_5_moe", "wave2/qwen3_next"),
                         [](const auto& info) { return test_name(info.param); });

// A folder with a fixture's weights and a patched config.json.
fs::path patched_copy(const std::string& name, const nlohmann::json& patch, const std::string& tag) {
  nlohmann::json cfg = read_json_file(hf_dir(name) + "/config.json");
  cfg.merge_patch(patch);
  const fs::path dir = fs::path(::testing::TempDir()) / ("brisk_hybrid_" + test_name(name) + "_" + tag);
  fs::create_directories(dir);
  fs::remove(dir / "model.safetensors");
  fs::create_symlink(hf_dir(name) + "/model.safetensors", dir / "model.safetensors");
  std::ofstream(dir / "config.json") << cfg.dump();
  return dir;
}

TEST(HybridLoad, BadConfigsAreErrorsNamingTheKey) {
  REQUIRE_FIXTURE("wave2/qwen3_5_long");
  REQUIRE_FIXTURE("wave2/qwen3_next");
  const std::vector<std::tuple<std::string, nlohmann::json, std::string>> cases = {
      {"wave2/qwen3_5_long", {{"layer_types", {"full_attention", "linear_attention", "full_attention"}}}, "layer_types"},
      {"wave2/qwen3_5_long", {{"layer_types", {"full_attention", "linear", "linear_attention", "full_attention"}}},
       "layer_types"},
      {"wave2/qwen3_5_long", {{"linear_num_value_heads", 3}}, "linear_num_value_heads"},
      {"wave2/qwen3_5_long", {{"linear_num_key_heads", 0}}, "linear_num_key_heads"},
      {"wave2/qwen3_5_long", {{"linear_value_head_dim", 16}}, "attn_qkv.weight"},
      {"wave2/qwen3_5_long", {{"linear_key_head_dim", 8}}, "attn_qkv.weight"},
      {"wave2/qwen3_5_long", {{"linear_conv_kernel_dim", 0}}, "linear_conv_kernel_dim"},
      {"wave2/qwen3_5_long", {{"layer_types", nullptr}, {"full_attention_interval", 0}}, "full_attention_interval"},
      {"wave2/qwen3_5_long", {{"layer_types", nullptr}, {"full_attention_interval", 3}}, "blk.0.attn_qkv.weight"},
      {"wave2/qwen3_next", {{"num_attention_heads", 8}}, "attn_q.weight"},
      {"wave2/qwen3_next", {{"shared_expert_intermediate_size", 16}}, "ffn_gate_shexp.weight"},
  };
  for (const auto& [name, patch, needle] : cases) {
    const fs::path dir = patched_copy(name, patch, "bad");
    try {
      Model::load({.path = dir.string()});
      ADD_FAILURE() << name << " accepted " << patch.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << patch.dump() << ": " << e.what();
    }
    fs::remove_all(dir);
  }
}

// A GGUF without one of a linear-attention layer's tensors is refused naming it.
TEST(HybridLoad, GgufMissingTensorIsNamed) {
  REQUIRE_FIXTURE("wave2/qwen3_5_moe");
  const gguf::File good = gguf::File::open(converted_gguf("wave2/qwen3_5_moe"));
  for (const std::string missing : {"blk.0.ssm_conv1d.weight", "blk.2.ssm_a", "blk.1.attn_q.weight",
                                    "blk.0.ffn_gate_shexp.weight"}) {
    gguf::Writer w;
    for (const auto& [key, value] : good.metadata()) w.set(key, value);
    bool found = false;
    for (const auto& t : good.tensors()) {
      if (t.name == missing) found = true;
      else w.add_tensor(t.name, t.type, t.ne, t.data, t.n_bytes);
    }
    ASSERT_TRUE(found) << missing;
    const std::string bad = ::testing::TempDir() + "/brisk_hybrid_missing.gguf";
    w.write(bad);
    try {
      Model::load({.path = bad});
      ADD_FAILURE() << "loaded without " << missing;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
    }
    fs::remove(bad);
  }
}

// `brisk run`'s conversation on a hybrid model: the second turn prefills little (the state is
// kept, or cut back to a snapshot) and answers as a cold run over the same prompt tokens. (The
// random model's answers are not always valid UTF-8, so a fresh session given the text could
// tokenize the history differently: the comparison is by ids.)
TEST(HybridChat, SecondTurnKeepsStateAndAnswersAsColdRun) {
  REQUIRE_FIXTURE("qwen3_5");
  auto model = Model::load({.path = hf_dir("qwen3_5")});
  GenerateParams gp{.max_tokens = 12};
  gp.sampling.temperature = 0.0f;
  auto ctx = Context::create(model, {.n_ctx = 1024, .n_seq_max = 1, .kv_type = QuantType::F32, .n_threads = 2});
  ChatSession chat(model, *ctx, ChatTemplate(model->chat_template()));
  chat.reply("Hello there", gp);
  const ChatTurn t2 = chat.reply("And then?", gp);
  EXPECT_LT(t2.stats.n_prompt_new, t2.stats.n_prompt);
  const std::vector<int32_t>& held = chat.cached_tokens();
  ASSERT_GT(held.size(), size_t(t2.stats.n_prompt));
  const std::vector<int32_t> prompt(held.begin(), held.begin() + t2.stats.n_prompt);
  const std::vector<int32_t> answer(held.begin() + t2.stats.n_prompt, held.end());
  auto cold = make_ctx(model);
  std::vector<float> logits = feed(*cold, prompt, 0, 0, prompt.size());
  std::vector<int32_t> got;
  for (size_t i = 0; i < answer.size(); ++i) {
    got.push_back(int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    logits = feed(*cold, {got.back()}, 0, int32_t(prompt.size() + i), 1);
  }
  EXPECT_EQ(got, answer);
}

// The MTP block of a GGUF (nextn_predict_layers blocks after the stack, counted in block_count) is
// loaded and kept for --spec mtp, not run by the model's forward: the logits do not change; a
// missing tensor of it is named.
TEST(HybridLoad, GgufMtpBlockLoadsAndIsNotRun) {
  REQUIRE_FIXTURE("wave2/qwen3_next");
  const Ref ref = load_ref_file(fixture_dir("wave2/qwen3_next") + "/ref.json");
  const gguf::File base = gguf::File::open(converted_gguf("wave2/qwen3_next"));
  const int32_t n_layer = int32_t(*base.get_int("qwen3next.block_count"));
  const int64_t n_embd = *base.get_int("qwen3next.embedding_length");
  std::vector<float> eh(size_t(2 * n_embd * n_embd), 0.01f), norm(size_t(n_embd), 1.0f);
  const int32_t full = n_layer - 1;  // the fixture's last layer is full attention: the MTP block's shape
  for (const std::string drop : {"", "nextn.hnorm.weight"}) {
    gguf::Writer w;
    for (const auto& [key, value] : base.metadata()) w.set(key, value);
    w.set("qwen3next.block_count", gguf::Value::from_u32(uint32_t(n_layer + 1)));
    w.set("qwen3next.nextn_predict_layers", gguf::Value::from_u32(1));
    const std::string from = "blk." + std::to_string(full) + ".", to = "blk." + std::to_string(n_layer) + ".";
    for (const auto& t : base.tensors()) {
      w.add_tensor(t.name, t.type, t.ne, t.data, t.n_bytes);
      if (t.name.rfind(from, 0) == 0) w.add_tensor(to + t.name.substr(from.size()), t.type, t.ne, t.data, t.n_bytes);
    }
    w.add_tensor(to + "nextn.eh_proj.weight", QuantType::F32, {uint64_t(2 * n_embd), uint64_t(n_embd)}, eh.data(),
                 eh.size() * 4);
    for (const char* n : {"nextn.enorm.weight", "nextn.hnorm.weight"})
      if (drop != n) w.add_tensor(to + n, QuantType::F32, {uint64_t(n_embd)}, norm.data(), norm.size() * 4);
    const std::string path = ::testing::TempDir() + "/brisk_hybrid_mtp.gguf";
    w.write(path);
    if (drop.empty()) {
      check_exact_ref(ref, "qwen3next with an MTP block", path);
    } else {
      try {
        Model::load({.path = path});
        ADD_FAILURE() << "loaded without " << drop;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(to + drop), std::string::npos) << e.what();
      }
    }
    fs::remove(path);
  }
}

// Without shared data: random hybrid GGUFs (dense and MoE, Q8_0 and Q4_K_M) load and run, and
// their recurrent state gives the same logits in one forward and token by token.
TEST(HybridLoad, RandomHybridGgufRuns) {
  const std::string path = ::testing::TempDir() + "/brisk_random_hybrid.gguf";
  for (const bool moe : {false, true}) {
    RandomModelParams p = random_model_preset("tiny-hybrid");
    if (moe) {
      p.arch = "qwen35moe";
      p.n_expert = 4;
      p.n_expert_used = 2;
      p.n_ff_exp = 32;
      p.n_ff_shexp = 64;
    }
    for (const char* recipe : {"Q8_0", "Q4_K_M"}) {
      p.recipe = recipe;
      random_model_write(p, path);
      auto model = Model::load({.path = path});
      EXPECT_EQ(model->info().architecture, p.arch);
      std::vector<int32_t> ids;
      for (int32_t i = 0; i < 40; ++i) ids.push_back((i * 37 + 11) % p.n_vocab);
      auto whole = make_ctx(model), steps = make_ctx(model);
      const std::vector<float> a = feed(*whole, ids, 0, 0, ids.size());
      const std::vector<float> b = feed(*steps, ids, 0, 0, 1);
      for (float v : a) ASSERT_TRUE(std::isfinite(v));
      EXPECT_LT(hybrid_max_diff(a, b), 1e-4f) << p.arch << " " << recipe;
    }
  }
  std::remove(path.c_str());
}

// The bytes a decoded token moves count the recurrent state, read and written once: per linear
// layer the conv window [kernel - 1, conv_dim] and the delta state [n_v_head, k_dim, v_dim], F32.
TEST(HybridLoad, StateBytesCountEveryLinearLayerReadAndWritten) {
  const std::string path = ::testing::TempDir() + "/brisk_random_hybrid_state_bytes.gguf";
  RandomModelParams p = random_model_preset("tiny-hybrid");
  p.recipe = "Q8_0";
  random_model_write(p, path);
  auto model = Model::load({.path = path});
  int64_t n_linear = 0;
  for (int32_t il = 0; il < p.n_layer; ++il) n_linear += (il + 1) % p.full_attention_interval != 0;
  const int64_t conv_dim = 2 * int64_t(p.linear_n_k_head) * p.linear_k_head_dim +
                           int64_t(p.linear_n_v_head) * p.linear_v_head_dim;
  const int64_t floats = (p.linear_conv_kernel - 1) * conv_dim +
                         int64_t(p.linear_n_v_head) * p.linear_k_head_dim * p.linear_v_head_dim;
  ASSERT_GT(n_linear, 0);
  EXPECT_EQ(model->info().state_bytes, uint64_t(2 * n_linear * floats * int64_t(sizeof(float))));
  std::remove(path.c_str());
  // A model without recurrent layers moves none.
  RandomModelParams dense = random_model_preset("tiny");
  dense.recipe = "Q8_0";
  random_model_write(dense, path);
  EXPECT_EQ(Model::load({.path = path})->info().state_bytes, 0u);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace brisk::test

namespace brisk {
namespace {

// The converter's hybrid steps on their own: the MTP head under either HF prefix maps to one
// name; qwen35 files keep the MTP block after the stack, qwen3next files leave it out (llama.cpp's
// qwen3next loader counts every block as a layer); rope.dimension_sections is the checkpoint's
// mrope_section padded to four, or llama.cpp's default.
TEST(HybridConvert, MtpBlockAndRopeSections) {
  EXPECT_FALSE(hybrid_hf_to_gguf("mtp.fc.weight").empty());
  EXPECT_EQ(hybrid_hf_to_gguf("model.mtp.fc.weight"), hybrid_hf_to_gguf("mtp.fc.weight"));
  EXPECT_EQ(hybrid_hf_to_gguf("model.mtp.layers.0.input_layernorm.weight"),
            hybrid_hf_to_gguf("mtp.layers.0.input_layernorm.weight"));
  for (const std::string arch : {"qwen35", "qwen3next"}) {
    ModelConfig c;
    c.arch = arch;
    c.n_layer = 2;
    c.linear_n_k_head = c.linear_n_v_head = 1;
    c.linear_k_head_dim = c.linear_v_head_dim = 2;
    ConvertTensors t;
    t[hybrid_hf_to_gguf("mtp.fc.weight")] = {.ne = {4, 2}, .f = std::vector<float>(8, 0.5f)};
    t["output_norm.weight"] = {.ne = {2}, .f = {0.0f, 1.0f}};
    hybrid_convert_tensors(c, t);
    const bool kept = arch == "qwen35";
    EXPECT_EQ(c.n_nextn, kept ? 1 : 0) << arch;
    EXPECT_EQ(t.size(), kept ? 2u : 1u) << arch;
    EXPECT_EQ(t.count("blk.2.nextn.eh_proj.weight"), kept ? 1u : 0u) << arch;
    EXPECT_EQ(t.at("output_norm.weight").f, (std::vector<float>{1.0f, 2.0f})) << arch;  // 1 + w
  }
  for (const auto& [sections, want] :
       std::vector<std::pair<std::vector<int32_t>, std::vector<int64_t>>>{{{}, {11, 11, 10, 0}}, {{24, 20, 20}, {24, 20, 20, 0}}}) {
    ModelConfig c;
    c.arch = "qwen35";
    c.n_layer = 4;
    c.full_attention_interval = 4;
    c.linear_n_k_head = c.linear_n_v_head = 1;
    c.linear_k_head_dim = c.linear_v_head_dim = 2;
    c.linear_conv_kernel = 4;
    c.rope_sections = sections;
    gguf::Writer w;
    hybrid_convert_keys(c, "qwen35", w);
    const std::string path = ::testing::TempDir() + "/brisk_hybrid_keys.gguf";
    w.write(path);
    EXPECT_EQ(gguf::File::open(path).get_int_array("qwen35.rope.dimension_sections"), want);
    std::filesystem::remove(path);
  }
}

}  // namespace
}  // namespace brisk
