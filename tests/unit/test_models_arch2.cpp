// Gemma 3 and Qwen3-MoE checkpoint handling beyond the transformers references
// (test_models.cpp): the per-layer attention kind (layer_types) really switches window and rope
// base, sliding-window caches that keep only their window, and bad MoE / layer settings are
// errors naming what is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model_fixtures.h"
#include "model_harness.h"
#include "core/error.h"
#include "formats/gguf.h"
#include "formats/json_file.h"
#include "runtime/engine_api.h"

namespace brisk {
namespace {

namespace fs = std::filesystem;

// A folder with the fixture's weights and a patched config.json.
fs::path patched_copy(const std::string& arch, const nlohmann::json& patch, const std::string& tag) {
  nlohmann::json cfg = read_json_file(model_dir(arch) + "/hf/config.json");
  cfg.merge_patch(patch);
  const fs::path dir = fs::path(::testing::TempDir()) / ("brisk_" + arch + "_" + tag);
  fs::create_directories(dir);
  fs::remove(dir / "model.safetensors");
  fs::create_symlink(model_dir(arch) + "/hf/model.safetensors", dir / "model.safetensors");
  std::ofstream(dir / "config.json") << cfg.dump();
  return dir;
}

// Last-position logits of the reference prompt (first n_tok tokens).
std::vector<float> last_logits(const fs::path& dir, size_t n_tok) {
  const nlohmann::json ref = read_json_file(model_dir("gemma3") + "/ref.json");
  const auto ids = ref.at("input_ids").get<std::vector<int32_t>>();
  auto model = Model::load({.path = dir.string()});
  auto ctx = Context::create(model, {.n_ctx = 256, .n_seq_max = 1, .n_batch = 512, .kv_type = QuantType::F32, .n_threads = 2});
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < n_tok && i < ids.size(); ++i)
    batch.push_back({.token = ids[i], .pos = int32_t(i), .seq = 0, .want_logits = i + 1 == n_tok});
  ctx->decode(batch);
  return std::vector<float>(ctx->logits(0), ctx->logits(0) + ctx->n_vocab());
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

TEST(Gemma3, LayerTypesSwitchWindowAndRopeBase) {
  REQUIRE_MODEL("gemma3");
  const nlohmann::json same_theta = {{"rope_parameters", {{"full_attention", {{"rope_theta", 10000.0}}}}}};
  const nlohmann::json mixed = {{"layer_types", {"sliding_attention", "full_attention", "sliding_attention"}}};
  nlohmann::json mixed_same_theta = same_theta;
  mixed_same_theta.merge_patch(mixed);
  const auto all_sliding = patched_copy("gemma3", same_theta, "sliding");
  const auto one_full = patched_copy("gemma3", mixed_same_theta, "full");
  const auto one_full_own_theta = patched_copy("gemma3", mixed, "full_theta");
  // Within the window (8 tokens) and with one rope base, a full layer computes the same thing.
  EXPECT_LT(max_diff(last_logits(all_sliding, 8), last_logits(one_full, 8)), 1e-5f);
  // Past the window the full layer sees more positions; with its own base it rotates differently.
  EXPECT_GT(max_diff(last_logits(all_sliding, 40), last_logits(one_full, 40)), 1e-3f);
  EXPECT_GT(max_diff(last_logits(one_full, 8), last_logits(one_full_own_theta, 8)), 1e-3f);
  for (const auto& d : {all_sliding, one_full, one_full_own_theta}) fs::remove_all(d);
}

TEST(Gemma3, SoftCappingSettingsApply) {
  REQUIRE_MODEL("gemma3");
  const auto plain = patched_copy("gemma3", nlohmann::json::object(), "plain");
  const auto final_cap = patched_copy("gemma3", {{"final_logit_softcapping", 0.5}}, "final_cap");
  const auto attn_cap = patched_copy("gemma3", {{"attn_logit_softcapping", 0.05}}, "attn_cap");
  const std::vector<float> base = last_logits(plain, 20);
  const std::vector<float> capped = last_logits(final_cap, 20);
  float peak = 0.0f;
  for (size_t i = 0; i < base.size(); ++i) {
    EXPECT_NEAR(capped[i], 0.5f * std::tanh(base[i] / 0.5f), 1e-5f) << "token " << i;
    peak = std::max(peak, std::fabs(base[i]));
  }
  EXPECT_GT(peak, 0.5f);  // the cap is active on some logits
  EXPECT_GT(max_diff(base, last_logits(attn_cap, 20)), 1e-3f);
  for (const auto& d : {plain, final_cap, attn_cap}) fs::remove_all(d);
}

// Gemma 3's sliding layers and Mistral's window keep only their window in the cache: with KV
// blocks of 16 positions (window 8, 80- and 40-token prompts) the released blocks are reused and
// the references still hold, from the HF folder and the GGUF.
TEST(Gemma3, WindowedCacheInSmallBlocksMatchesTransformers) {
  REQUIRE_MODEL("gemma3");
  const brisk::test::Ref ref = brisk::test::load_ref("gemma3");
  brisk::test::check_exact_ref(ref, "gemma3", model_dir("gemma3") + "/hf", 16);
  brisk::test::check_exact_ref(ref, "gemma3", model_dir("gemma3") + "/model-f32.gguf", 16);
  const std::string own = std::string(BRISK_FIXTURES) + "/models/mistral_window";
  brisk::test::check_exact_ref(brisk::test::load_ref_file(own + "/ref.json"), "mistral_window", own, 16);
}

// GGUF files of llama.cpp converters older than rope.freq_base_swa carry no sliding-layer rope
// base (llama.cpp's loader fixes it at 10000): such a file gives the transformers reference.
TEST(Gemma3, GgufWithoutSlidingRopeBaseUsesTenThousand) {
  REQUIRE_MODEL("gemma3");
  const gguf::File full = gguf::File::open(model_dir("gemma3") + "/model-f32.gguf");
  ASSERT_NE(full.find("gemma3.rope.freq_base_swa"), nullptr);
  gguf::Writer w;
  for (const auto& [key, value] : full.metadata())
    if (key != "gemma3.rope.freq_base_swa") w.set(key, value);
  for (const auto& t : full.tensors()) w.add_tensor(t.name, t.type, t.ne, t.data, t.n_bytes);
  const std::string path = ::testing::TempDir() + "/brisk_gemma3_no_swa_base.gguf";
  w.write(path);
  brisk::test::check_exact_ref(brisk::test::load_ref("gemma3"), "gemma3 without rope.freq_base_swa", path);
  fs::remove(path);
}

TEST(ModelLoadArch2, BadSettingsAreErrorsNamingThem) {
  REQUIRE_MODEL("gemma3");
  REQUIRE_MODEL("qwen3_moe");
  const std::vector<std::tuple<std::string, nlohmann::json, std::string>> cases = {
      {"gemma3", {{"layer_types", {"sliding_attention"}}}, "layer_types"},
      {"gemma3", {{"layer_types", {"sliding_attention", "local", "full_attention"}}}, "local"},
      {"gemma3", {{"layer_types", "sliding_attention"}}, "layer_types"},
      {"gemma3", {{"query_pre_attn_scalar", -1.0}}, "query_pre_attn_scalar"},
      {"qwen3_moe", {{"num_experts_per_tok", 9}}, "experts per token"},
      {"qwen3_moe", {{"num_local_experts", 4}}, "ffn_gate_inp"},
      {"qwen3_moe", {{"moe_intermediate_size", 32}}, "ffn_gate_exps"},
  };
  for (const auto& [arch, patch, needle] : cases) {
    const fs::path dir = patched_copy(arch, patch, "bad");
    brisk::test::expect_load_error(dir.string(), needle, arch + " " + patch.dump());
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace brisk
