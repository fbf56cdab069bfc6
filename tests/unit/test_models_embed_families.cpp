// Encoder families against transformers and sentence-transformers: the fixtures of
// tools/make_fixtures/make_embedding_fixtures.py under tests/fixtures/models/NAME (hf/ folder,
// ref.json) for BERT with CLS pooling, XLM-RoBERTa with mean pooling, NomicBERT, ModernBERT and
// the XLM-RoBERTa cross-encoder: the last hidden state of the first input (1e-4), the pipeline's
// vector of every input packed in one call (1e-5), the reranker's logits and scores (1e-4), with
// the reference ops and the fast ones; then each folder converted to GGUF with llama.cpp's
// names gives the same hidden states (1e-5). Random-weight NomicBERT and ModernBERT GGUFs check
// packing (each input alone equals it packed) and the fast ops against the reference ops.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/gguf.h"
#include "embed_reference.h"
#include "models/random_model.h"
#include "quant/recipe.h"
#include "quantize/quantize_gguf.h"
#include "runtime/embed_pooling.h"
#include "runtime/embedder.h"
#include "runtime/engine_parts.h"
#include "scoped_env.h"
#include "temp_files.h"

namespace brisk {
namespace {

namespace fs = std::filesystem;

std::string family_dir(const std::string& name) { return std::string(BRISK_FIXTURES) + "/models/" + name; }

#define REQUIRE_FAMILY(name)                                                                                  \
  if (!fs::exists(family_dir(name) + "/ref.json"))                                                            \
  GTEST_SKIP() << family_dir(name) << " is absent (written by tools/make_fixtures/make_embedding_fixtures.py " \
               << "--only " << (name) << " on a machine with transformers and sentence-transformers)"

nlohmann::json family_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::vector<EmbedInput> family_inputs(const nlohmann::json& ref) {
  std::vector<EmbedInput> in;
  for (size_t i = 0; i < ref.at("inputs").size(); ++i) {
    EmbedInput e{.ids = ref["inputs"][i].get<std::vector<int32_t>>()};
    if (ref.contains("token_type_ids")) e.types = ref["token_type_ids"][i].get<std::vector<int32_t>>();
    in.push_back(std::move(e));
  }
  return in;
}

class EmbedFamily : public ::testing::TestWithParam<const char*> {};

TEST_P(EmbedFamily, MatchesTransformers) {
  const std::string name = GetParam();
  REQUIRE_FAMILY(name);
  const nlohmann::json ref = family_json(family_dir(name) + "/ref.json");
  const std::vector<EmbedInput> inputs = family_inputs(ref);
  auto model = Model::load({.path = family_dir(name) + "/hf"});
  for (const char* ref_ops : {"0", "1"}) {
    SCOPED_TRACE(name + ", BRISK_REF_OPS=" + ref_ops);
    ScopedEnv env("BRISK_REF_OPS", ref_ops);
    Embedder e(model, {.n_threads = 2});
    EXPECT_LT(test::embed_max_diff(e.hidden({inputs[0]})[0], test::reference_floats(ref.at("last_hidden_state"))), 1e-4f)
        << "last hidden state of input 0";
    if (ref.at("kind") == "embedding") {
      EXPECT_EQ(e.pooling().mode, pooling_from_name(ref.at("pooling").get<std::string>()));
      EXPECT_EQ(e.pooling().normalize, ref.at("normalize").get<bool>());
      const std::vector<std::vector<float>> got = e.embed(inputs);
      ASSERT_EQ(got.size(), ref.at("embeddings").size());
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_LT(test::embed_max_diff(got[i], test::reference_floats(ref["embeddings"][i])), 1e-5f) << "input " << i;
    } else {
      const std::vector<std::vector<float>> got = e.classify(inputs);
      ASSERT_EQ(got.size(), ref.at("scores").size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_NEAR(got[i][0], ref["logits"][i].get<float>(), 1e-4f) << "pair " << i;
        EXPECT_NEAR(e.relevance(got[i]), ref["scores"][i].get<float>(), 1e-4f) << "pair " << i;
      }
    }
  }
}

// The folder written as GGUF with llama.cpp's names, as `brisk quantize DIR OUT F32` does, reads
// back to the same hidden states (and classifier outputs).
TEST_P(EmbedFamily, GgufRoundTrip) {
  const std::string name = GetParam();
  REQUIRE_FAMILY(name);
  const nlohmann::json ref = family_json(family_dir(name) + "/ref.json");
  const std::vector<EmbedInput> inputs = family_inputs(ref);
  const std::string out = (testing::process_temp_dir() / ("family_" + name + ".gguf")).string();
  quantize_gguf({.in = family_dir(name) + "/hf", .out = out, .recipe = *quant_recipe_from_name("F32"), .n_threads = 2});
  Embedder hf(Model::load({.path = family_dir(name) + "/hf"}), {.n_threads = 2});
  Embedder gg(Model::load({.path = out}), {.n_threads = 2});
  const std::vector<std::vector<float>> a = hf.hidden(inputs), b = gg.hidden(inputs);
  for (size_t i = 0; i < inputs.size(); ++i) EXPECT_LT(test::embed_max_diff(a[i], b[i]), 1e-5f) << name << " input " << i;
  EXPECT_LT(test::embed_max_diff(b[0], test::reference_floats(ref.at("last_hidden_state"))), 1e-4f) << name;
  if (ref.at("kind") != "embedding") {
    const std::vector<std::vector<float>> ca = hf.classify(inputs), cb = gg.classify(inputs);
    for (size_t i = 0; i < inputs.size(); ++i) EXPECT_LT(test::embed_max_diff(ca[i], cb[i]), 1e-5f) << name << " pair " << i;
  }
  fs::remove(out);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EmbedFamily,
                         ::testing::Values("embed_bert_cls", "embed_xlmr_mean", "embed_nomic", "embed_modernbert",
                                           "rerank_xlmr"));

// A folder like rerank_xlmr's with another config.json (the weights linked).
fs::path rerank_with_config(const nlohmann::json& cfg, const std::string& tag) {
  const fs::path dir = testing::process_temp_dir() / ("rerank_cfg_" + tag);
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::create_symlink(fs::absolute(family_dir("rerank_xlmr") + "/hf/model.safetensors"), dir / "model.safetensors");
  std::ofstream(dir / "config.json") << cfg.dump(2);
  return dir;
}

// The relevance score follows sentence-transformers' CrossEncoder activation: the config's
// sentence_transformers.activation_fn, or the older sbert_ce_default_activation_function
// (ms-marco cross-encoders: Identity, raw logits), Sigmoid when neither is given.
TEST(CrossEncoderScore, ActivationFromTheConfig) {
  REQUIRE_FAMILY("rerank_xlmr");
  const nlohmann::json ref = family_json(family_dir("rerank_xlmr") + "/ref.json");
  const std::vector<EmbedInput> inputs = family_inputs(ref);
  nlohmann::json base = family_json(family_dir("rerank_xlmr") + "/hf/config.json");
  base.erase("sentence_transformers");
  const float logit = ref["logits"][0].get<float>();
  const std::vector<std::pair<nlohmann::json, float>> cases = {
      {nlohmann::json::object(), 1.0f / (1.0f + std::exp(-logit))},
      {{{"sentence_transformers", {{"activation_fn", "torch.nn.modules.linear.Identity"}}}}, logit},
      {{{"sbert_ce_default_activation_function", "torch.nn.modules.linear.Identity"}}, logit},
      {{{"sentence_transformers", {{"activation_fn", "torch.nn.modules.activation.Tanh"}}}}, std::tanh(logit)},
      {{{"sentence_transformers", {{"activation_fn", "torch.nn.modules.activation.Sigmoid"}}},
        {"sbert_ce_default_activation_function", "torch.nn.modules.linear.Identity"}},
       1.0f / (1.0f + std::exp(-logit))},
  };
  int n = 0;
  for (const auto& [patch, want] : cases) {
    nlohmann::json cfg = base;
    cfg.merge_patch(patch);
    const fs::path dir = rerank_with_config(cfg, std::to_string(n++));
    Embedder e(Model::load({.path = dir.string()}), {.n_threads = 2});
    EXPECT_NEAR(e.relevance(e.classify({inputs[0]})[0]), want, 1e-4f) << patch.dump();
    fs::remove_all(dir);
  }
  nlohmann::json bad = base;
  bad["sentence_transformers"] = {{"activation_fn", "torch.nn.modules.activation.Softsign"}};
  const fs::path dir = rerank_with_config(bad, "bad");
  try {
    Embedder e(Model::load({.path = dir.string()}), {.n_threads = 2});
    ADD_FAILURE() << "an unknown activation was accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("Softsign"), std::string::npos) << err.what();
  }
  fs::remove_all(dir);
}

// llama.cpp's converter writes BertForSequenceClassification without the pooler (cls.output
// only, a direct projection of the first token): such a file loads and scores as that
// projection; brisk's own conversion says the attention is not causal, as llama.cpp's loader needs.
TEST(CrossEncoderScore, GgufWithoutThePoolerIsADirectProjection) {
  REQUIRE_FAMILY("rerank_xlmr");
  const nlohmann::json ref = family_json(family_dir("rerank_xlmr") + "/ref.json");
  const std::vector<EmbedInput> inputs = family_inputs(ref);
  const std::string full = (testing::process_temp_dir() / "rerank_full.gguf").string();
  quantize_gguf({.in = family_dir("rerank_xlmr") + "/hf", .out = full, .recipe = *quant_recipe_from_name("F32"),
                 .n_threads = 2});
  const gguf::File f = gguf::File::open(full);
  ASSERT_TRUE(f.get_bool("bert.attention.causal").has_value());
  EXPECT_FALSE(*f.get_bool("bert.attention.causal"));
  gguf::Writer w;
  for (const auto& [key, value] : f.metadata()) w.set(key, value);
  const gguf::TensorInfo* out_w = nullptr;
  const gguf::TensorInfo* out_b = nullptr;
  for (const auto& t : f.tensors()) {
    if (t.name == "cls.weight" || t.name == "cls.bias") continue;
    if (t.name == "cls.output.weight") out_w = &t;
    if (t.name == "cls.output.bias") out_b = &t;
    w.add_tensor(t.name, t.type, t.ne, t.data, t.n_bytes);
  }
  ASSERT_TRUE(out_w && out_w->type == QuantType::F32 && out_w->ne[1] == 1);
  const std::string lossy = (testing::process_temp_dir() / "rerank_no_pooler.gguf").string();
  w.write(lossy);
  Embedder e(Model::load({.path = lossy}), {.n_threads = 2});
  ASSERT_EQ(e.n_cls(), 1);
  const std::vector<std::vector<float>> h = e.hidden(inputs), got = e.classify(inputs);
  const int64_t d = out_w->ne[0];
  std::vector<float> wr(static_cast<size_t>(d)), bias(1, 0.0f);
  std::memcpy(wr.data(), out_w->data, wr.size() * sizeof(float));
  if (out_b) std::memcpy(bias.data(), out_b->data, sizeof(float));
  for (size_t i = 0; i < inputs.size(); ++i) {
    double want = bias[0];
    for (int64_t j = 0; j < d; ++j) want += double(wr[j]) * double(h[i][size_t(j)]);
    EXPECT_NEAR(got[i][0], float(want), 1e-4f) << "pair " << i;
  }
  fs::remove(full);
  fs::remove(lossy);
}

// Random-weight rotary encoders (GGUF nomic-bert / modern-bert): inputs of lengths 1..90 packed
// into one forward equal each alone (ModernBERT's local layers see +-8 positions), and the fast
// ops equal the reference ops.
class RotaryEncoder : public ::testing::TestWithParam<const char*> {};

TEST_P(RotaryEncoder, PackedEqualsAloneAndReferenceOps) {
  RandomModelParams p = random_model_preset(GetParam());
  p.n_threads = 2;
  auto model = model_load_gguf_bytes(random_model_gguf(p));
  std::mt19937 rng(11);
  std::vector<EmbedInput> inputs;
  for (int32_t len : {1, 2, 5, 9, 16, 17, 33, 90}) {
    EmbedInput in;
    for (int32_t t = 0; t < len; ++t) in.ids.push_back(int32_t(rng() % uint32_t(p.n_vocab)));
    if (p.arch == "nomic-bert") in.types.assign(size_t(len), len % 2);
    inputs.push_back(std::move(in));
  }
  Embedder packed(model, {.n_threads = 2, .n_batch = 4096});
  const std::vector<std::vector<float>> all = packed.hidden(inputs);
  EXPECT_EQ(packed.stats().forwards, 1);
  Embedder alone(model, {.n_threads = 2});
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<float> one = alone.hidden({inputs[i]})[0];
    EXPECT_LT(test::embed_max_diff(all[i], one), 1e-5f) << GetParam() << " input " << i;
    for (float x : one) ASSERT_TRUE(std::isfinite(x));
  }
  ScopedEnv env("BRISK_REF_OPS", "1");
  Embedder reference(model, {.n_threads = 2, .n_batch = 4096});
  const std::vector<std::vector<float>> slow = reference.hidden(inputs);
  for (size_t i = 0; i < inputs.size(); ++i) EXPECT_LT(test::embed_max_diff(all[i], slow[i]), 1e-4f) << GetParam() << " input " << i;
}

INSTANTIATE_TEST_SUITE_P(Shapes, RotaryEncoder, ::testing::Values("nomic-tiny", "modernbert-tiny"));

}  // namespace
}  // namespace brisk
