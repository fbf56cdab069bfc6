// Causal decoders as embedding models and yes/no rerankers (runtime/embedder.h):
// - against transformers / sentence-transformers: the project's fixtures embed_qwen3
//   (Qwen3-Embedding: last-token pooling + Normalize, query prompt, left padding in the
//   reference batch) and rerank_qwen3 (Qwen3-Reranker: sigmoid(logit yes - logit no) at the last
//   token), written by tools/make_fixtures/make_embedding_fixtures.py; vectors within 1e-5,
//   scores within 1e-4, also after a GGUF round trip (brisk's converter, llama.cpp's names and
//   pooling_type). They skip, saying so, while tests/fixtures/models/<name>/ is absent.
// - on random-weight GGUFs (always): packed inputs equal each alone, the yes/no score equals
//   the LM's own logit difference, a llama.cpp-style reranker GGUF (the two head rows as
//   cls.output.weight, pooling_type rank) scores the same, and what is not an embedding model
//   is refused, naming why.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "embed_reference.h"
#include "formats/gguf.h"
#include "formats/json_file.h"
#include "models/random_model.h"
#include "quant/recipe.h"
#include "quantize/quantize_gguf.h"
#include "runtime/embedder.h"
#include "runtime/engine_parts.h"
#include "temp_files.h"

