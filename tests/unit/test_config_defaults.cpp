// Config class defaults (ArchEntry::hf_config_defaults): a config.json that leaves out the keys
// whose values are its transformers config class's defaults loads as the whole config does (the
// same logits, bit for bit), for every fixture of a family that has them; the defaults go into
// text_config when the config has one; legacy hybrid layer-type names load as the current ones;
// keys the engine runs at one value only (ArchEntry::hf_config_fixed) are refused at another.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/json_file.h"
#include "model_fixtures.h"
#include "model_harness.h"
#include "models/registry.h"
#include "runtime/engine_api.h"

namespace brisk {
namespace {

namespace fs = std::filesystem;

// A folder with the weights of the Hugging Face folder `hf` and the given config.json.
fs::path folder_with_config(const std::string& hf, const nlohmann::json& cfg, const std::string& tag) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("brisk_cfg_defaults_" + tag);
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::create_symlink(fs::absolute(hf + "/model.safetensors"), dir / "model.safetensors");
  std::ofstream(dir / "config.json") << cfg.dump(2);
  return dir;
}

// The same for a shared fixture (model_dir(fixture)/hf).
fs::path with_config(const std::string& fixture, const nlohmann::json& cfg, const std::string& tag) {
  return folder_with_config(model_dir(fixture) + "/hf", cfg, tag);
}

std::vector<float> logits_of(const fs::path& dir) {
  auto ctx = Context::create(Model::load({.path = dir.string()}),
                             {.n_ctx = 64, .n_batch = 64, .kv_type = QuantType::F32, .n_threads = 2});
  const std::vector<int32_t> ids = {1, 7, 3, 11, 5, 2, 9, 4, 6, 8};
  std::vector<float> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    ctx->decode(brisk::test::prompt_batch({ids[i]}, 0, int32_t(i), true));
    out.insert(out.end(), ctx->logits(0), ctx->logits(0) + ctx->n_vocab());
  }
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(ConfigDefaults, KeysAtTheClassDefaultsMayBeLeftOut) {
  size_t dropped_total = 0;
  for (const char* fixture : {"gemma3", "qwen3_5", "wave2/qwen3_5_moe", "wave2/qwen3_next", "wave2/gemma4_text_moe",
                              "wave2/gemma4_text_keqv", "wave2/gemma4_text_ple_kvshare"}) {
    if (!fs::exists(model_dir(fixture) + "/hf/config.json")) continue;
    SCOPED_TRACE(fixture);
    const nlohmann::json cfg = read_json_file(model_dir(fixture) + "/hf/config.json");
    const ArchEntry* entry = arch_find_hf_config(cfg);
    ASSERT_NE(entry, nullptr);
    ASSERT_NE(entry->hf_config_defaults, nullptr) << entry->name;
    const nlohmann::json defaults = nlohmann::json::parse(entry->hf_config_defaults);
    nlohmann::json stripped = cfg;
    nlohmann::json& scope = stripped.contains("text_config") ? stripped["text_config"] : stripped;
    std::vector<std::string> dropped;
    for (const auto& [key, value] : defaults.items())
      if (scope.contains(key) && scope[key] == value) {
        scope.erase(key);
        dropped.push_back(key);
      }
    // transformers folds a top-level partial_rotary_factor into rope_parameters.
    if (defaults.contains("partial_rotary_factor") && scope.contains("rope_parameters") &&
        scope["rope_parameters"].value("partial_rotary_factor", -1.0) == defaults["partial_rotary_factor"].get<double>() &&
        !scope.contains("partial_rotary_factor")) {
      scope["rope_parameters"].erase("partial_rotary_factor");
      dropped.push_back("rope_parameters.partial_rotary_factor");
    }
    dropped_total += dropped.size();
    if (dropped.empty()) continue;
    const std::string tag = entry->name + std::to_string(dropped_total);
    const fs::path full = with_config(fixture, cfg, tag + "_full");
    const fs::path lean = with_config(fixture, stripped, tag + "_lean");
    std::string list;
    for (const std::string& k : dropped) list += k + " ";
    EXPECT_TRUE(same_bits(logits_of(full), logits_of(lean))) << "without " << list;
    fs::remove_all(full);
    fs::remove_all(lean);
  }
  if (dropped_total == 0) GTEST_SKIP() << "no fixture with keys at their class defaults";
}

TEST(ConfigDefaults, GoIntoTextConfigAndNeverOverrideAKey) {
  const ArchEntry* entry = arch_find_hf_config({{"model_type", "gemma4"}});
  ASSERT_NE(entry, nullptr);
  const nlohmann::json top = arch_hf_config_with_defaults(*entry, {{"model_type", "gemma4_text"}, {"sliding_window", 6}});
  EXPECT_EQ(top["sliding_window"], 6);
  EXPECT_EQ(top["hidden_activation"], "gelu_pytorch_tanh");
  EXPECT_EQ(top["rope_parameters"]["full_attention"]["rope_type"], "proportional");
  const nlohmann::json nested = arch_hf_config_with_defaults(
      *entry, {{"model_type", "gemma4"}, {"text_config", {{"hidden_size", 64}}}, {"tie_word_embeddings", false}});
  EXPECT_EQ(nested["text_config"]["hidden_size"], 64);
  EXPECT_EQ(nested["text_config"]["hidden_size_per_layer_input"], 256);
  EXPECT_FALSE(nested.contains("hidden_size_per_layer_input"));
  EXPECT_FALSE(nested["text_config"].contains("tie_word_embeddings"));  // the top level has it
  EXPECT_EQ(nested["tie_word_embeddings"], false);
}

// transformers' legacy layer-type names ("attention", "mamba") name the same layers.
TEST(ConfigDefaults, LegacyHybridLayerTypeNames) {
  REQUIRE_MODEL("wave2/qwen3_next");
  const nlohmann::json cfg = read_json_file(model_dir("wave2/qwen3_next") + "/hf/config.json");
  ASSERT_TRUE(cfg.contains("layer_types"));
  nlohmann::json legacy = cfg;
  for (auto& t : legacy["layer_types"]) t = t == "full_attention" ? "attention" : "mamba";
  const fs::path a = with_config("wave2/qwen3_next", cfg, "types_now");
  const fs::path b = with_config("wave2/qwen3_next", legacy, "types_legacy");
  EXPECT_TRUE(same_bits(logits_of(a), logits_of(b)));
  fs::remove_all(a);
  fs::remove_all(b);
}



// Switches the engine does not run are refused naming the key (NomicBERT: pre-norm, interleaved
// rotary, xPos, dynamic NTK, nomic-embed-text-v2-moe's MoE layers); their off values load.
TEST(ConfigFixedKeys, RefusedNamingTheKey) {
  const std::string nomic = std::string(BRISK_FIXTURES) + "/models/embed_nomic/hf";
  if (!fs::exists(nomic + "/config.json")) GTEST_SKIP() << nomic << " is absent";
  const nlohmann::json cfg = read_json_file(nomic + "/config.json");
  fs::path dir;
  auto load_with = [&](const nlohmann::json& patch) {
    nlohmann::json c = cfg;
    c.merge_patch(patch);
    for (const auto& [k, v] : patch.items())
      if (v.is_null()) c[k] = nullptr;  // merge_patch erases a null: keep it as the config's value
    dir = folder_with_config(nomic, c, "fixed");
    return Model::load({.path = dir.string()});
  };
  EXPECT_NO_THROW(load_with({{"prenorm", false}, {"rotary_emb_interleaved", false}, {"rotary_scaling_factor", nullptr},
                             {"moe_every_n_layers", 0}}));
  for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"prenorm", true}, {"rotary_emb_interleaved", true}, {"rotary_emb_scale_base", 512},
           {"rotary_scaling_factor", 2.0}, {"moe_every_n_layers", 2}}) {
    try {
      load_with({{key, value}});
      ADD_FAILURE() << key << " = " << value.dump() << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  }
  fs::remove_all(dir);
}

// A classification head the architecture does not run (found by model_type) is refused naming
// the class, not loaded without it.
TEST(ConfigFixedKeys, UnsupportedClassificationHeadIsRefused) {
  const std::string mb = std::string(BRISK_FIXTURES) + "/models/embed_modernbert/hf";
  if (!fs::exists(mb + "/config.json")) GTEST_SKIP() << mb << " is absent";
  nlohmann::json cfg = read_json_file(mb + "/config.json");
  cfg["architectures"] = {"ModernBertForSequenceClassification"};
  const fs::path dir = folder_with_config(mb, cfg, "head");
  try {
    Model::load({.path = dir.string()});
    ADD_FAILURE() << "loaded without its classification head";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ModernBertForSequenceClassification"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace brisk
