// Encoder-only models for embeddings: BERT against transformers (the shared random-weight
// fixture: last hidden state, mean pooling, L2 normalisation), packing of many inputs into one
// forward (each input's vector equals its vector alone), the reference ops against the fast
// ones, pooling settings from sentence-transformers files and GGUF metadata, Matryoshka
// truncation, and the errors for bad inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "core/error.h"
#include "models/random_model.h"
#include "model_fixtures.h"
#include "runtime/embed_pooling.h"
#include "runtime/embedder.h"
#include "runtime/engine_parts.h"
#include "scoped_env.h"

namespace brisk {
namespace {

nlohmann::json embed_read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::vector<float> embed_floats(const nlohmann::json& j) {
  std::vector<float> out;
  if (j.is_array() && !j.empty() && j[0].is_array()) {
    for (const auto& row : j)
      for (const auto& v : row) out.push_back(v.get<float>());
  } else {
    for (const auto& v : j) out.push_back(v.get<float>());
  }
  return out;
}

float embed_max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0.0f;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

TEST(ModelsEmbed, BertMatchesTransformers) {
  REQUIRE_MODEL("wave2/bert_embed");
  const std::string dir = model_dir("wave2/bert_embed");
  const nlohmann::json ref = embed_read_json(dir + "/ref.json");
  auto model = Model::load({.path = dir + "/hf"});
  EXPECT_EQ(model->tokenizer(), nullptr);
  EmbedInput in{.ids = ref["input_ids"].get<std::vector<int32_t>>(),
                .types = ref["token_type_ids"].get<std::vector<int32_t>>()};
  for (const char* ref_ops : {"0", "1"}) {
    ScopedEnv env("BRISK_REF_OPS", ref_ops);
    Embedder e(model, {.n_threads = 2});
    EXPECT_EQ(e.pooling().mode, PoolingMode::mean);  // no sentence-transformers files: mean, not normalised
    EXPECT_FALSE(e.pooling().normalize);
    const std::vector<std::vector<float>> h = e.hidden({in});
    EXPECT_LT(embed_max_diff(h[0], embed_floats(ref["last_hidden_state"])), 1e-4f) << "BRISK_REF_OPS=" << ref_ops;
    EXPECT_LT(embed_max_diff(e.embed({in})[0], embed_floats(ref["mean_pooled"])), 1e-5f);
    PoolingConfig norm = e.pooling();
    norm.normalize = true;
    EXPECT_LT(embed_max_diff(pool(norm, h[0].data(), int64_t(in.ids.size()), 48),
                             embed_floats(ref["mean_pooled_normalized"])),
              1e-5f);
    PoolingConfig cls = e.pooling();
    cls.mode = PoolingMode::cls;
    EXPECT_LT(embed_max_diff(pool(cls, h[0].data(), int64_t(in.ids.size()), 48), embed_floats(ref["cls"])), 1e-4f);
  }
}

// sentence_bert_config.json's do_lower_case: the text (prompt included) is lowercased before a
// case-sensitive tokenizer sees it, as sentence-transformers' Transformer module does.
TEST(ModelsEmbed, SentenceBertLowerCase) {
  REQUIRE_MODEL("wave2/bert_embed");
  namespace fs = std::filesystem;
  const std::string src = model_dir("wave2/bert_embed") + "/hf";
  const fs::path dir = fs::temp_directory_path() / ("brisk_st_lower_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(fs::path(src) / f, dir / f);
  // A case-sensitive WordPiece vocabulary (no normalizer): "Hello" and "hello" differ.
  std::ofstream(dir / "tokenizer.json") << R"({"version":"1.0","truncation":null,"padding":null,
    "added_tokens":[{"id":0,"content":"[UNK]","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}],
    "normalizer":null,"pre_tokenizer":{"type":"Whitespace"},"post_processor":null,"decoder":null,
    "model":{"type":"WordPiece","unk_token":"[UNK]","continuing_subword_prefix":"##","max_input_chars_per_word":100,
             "vocab":{"[UNK]":0,"hello":1,"Hello":2,"world":3,"World":4,"\u00e9t\u00e9":5,"\u00c9t\u00c9":6}}})";
  auto ids = [&](const char* lower_case, const std::string& text) {
    std::ofstream(dir / "sentence_bert_config.json") << R"({"max_seq_length":20,"do_lower_case":)" << lower_case << "}";
    Embedder e(Model::load({.path = dir.string()}), {.n_threads = 1});
    EXPECT_EQ(e.pooling().lower_case, std::string(lower_case) == "true");
    return e.tokenize(text);
  };
  EXPECT_EQ(ids("false", "Hello World \u00c9t\u00c9"), (std::vector<int32_t>{2, 4, 6}));
  EXPECT_EQ(ids("true", "Hello World \u00c9t\u00c9"), (std::vector<int32_t>{1, 3, 5}));
  std::ofstream(dir / "sentence_bert_config.json") << R"({"do_lower_case":"yes"})";
  EXPECT_THROW(Embedder(Model::load({.path = dir.string()}), {.n_threads = 1}), Error);
  fs::remove_all(dir);
}

// A sentence-transformers folder: the fixture's files beside modules.json, a Pooling config, a
// Dense layer and Normalize; the vector is the pipeline's.
TEST(ModelsEmbed, SentenceTransformersFolder) {
  REQUIRE_MODEL("wave2/bert_embed");
  namespace fs = std::filesystem;
  const std::string src = model_dir("wave2/bert_embed") + "/hf";
  const fs::path dir = fs::temp_directory_path() / ("brisk_st_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "1_Pooling");
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(fs::path(src) / f, dir / f);
  std::ofstream(dir / "modules.json") << R"([{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},
    {"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"},
    {"idx":2,"name":"2","path":"2_Normalize","type":"sentence_transformers.models.Normalize"}])";
  std::ofstream(dir / "1_Pooling" / "config.json") << R"({"word_embedding_dimension":48,"pooling_mode_cls_token":true,
    "pooling_mode_mean_tokens":false,"pooling_mode_max_tokens":false,"pooling_mode_mean_sqrt_len_tokens":false})";
  std::ofstream(dir / "config_sentence_transformers.json") << R"({"prompts":{"query":"query: "},"default_prompt_name":null})";
  std::ofstream(dir / "sentence_bert_config.json") << R"({"max_seq_length":20})";
  const nlohmann::json ref = embed_read_json(model_dir("wave2/bert_embed") + "/ref.json");
  auto model = Model::load({.path = dir.string()});
  Embedder e(model, {.n_threads = 2});
  EXPECT_EQ(e.pooling().mode, PoolingMode::cls);
  EXPECT_TRUE(e.pooling().normalize);
  EXPECT_EQ(e.pooling().prompts.at("query"), "query: ");
  EXPECT_EQ(e.max_tokens(), 20);
  EmbedInput in{.ids = ref["input_ids"].get<std::vector<int32_t>>()};
  std::vector<float> want = embed_floats(ref["cls"]);
  l2_normalize(want.data(), int64_t(want.size()));
  const std::vector<float> got = e.embed({in})[0];
  EXPECT_LT(embed_max_diff(got, want), 1e-5f);
  // Matryoshka: the first 16 values, normalised again.
  std::vector<float> want16(want.begin(), want.begin() + 16);
  l2_normalize(want16.data(), 16);
  EXPECT_LT(embed_max_diff(e.embed({in}, 16)[0], want16), 1e-5f);
  // Too long, ids outside the vocabulary, text without a tokenizer: errors naming the input.
  EmbedInput long_in{.ids = std::vector<int32_t>(21, 5)};
  EXPECT_THROW(
      {
        try {
          e.embed({in, long_in});
        } catch (const Error& err) {
          EXPECT_NE(std::string(err.what()).find("input 1 has 21 tokens"), std::string::npos) << err.what();
          throw;
        }
      },
      Error);
  EXPECT_THROW(e.embed({EmbedInput{.ids = {1, 512}}}), Error);
  EXPECT_THROW(e.embed({EmbedInput{}}), Error);
  EXPECT_THROW(e.tokenize("hello"), Error);
  std::ofstream(dir / "1_Pooling" / "config.json") << R"({"pooling_mode_cls_token":true,"pooling_mode_mean_tokens":true})";
  EXPECT_THROW(Embedder(Model::load({.path = dir.string()}), {.n_threads = 1}), Error);
  fs::remove_all(dir);
}

