// The Hugging Face -> GGUF converter asks the model registry what to write: every registered
// architecture with a Hugging Face fixture here (the shared models' hf/ folders and the
// project's tests/fixtures/models) converts as `brisk quantize DIR OUT F32` does, and the
// float32 GGUF gives the transformers reference's last logits (1e-4), per-position argmax and
// greedy continuation. Settings GGUF cannot hold are refused, naming them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/json_file.h"
#include "models/registry.h"
#include "quant/recipe.h"
#include "quantize/quantize_gguf.h"
#include "runtime/embedder.h"
#include "runtime/engine_api.h"
#include "temp_files.h"

namespace brisk {
namespace {

namespace fs = std::filesystem;

struct ConvertFixture {
  std::string name;  // for messages
  std::string hf;    // folder with config.json and safetensors
  std::string ref;   // ref.json
};

// Hugging Face fixtures with a transformers reference: shared/data/models/[wave2/]NAME/{hf,ref.json}
// and tests/fixtures/models/NAME/{config.json,...,ref.json}.
std::vector<ConvertFixture> convert_fixtures() {
  std::vector<ConvertFixture> out;
  const fs::path shared = fs::path(BRISK_SHARED_DATA) / "models";
  for (const auto& [dir, prefix] : {std::pair{shared, std::string()}, std::pair{shared / "wave2", std::string("wave2/")}})
    if (fs::is_directory(dir))
      for (const auto& d : fs::directory_iterator(dir))
        if (fs::exists(d.path() / "hf" / "config.json") && fs::exists(d.path() / "ref.json"))
          out.push_back({prefix + d.path().filename().string(), (d.path() / "hf").string(),
                         (d.path() / "ref.json").string()});
  for (const auto& d : fs::directory_iterator(fs::path(BRISK_FIXTURES) / "models"))
    if (fs::exists(d.path() / "config.json") && fs::exists(d.path() / "ref.json"))
      out.push_back({"own/" + d.path().filename().string(), d.path().string(), (d.path() / "ref.json").string()});
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

const ArchEntry* convert_entry_of(const std::string& hf_folder) {
  return arch_find_hf_config(read_json_file(hf_folder + "/config.json"));
}

int32_t convert_argmax(const float* x, int32_t n) { return int32_t(std::max_element(x, x + n) - x); }

// The converted file against the reference: last logits, argmax per position, greedy ids.
void expect_matches_reference(const std::string& gguf, const ConvertFixture& fx) {
  const nlohmann::json ref = read_json_file(fx.ref);
  const auto ids = ref.at("input_ids").get<std::vector<int32_t>>();
  const auto last = ref.at("last_logits").get<std::vector<float>>();
  const auto argmax = ref.at("argmax_per_position").get<std::vector<int32_t>>();
  const auto greedy = ref.at("greedy_continuation").get<std::vector<int32_t>>();
  auto model = Model::load({.path = gguf});
  auto ctx = Context::create(model, {.n_ctx = 256, .n_seq_max = 1, .n_batch = 512, .kv_type = QuantType::F32,
                                     .n_threads = 2});
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < ids.size(); ++i)
    batch.push_back({.token = ids[i], .pos = int32_t(i), .seq = 0, .want_logits = true});
  ctx->decode(batch);
  const int32_t nv = ctx->n_vocab(), n = int32_t(ids.size());
  ASSERT_EQ(size_t(nv), last.size()) << fx.name;
  float diff = 0.0f;
  for (int32_t i = 0; i < nv; ++i) diff = std::max(diff, std::fabs(ctx->logits(n - 1)[i] - last[size_t(i)]));
  EXPECT_LT(diff, 1e-4f) << fx.name << ": last logits of the converted GGUF";
  for (int32_t p = 0; p < n; ++p) EXPECT_EQ(convert_argmax(ctx->logits(p), nv), argmax[size_t(p)]) << fx.name << " position " << p;
  std::vector<int32_t> gen;
  int32_t tok = convert_argmax(ctx->logits(n - 1), nv);
  for (size_t i = 0; i < greedy.size(); ++i) {
    gen.push_back(tok);
    if (gen.size() == greedy.size()) break;
    ctx->decode({{.token = tok, .pos = n + int32_t(i), .seq = 0, .want_logits = true}});
    tok = convert_argmax(ctx->logits(0), nv);
  }
  EXPECT_EQ(gen, greedy) << fx.name << ": greedy continuation of the converted GGUF";
}

// An encoder's converted file against the reference: the last hidden state of every token.
void expect_hidden_matches_reference(const std::string& gguf, const ConvertFixture& fx) {
  const nlohmann::json ref = read_json_file(fx.ref);
  EmbedInput in{.ids = ref.at("input_ids").get<std::vector<int32_t>>()};
  if (ref.contains("token_type_ids")) in.types = ref.at("token_type_ids").get<std::vector<int32_t>>();
  std::vector<float> want;
  for (const auto& row : ref.at("last_hidden_state"))
    for (const auto& v : row) want.push_back(v.get<float>());
  Embedder e(Model::load({.path = gguf}), {.n_threads = 2});
  const std::vector<float> got = e.hidden({in})[0];
  ASSERT_EQ(got.size(), want.size()) << fx.name;
  float diff = 0.0f;
  for (size_t i = 0; i < got.size(); ++i) diff = std::max(diff, std::fabs(got[i] - want[i]));
  EXPECT_LT(diff, 1e-4f) << fx.name << ": last hidden state of the converted GGUF";
}

TEST(Convert, EveryRegisteredArchitectureWithAFixture) {
  const QuantRecipe f32 = *quant_recipe_from_name("F32");
  std::set<std::string> archs;
  int n_converted = 0;
  for (const ConvertFixture& fx : convert_fixtures()) {
    const ArchEntry* e = convert_entry_of(fx.hf);
    if (!e) continue;  // an architecture the engine does not run
    // Encoder-decoder references (mel frames, a decoder prefix) are checked by the speech tests.
    if (!read_json_file(fx.ref).contains("input_ids")) continue;
    SCOPED_TRACE(fx.name + " (" + e->name + ")");
    EXPECT_FALSE(e->convert.arch.empty()) << e->name << " declares no GGUF conversion (ArchEntry::convert)";
    if (e->convert.arch.empty()) continue;
    const std::string out = (testing::process_temp_dir() / ("convert_" + std::to_string(n_converted) + ".gguf")).string();
    quantize_gguf({.in = fx.hf, .out = out, .recipe = f32, .n_threads = 2});
    if (read_json_file(fx.ref).contains("last_hidden_state")) expect_hidden_matches_reference(out, fx);
    else expect_matches_reference(out, fx);
    fs::remove(out);
    archs.insert(e->name);
    ++n_converted;
  }
  // The project's own fixtures are always here: llama (with rope scalings), mistral, qwen2, qwen3.
  EXPECT_GE(n_converted, 7);
  for (const char* a : {"llama", "mistral", "qwen2", "qwen3"}) EXPECT_TRUE(archs.count(a)) << a << " was not converted";
  std::string done;
  for (const auto& a : archs) done += " " + a;
  std::printf("[convert] %d fixtures converted, architectures:%s\n", n_converted, done.c_str());
}

// A configuration the GGUF keys cannot say is refused, naming the setting, and leaves no file.
TEST(Convert, RefusesWhatGgufCannotHold) {
  const fs::path src = fs::path(BRISK_FIXTURES) / "models" / "qwen3_mha_tied";
  const fs::path dir = testing::process_temp_dir() / "convert_bad_qwen3";
  fs::create_directories(dir);
  for (const auto& f : fs::directory_iterator(src)) fs::copy_file(f.path(), dir / f.path().filename(), fs::copy_options::overwrite_existing);
  nlohmann::json cfg = read_json_file((dir / "config.json").string());
  cfg["partial_rotary_factor"] = 0.5;  // fine: GGUF holds rope.dimension_count
  cfg["hidden_act"] = "gelu_pytorch_tanh";  // not: GGUF has no activation key for qwen3
  std::ofstream((dir / "config.json").string()) << cfg.dump();
  const std::string out = (testing::process_temp_dir() / "convert_bad.gguf").string();
  try {
    quantize_gguf({.in = dir.string(), .out = out, .recipe = *quant_recipe_from_name("F32"), .n_threads = 2});
    FAIL() << "a gelu qwen3 was converted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("activation"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace brisk