namespace brisk {
namespace {

namespace fs = std::filesystem;

// The fixture folder, or "" (the test then skips, naming it).
std::string decoder_fixture(const std::string& name) {
  const fs::path dir = fs::path(BRISK_FIXTURES) / "models" / name;
  return fs::exists(dir / "ref.json") && fs::exists(dir / "hf" / "config.json") ? dir.string() : std::string();
}

#define REQUIRE_DECODER_FIXTURE(dir, name)                                                                  \
  const std::string dir = decoder_fixture(name);                                                            \
  if (dir.empty())                                                                                          \
  GTEST_SKIP() << "tests/fixtures/models/" << name << " is not here yet (written on the GPU machine by "   \
               << "tools/make_fixtures/make_embedding_fixtures.py --only " << name << ")"

std::vector<EmbedInput> decoder_inputs(const nlohmann::json& ref) {
  std::vector<EmbedInput> in;
  for (const auto& ids : ref.at("inputs")) in.push_back({.ids = ids.get<std::vector<int32_t>>()});
  return in;
}

float decoder_sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// The embeddings of every input, packed in one call, against sentence-transformers' encode().
void expect_embeddings(Embedder& e, const nlohmann::json& ref, const std::string& what) {
  const std::vector<EmbedInput> in = decoder_inputs(ref);
  const std::vector<std::vector<float>> got = e.embed(in);
  ASSERT_EQ(got.size(), ref.at("embeddings").size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_LT(test::embed_max_diff(got[i], test::reference_floats(ref["embeddings"][i])), 1e-5f) << what << ": input " << i;
}

TEST(EmbedDecoder, Qwen3EmbeddingMatchesSentenceTransformers) {
  REQUIRE_DECODER_FIXTURE(dir, "embed_qwen3");
  const nlohmann::json ref = read_json_file(dir + "/ref.json");
  auto model = Model::load({.path = dir + "/hf"});
  ASSERT_TRUE(Embedder::supports(*model));
  EXPECT_FALSE(Embedder::yes_no_detected(*model));
  Embedder e(model, {.n_threads = 2});
  EXPECT_EQ(e.pooling().mode, PoolingMode::last);
  EXPECT_TRUE(e.pooling().normalize);
  EXPECT_EQ(e.n_cls(), 0);
  EXPECT_EQ(e.dim(), ref.at("embedding_dim").get<int32_t>());
  EXPECT_EQ(e.max_tokens(), ref.at("max_seq_length").get<int32_t>());
  EXPECT_TRUE(e.pooling().prompts.count("query"));
  // The backbone's last hidden state (final norm included) of input 0 alone.
  const std::vector<EmbedInput> in = decoder_inputs(ref);
  EXPECT_LT(test::embed_max_diff(e.hidden({in[0]})[0], test::reference_floats(ref["last_hidden_state"])), 1e-4f);
  expect_embeddings(e, ref, "safetensors");
  // Pooled before normalisation: the last token's row.
  PoolingConfig raw = e.pooling();
  raw.normalize = false;
  const std::vector<std::vector<float>> h = e.hidden(in);
  for (size_t i = 0; i < in.size(); ++i)
    EXPECT_LT(test::embed_max_diff(pool(raw, h[i].data(), int64_t(in[i].ids.size()), e.dim()),
                               test::reference_floats(ref["pooled"][i])),
              1e-4f)
        << "pooled " << i;
  // Matryoshka: a prefix of the vector, normalised again.
  const std::vector<float> cut = e.embed({in[1]}, 8)[0];
  std::vector<float> want = test::reference_floats(ref["embeddings"][1]);
  want.resize(8);
  l2_normalize(want.data(), 8);
  EXPECT_LT(test::embed_max_diff(cut, want), 1e-5f);
  // GGUF round trip: llama.cpp's names and qwen3.pooling_type 3 (last).
  const std::string gguf = (testing::process_temp_dir() / "embed_qwen3.gguf").string();
  quantize_gguf({.in = dir + "/hf", .out = gguf, .recipe = *quant_recipe_from_name("F32"), .n_threads = 2});
  auto converted = Model::load({.path = gguf});
  ASSERT_TRUE(Embedder::supports(*converted));
  Embedder g(converted, {.n_threads = 2});
  EXPECT_EQ(g.pooling().mode, PoolingMode::last);
  EXPECT_TRUE(g.pooling().normalize);
  expect_embeddings(g, ref, "GGUF");
  fs::remove(gguf);
}

TEST(EmbedDecoder, EmbeddingGemmaMatchesSentenceTransformers) {
  REQUIRE_DECODER_FIXTURE(dir, "embed_gemma");
  const nlohmann::json ref = read_json_file(dir + "/ref.json");
  auto model = Model::load({.path = dir + "/hf"});
  ASSERT_TRUE(Embedder::supports(*model));
  Embedder e(model, {.n_threads = 2});
  EXPECT_EQ(e.pooling().mode, PoolingMode::mean);
  EXPECT_EQ(e.pooling().dense.size(), 2u);
  EXPECT_TRUE(e.pooling().normalize);
  EXPECT_EQ(e.dim(), ref.at("embedding_dim").get<int32_t>());
  EXPECT_TRUE(e.pooling().prompts.count("query") && e.pooling().prompts.count("document"));
  // Bidirectional layers (the sliding one within 8 positions either side of a 70-token input).
  const std::vector<EmbedInput> in = decoder_inputs(ref);
  EXPECT_LT(test::embed_max_diff(e.hidden({in[0]})[0], test::reference_floats(ref["last_hidden_state"])), 1e-4f);
  const std::vector<std::vector<float>> h = e.hidden(in);
  PoolingConfig mean_only;
  for (size_t i = 0; i < in.size(); ++i)
    EXPECT_LT(test::embed_max_diff(pool(mean_only, h[i].data(), int64_t(in[i].ids.size()), int32_t(h[i].size() / in[i].ids.size())),
                               test::reference_floats(ref["pooled"][i])),
              1e-4f)
        << "pooled " << i;
  expect_embeddings(e, ref, "safetensors");
  // GGUF round trip as llama.cpp's gemma-embedding: the layer period, dense_2 / dense_3, mean pooling.
  const std::string gguf = (testing::process_temp_dir() / "embed_gemma.gguf").string();
  quantize_gguf({.in = dir + "/hf", .out = gguf, .recipe = *quant_recipe_from_name("F32"), .n_threads = 2});
  auto converted = Model::load({.path = gguf});
  EXPECT_EQ(converted->info().architecture, "gemma-embedding");
  ASSERT_TRUE(Embedder::supports(*converted));
  Embedder g(converted, {.n_threads = 2});
  EXPECT_EQ(g.pooling().mode, PoolingMode::mean);
  EXPECT_EQ(g.pooling().dense.size(), 2u);
  EXPECT_EQ(g.dim(), e.dim());
  // GGUF readers normalise (llama.cpp's server does): the fixture's pipeline ends with Normalize.
  expect_embeddings(g, ref, "GGUF");
  fs::remove(gguf);
}

TEST(EmbedDecoder, Qwen3RerankerMatchesTransformers) {
  REQUIRE_DECODER_FIXTURE(dir, "rerank_qwen3");
  const nlohmann::json ref = read_json_file(dir + "/ref.json");
  const int32_t yes = ref.at("yes_id").get<int32_t>(), no = ref.at("no_id").get<int32_t>();
  const std::vector<EmbedInput> in = decoder_inputs(ref);
  const std::vector<float> want_raw = test::reference_floats(ref["yes_minus_no"]), want = test::reference_floats(ref["scores"]);
  auto check = [&](const std::shared_ptr<const Model>& model, const std::string& what) {
    Embedder e(model, {.n_threads = 2, .n_batch = 8192, .yes_no = YesNoMode::on, .yes_id = yes, .no_id = no});
    ASSERT_TRUE(e.yes_no()) << what;
    ASSERT_EQ(e.n_cls(), 1) << what;
    const std::vector<std::vector<float>> s = e.classify(in);
    for (size_t i = 0; i < in.size(); ++i) {
      EXPECT_NEAR(s[i][0], want_raw[i], 1e-4f) << what << ": pair " << i;
      EXPECT_NEAR(decoder_sigmoid(s[i][0]), want[i], 1e-4f) << what << ": pair " << i;
    }
  };
  auto model = Model::load({.path = dir + "/hf"});
  EXPECT_FALSE(Embedder::supports(*model));  // a causal LM in a folder named hf: a chat model unless told
  check(model, "safetensors");
  // The LM itself: its last logits after input 0.
  auto ctx = Context::create(model, {.n_ctx = 256, .n_seq_max = 1, .n_batch = 512, .kv_type = QuantType::F32,
                                     .n_threads = 2});
  std::vector<BatchToken> batch;
  for (size_t t = 0; t < in[0].ids.size(); ++t)
    batch.push_back({.token = in[0].ids[t], .pos = int32_t(t), .seq = 0, .want_logits = t + 1 == in[0].ids.size()});
  ctx->decode(batch);
  EXPECT_LT(test::embed_max_diff(std::vector<float>(ctx->logits(0), ctx->logits(0) + ctx->n_vocab()),
                             test::reference_floats(ref["last_logits"])),
            1e-4f);
  // Recognised by its folder's name, as llama.cpp's converter recognises it.
  const fs::path named = testing::process_temp_dir() / "tiny-Qwen3-Reranker";
  fs::create_directories(named);
  for (const auto& f : fs::directory_iterator(dir + "/hf")) fs::copy_file(f.path(), named / f.path().filename(),
                                                                         fs::copy_options::overwrite_existing);
  EXPECT_TRUE(Embedder::yes_no_detected(*Model::load({.path = named.string()})));
  fs::remove_all(named);
  // In the Hub cache the folder is a revision; the repository's name says it.
  const fs::path cached = testing::process_temp_dir() / "models--org--Tiny-Reranker" / "snapshots" / "0123abcd";
  const fs::path plain = testing::process_temp_dir() / "models--org--Tiny-Chat" / "snapshots" / "0123abcd";
  for (const fs::path& d : {cached, plain}) {
    fs::create_directories(d);
    for (const auto& f : fs::directory_iterator(dir + "/hf"))
      fs::copy_file(f.path(), d / f.path().filename(), fs::copy_options::overwrite_existing);
  }
  EXPECT_TRUE(Embedder::yes_no_detected(*Model::load({.path = cached.string()})));
  EXPECT_FALSE(Embedder::yes_no_detected(*Model::load({.path = plain.string()})));
  fs::remove_all(cached.parent_path().parent_path());
  fs::remove_all(plain.parent_path().parent_path());
  // GGUF round trip of the causal LM (its LM head kept): the same scores.
  const std::string gguf = (testing::process_temp_dir() / "rerank_qwen3.gguf").string();
  quantize_gguf({.in = dir + "/hf", .out = gguf, .recipe = *quant_recipe_from_name("F32"), .n_threads = 2});
  check(Model::load({.path = gguf}), "GGUF");
  fs::remove(gguf);
}

RandomModelParams decoder_tiny(int32_t pooling_type) {
  RandomModelParams p;
  p.arch = "qwen3";
  p.n_vocab = 256;
  p.n_embd = 64;
  p.n_layer = 2;
  p.n_head = 4;
  p.n_head_kv = 2;
  p.head_dim = 16;
  p.n_ff = 128;
  p.n_ctx_train = 512;
  p.pooling_type = pooling_type;
  p.n_threads = 2;
  return p;
}

std::vector<EmbedInput> decoder_random_inputs(int32_t n_vocab) {
  std::mt19937 rng(11);
  std::vector<EmbedInput> inputs;
  for (int32_t len = 1; len <= 300; len += (len < 12 ? 1 : 37)) {
    EmbedInput in;
    for (int32_t t = 0; t < len; ++t) in.ids.push_back(int32_t(rng() % uint32_t(n_vocab)));
    inputs.push_back(std::move(in));
  }
  return inputs;
}

TEST(EmbedDecoder, PackedInputsEqualEachAlone) {
  auto model = model_load_gguf_bytes(random_model_gguf(decoder_tiny(3)));  // qwen3.pooling_type 3: last token
  ASSERT_TRUE(Embedder::supports(*model));
  Embedder packed(model, {.n_threads = 2, .n_batch = 16384});
  EXPECT_EQ(packed.pooling().mode, PoolingMode::last);
  EXPECT_TRUE(packed.pooling().normalize);
  std::vector<EmbedInput> inputs = decoder_random_inputs(256);
  inputs.push_back(inputs[4]);  // the same input twice in one call
  const std::vector<std::vector<float>> all = packed.embed(inputs);
  EXPECT_EQ(packed.stats().forwards, 1);
  Embedder alone(model, {.n_threads = 2});
  for (size_t i = 0; i < inputs.size(); ++i)
    EXPECT_LT(test::embed_max_diff(all[i], alone.embed({inputs[i]})[0]), 1e-5f) << "input of " << inputs[i].ids.size();
  EXPECT_EQ(all[4], all.back());
  // Calls of a few inputs each (n_batch below the total) give the same vectors, and nothing of
  // one call stays in the cache for the next.
  Embedder chunked(model, {.n_threads = 2, .n_batch = 200});
  const std::vector<std::vector<float>> split = chunked.embed(inputs);
  EXPECT_GT(chunked.stats().forwards, 2);
  for (size_t i = 0; i < inputs.size(); ++i) EXPECT_LT(test::embed_max_diff(all[i], split[i]), 1e-5f) << i;
  // The hidden states are the decoder's own final-normed rows.
  auto ctx = Context::create(model, {.n_ctx = 512, .n_seq_max = 1, .n_batch = 512, .kv_type = QuantType::F32, .n_threads = 2});
  ASSERT_TRUE(ctx->set_keep_hidden(true));
  std::vector<BatchToken> batch;
  for (size_t t = 0; t < inputs[15].ids.size(); ++t) batch.push_back({.token = inputs[15].ids[t], .pos = int32_t(t)});
  ctx->decode(batch);
  const std::vector<float> h = packed.hidden({inputs[15]})[0];
  const int64_t n = int64_t(batch.size());
  EXPECT_LT(test::embed_max_diff(h, std::vector<float>(ctx->hidden(0), ctx->hidden(0) + n * 64)), 1e-5f);
}

// Scores as logit(yes) - logit(no) of the model's own LM head, from a GGUF with the whole head
// and from one laid out as llama.cpp's converter writes a reranker (cls.output.weight: the yes
// and no rows; pooling_type 4).
TEST(EmbedDecoder, YesNoScoreIsTheLogitDifference) {
  RandomModelParams p = decoder_tiny(-1);
  p.tie_embeddings = false;
  auto lm = model_load_gguf_bytes(random_model_gguf(p));
  EXPECT_FALSE(Embedder::supports(*lm));  // a chat model
  EXPECT_FALSE(Embedder::yes_no_detected(*lm));
  EXPECT_TRUE(Embedder::supports(*lm, YesNoMode::on));
  const int32_t yes = 17, no = 42;
  Embedder e(lm, {.n_threads = 2, .n_batch = 8192, .yes_no = YesNoMode::on, .yes_id = yes, .no_id = no});
  std::vector<EmbedInput> inputs = decoder_random_inputs(256);
  inputs.resize(12);
  const std::vector<std::vector<float>> s = e.classify(inputs);
  auto ctx = Context::create(lm, {.n_ctx = 512, .n_seq_max = 1, .n_batch = 512, .kv_type = QuantType::F32, .n_threads = 2});
  for (size_t i = 0; i < inputs.size(); ++i) {
    ctx->seq_truncate(0, 0);
    std::vector<BatchToken> batch;
    for (size_t t = 0; t < inputs[i].ids.size(); ++t)
      batch.push_back({.token = inputs[i].ids[t], .pos = int32_t(t), .seq = 0,
                       .want_logits = t + 1 == inputs[i].ids.size()});
    ctx->decode(batch);
    EXPECT_NEAR(s[i][0], ctx->logits(0)[yes] - ctx->logits(0)[no], 1e-4f) << "input " << i;
  }
  // llama.cpp's reranker layout: output.weight replaced by its yes and no rows, pooling_type 4,
  // the rows named by classifier.output_labels (in either order).
  const gguf::File src = gguf::File::parse(random_model_gguf(p));
  auto reranker_gguf = [&](const std::vector<std::string>& labels, const std::vector<int32_t>& row_ids) {
    gguf::Writer w;
    for (const auto& [key, value] : src.metadata()) w.set(key, value);
    w.set("qwen3.pooling_type", gguf::Value::from_u32(4));
    w.set("qwen3.classifier.output_labels", gguf::Value::from_strings(labels));
    std::vector<float> head_rows;
    for (const gguf::TensorInfo& t : src.tensors()) {
      if (t.name != "output.weight") {
        w.add_tensor(t.name, t.type, t.ne, t.data, t.n_bytes);
        continue;
      }
      EXPECT_EQ(t.type, QuantType::F32);
      const float* rows = reinterpret_cast<const float*>(t.data);
      for (int32_t id : row_ids)
        head_rows.insert(head_rows.end(), rows + int64_t(id) * p.n_embd, rows + int64_t(id + 1) * p.n_embd);
    }
    w.add_tensor("cls.output.weight", QuantType::F32, {uint64_t(p.n_embd), uint64_t(row_ids.size())}, head_rows.data(),
                 head_rows.size() * 4);
    return model_load_gguf_bytes(w.write_to_memory("reranker.gguf"));
  };
  for (const bool swapped : {false, true}) {
    auto reranker = swapped ? reranker_gguf({"no", "yes"}, {no, yes}) : reranker_gguf({"yes", "no"}, {yes, no});
    EXPECT_TRUE(Embedder::yes_no_detected(*reranker));
    ASSERT_TRUE(Embedder::supports(*reranker));
    Embedder r(reranker, {.n_threads = 2});
    ASSERT_TRUE(r.yes_no());
    const std::vector<std::vector<float>> s2 = r.classify(inputs);
    for (size_t i = 0; i < inputs.size(); ++i) EXPECT_NEAR(s2[i][0], s[i][0], 1e-5f) << "input " << i << " swapped " << swapped;
  }
  // Labels without "yes", or fewer rows than labels: errors naming the labels.
  for (const auto& [labels, rows] : {std::pair<std::vector<std::string>, std::vector<int32_t>>{{"true", "false"}, {yes, no}},
                                     {{"yes", "no", "maybe"}, {yes, no}}}) {
    try {
      Embedder r(reranker_gguf(labels, rows), {.n_threads = 2});
      ADD_FAILURE() << "labels " << labels[0] << " accepted";
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find(labels[0]), std::string::npos) << err.what();
    }
  }
}

TEST(EmbedDecoder, RefusesWhatIsNotAnEmbeddingModel) {
  auto chat = model_load_gguf_bytes(random_model_gguf(decoder_tiny(-1)));
  EXPECT_FALSE(Embedder::supports(*chat));
  try {
    Embedder e(chat, {.n_threads = 2});
    ADD_FAILURE() << "a chat model became an embedder";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("not an embedding model"), std::string::npos) << err.what();
  }
  // A yes/no reranker without a tokenizer needs the two ids.
  try {
    Embedder e(chat, {.n_threads = 2, .n_batch = 8192, .yes_no = YesNoMode::on});
    ADD_FAILURE() << "no yes / no ids";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("yes"), std::string::npos) << err.what();
  }
  auto emb = model_load_gguf_bytes(random_model_gguf(decoder_tiny(3)));
  Embedder e(emb, {.n_threads = 2});
  EXPECT_THROW(e.embed({{.ids = {1, 2, 999}}}), Error);  // outside the vocabulary
  EXPECT_THROW(e.embed({{.ids = {}}}), Error);
  EXPECT_THROW(e.classify({{.ids = {1, 2}}}), Error);    // no yes/no head
}

}  // namespace
}  // namespace brisk