// Inputs of lengths 1..300 packed into few forwards give each input the vector (and hidden
// states) it gets alone, on a random-weight encoder with 512 positions.
TEST(ModelsEmbed, PackedInputsEqualEachAlone) {
  RandomModelParams p = random_model_preset("bert-tiny");
  p.n_threads = 2;
  auto model = model_load_gguf_bytes(random_model_gguf(p));
  Embedder packed(model, {.n_threads = 2, .n_batch = 16384});
  EXPECT_EQ(packed.pooling().mode, PoolingMode::mean);  // bert.pooling_type 1
  EXPECT_TRUE(packed.pooling().normalize);
  std::mt19937 rng(7);
  std::vector<EmbedInput> inputs;
  for (int32_t len = 1; len <= 300; len += (len < 20 ? 1 : 23)) {
    EmbedInput in;
    for (int32_t t = 0; t < len; ++t) in.ids.push_back(int32_t(rng() % uint32_t(p.n_vocab)));
    in.types.assign(size_t(len), len % 2);
    inputs.push_back(std::move(in));
  }
  inputs.push_back(inputs[3]);  // the same input twice in one batch
  const std::vector<std::vector<float>> all = packed.embed(inputs);
  EXPECT_EQ(packed.stats().forwards, 1);
  Embedder alone(model, {.n_threads = 2});
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<float> one = alone.embed({inputs[i]})[0];
    EXPECT_LT(embed_max_diff(all[i], one), 1e-5f) << "input " << i << " of " << inputs[i].ids.size() << " tokens";
  }
  EXPECT_EQ(all[3], all.back());
  // Split over several forwards (n_batch below the total) the vectors stay the same.
  Embedder chunked(model, {.n_threads = 2, .n_batch = 256});
  const std::vector<std::vector<float>> split = chunked.embed(inputs);
  EXPECT_GT(chunked.stats().forwards, 1);
  for (size_t i = 0; i < inputs.size(); ++i) EXPECT_LT(embed_max_diff(all[i], split[i]), 1e-5f) << i;
}

TEST(ModelsEmbed, PoolingModes) {
  const std::vector<float> h = {1, 2, 3, 4, 5, 6, -1, 0, 7};  // 3 tokens of 3
  PoolingConfig c;
  c.mode = PoolingMode::mean;
  EXPECT_EQ(pool(c, h.data(), 3, 3), (std::vector<float>{4.0f / 3, 7.0f / 3, 16.0f / 3}));
  c.mode = PoolingMode::cls;
  EXPECT_EQ(pool(c, h.data(), 3, 3), (std::vector<float>{1, 2, 3}));
  c.mode = PoolingMode::last;
  EXPECT_EQ(pool(c, h.data(), 3, 3), (std::vector<float>{-1, 0, 7}));
  c.mode = PoolingMode::max;
  EXPECT_EQ(pool(c, h.data(), 3, 3), (std::vector<float>{4, 5, 7}));
  c.mode = PoolingMode::none;
  EXPECT_EQ(pool(c, h.data(), 3, 3), h);
  c.mode = PoolingMode::last;
  c.normalize = true;
  const std::vector<float> n = pool(c, h.data(), 3, 3);
  EXPECT_NEAR(n[0], -1 / std::sqrt(50.0), 1e-7);
  EXPECT_NEAR(n[2], 7 / std::sqrt(50.0), 1e-7);
  c.dense.push_back({.n_in = 3, .n_out = 2, .w = {1, 0, 0, 0, 1, 1}, .b = {0.5f, 0}, .tanh = false});
  c.normalize = false;
  EXPECT_EQ(pool(c, h.data(), 3, 3), (std::vector<float>{-0.5f, 7}));
  EXPECT_EQ(pooled_dim(c, 3), 2);
  EXPECT_EQ(pooling_config_from_gguf(2, "bert.pooling_type").mode, PoolingMode::cls);
  EXPECT_TRUE(pooling_config_from_gguf(4, "bert.pooling_type").rank);
  EXPECT_THROW(pooling_config_from_gguf(9, "bert.pooling_type"), Error);
  EXPECT_THROW(pooling_from_name("sum"), Error);
}

}  // namespace
}  // namespace brisk
