// Tokenizer building blocks on small hand-made tokenizer.json / GGUF files: BPE merge order,
// byte fallback and unknowns, split behaviours, Unigram, WordPiece, Metaspace, added-token
// flags, post-processors, streaming decode of split characters, the fast paths against their
// references, and clear errors for malformed files.
#include <gtest/gtest.h>

#include "required_assets.h"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/flags.h"
#include "formats/gguf.h"
#include "temp_files.h"
#include "test_tokenizer_common.h"
#include "text/pretokenize.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

namespace fs = std::filesystem;
using brisk::Tokenizer;
using json = nlohmann::json;
using namespace brisk::testing;

namespace {

// Writes tokenizer.json (and optionally tokenizer_config.json) into a fresh folder.
std::string write_dir(const std::string& tokenizer_json, const std::string& config = "") {
  static std::atomic<int> counter{0};
  const fs::path dir = brisk::testing::process_temp_dir() / ("tok_" + std::to_string(counter++));
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << tokenizer_json;
  if (!config.empty()) std::ofstream(dir / "tokenizer_config.json") << config;
  return dir.string();
}

std::unique_ptr<Tokenizer> load(const json& j, const json& config = nullptr) {
  return Tokenizer::from_hf_dir(write_dir(j.dump(), config.is_null() ? "" : config.dump()));
}

void expect_error(const std::string& tokenizer_json, const std::string& needle) {
  const std::string dir = write_dir(tokenizer_json);
  try {
    Tokenizer::from_hf_dir(dir);
    ADD_FAILURE() << "no error; expected one containing \"" << needle << "\"";
  } catch (const brisk::Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tokenizer.json"), std::string::npos) << e.what();
  }
}

json bpe_json(json vocab, json merges, json extra_model = json::object()) {
  json model = {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}};
  for (auto& [k, v] : extra_model.items()) model[k] = v;
  return {{"model", model}, {"added_tokens", json::array()}, {"normalizer", nullptr},
          {"pre_tokenizer", nullptr}, {"post_processor", nullptr}, {"decoder", nullptr}};
}

std::vector<std::string> pieces(const std::vector<brisk::text::PreTokenizerStep>& steps, const std::string& s) {
  std::vector<brisk::text::Piece> p{{s, true}};
  brisk::text::pre_tokenize(steps, p);
  std::vector<std::string> out;
  for (auto& x : p) out.push_back(x.text);
  return out;
}

}  // namespace

TEST(TokenizerUnits, BpeMergesFollowRank) {
  const json vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}};
  // "b c" first: a + bc -> abc.
  auto t1 = load(bpe_json(vocab, {"b c", "a b", "a bc"}));
  EXPECT_EQ(t1->encode("abc"), (std::vector<int32_t>{5}));
  EXPECT_EQ(t1->encode("ab"), (std::vector<int32_t>{3}));
  // "a b" first and no "ab c": stays ab + c.
  auto t2 = load(bpe_json(vocab, json::array({json::array({"a", "b"}), json::array({"b", "c"})})));
  EXPECT_EQ(t2->encode("abc"), (std::vector<int32_t>{3, 2}));
  EXPECT_EQ(t2->decode({3, 2}), "ab c");  // no decoder: tokens joined by spaces
}

TEST(TokenizerUnits, BpeByteFallbackAndUnknown) {
  json vocab = {{"<unk>", 0}, {"a", 1}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab[name] = 2 + b;
  }
  json j = bpe_json(vocab, json::array(), {{"byte_fallback", true}, {"unk_token", "<unk>"}});
  j["decoder"] = {{"type", "Sequence"}, {"decoders", {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}};
  auto t = load(j);
  // U+00E9 = C3 A9 -> two byte tokens.
  EXPECT_EQ(t->encode("a\xC3\xA9"), (std::vector<int32_t>{1, 2 + 0xC3, 2 + 0xA9}));
  EXPECT_EQ(t->decode(t->encode("a\xC3\xA9")), "a\xC3\xA9");
  // An incomplete byte run decodes to one U+FFFD per byte; streaming holds it back.
  EXPECT_EQ(t->decode({2 + 0xC3}), "\xEF\xBF\xBD");
  brisk::StreamDecoder dec(*t);
  EXPECT_EQ(dec.push(2 + 0xF0), "");
  EXPECT_EQ(dec.push(2 + 0x9F), "");
  EXPECT_EQ(dec.push(2 + 0xA6), "");
  EXPECT_EQ(dec.push(2 + 0x99), "\xF0\x9F\xA6\x99");
  EXPECT_EQ(dec.push(2 + 0xF0), "");
  EXPECT_EQ(dec.flush(), "\xEF\xBF\xBD");
  // A sequence broken by a later token is replaced, never emitted as raw bytes.
  EXPECT_EQ(dec.push(2 + 0xE4), "");
  EXPECT_EQ(dec.push(1), "\xEF\xBF\xBD" "a");

  // Without byte fallback, unknown characters become <unk>; fuse_unk joins runs.
  auto u = load(bpe_json({{"<unk>", 0}, {"a", 1}}, json::array(), {{"unk_token", "<unk>"}, {"fuse_unk", true}}));
  EXPECT_EQ(u->encode("axyza"), (std::vector<int32_t>{1, 0, 1}));
  auto v = load(bpe_json({{"<unk>", 0}, {"a", 1}}, json::array(), {{"unk_token", "<unk>"}}));
  EXPECT_EQ(v->encode("axya"), (std::vector<int32_t>{1, 0, 0, 1}));
}

TEST(TokenizerUnits, SplitBehaviours) {
  using brisk::text::PreTokenizerStep;
  using B = brisk::text::SplitBehavior;
  auto step = [](B b) {
    PreTokenizerStep s;
    s.kind = PreTokenizerStep::Kind::split;
    s.literal = "-";
    s.behavior = b;
    return s;
  };
  using V = std::vector<std::string>;
  const std::string s = "the-final--countdown";
  EXPECT_EQ(pieces({step(B::removed)}, s), (V{"the", "final", "countdown"}));
  EXPECT_EQ(pieces({step(B::isolated)}, s), (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(pieces({step(B::merged_with_previous)}, s), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(pieces({step(B::merged_with_next)}, s), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(pieces({step(B::contiguous)}, s), (V{"the", "-", "final", "--", "countdown"}));
  PreTokenizerStep inv = step(B::removed);
  inv.invert = true;
  EXPECT_EQ(pieces({inv}, s), (V{"-", "-", "-"}));
  PreTokenizerStep digits;
  digits.kind = PreTokenizerStep::Kind::digits;
  digits.individual_digits = true;
  EXPECT_EQ(pieces({digits}, "ab123c"), (V{"ab", "1", "2", "3", "c"}));
  digits.individual_digits = false;
  EXPECT_EQ(pieces({digits}, "ab123c"), (V{"ab", "123", "c"}));
  PreTokenizerStep bert;
  bert.kind = PreTokenizerStep::Kind::bert;
  EXPECT_EQ(pieces({bert}, "Hello, world!  ok"), (V{"Hello", ",", "world", "!", "ok"}));
}

TEST(TokenizerUnits, FastNfcMatchesUtf8proc) {
  using brisk::text::NormalForm;
  std::vector<std::string> inputs = {"", "plain ascii", "e\xCC\x81", "caf\xC3\xA9", "A\xCC\x8A",
                                     "\xE2\x84\xAB", "\xE3\x81\x8B\xE3\x82\x99", "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8",
                                     "\xEA\xB0\x80\xE1\x86\xA8", "x\xCC\xA3\xCC\x87y", "\xF0\x9F\xA6\x99\xCC\x81"};
  const std::string fixtures = BRISK_FIXTURES;
  const auto corpus = json::parse(read_file(fixtures + "/tokenizer/corpus.json"));
  for (const auto& s : corpus.at("strings")) inputs.push_back(s.get<std::string>());
  for (const auto& s : inputs)
    EXPECT_EQ(brisk::text::unicode_normalize(s, NormalForm::nfc),
              brisk::text::unicode_normalize_reference(s, NormalForm::nfc)) << s;
}

TEST(TokenizerUnits, BpeCacheMatchesUncached) {
  const std::string dir = shared_data() + "/models/qwen3/hf";
  if (!fs::exists(dir)) BRISK_SKIP_MISSING_ASSET() << "missing " << dir << " (shared data)";
  const auto tok = Tokenizer::from_hf_dir(dir);
  const auto corpus = json::parse(read_file(std::string(BRISK_FIXTURES) + "/tokenizer/corpus.json"));
  std::vector<std::vector<int32_t>> cached;
  for (int pass = 0; pass < 2; ++pass)  // the second pass hits the cache
    for (const auto& s : corpus.at("strings")) cached.push_back(tok->encode(s.get<std::string>()));
  setenv("BRISK_NO_TOKENIZER_CACHE", "1", 1);
  brisk::flags_reload();
  size_t k = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& s : corpus.at("strings")) EXPECT_EQ(tok->encode(s.get<std::string>()), cached[k++]);
  unsetenv("BRISK_NO_TOKENIZER_CACHE");
  brisk::flags_reload();
}

TEST(TokenizerUnits, Unigram) {
  json j = {{"model", {{"type", "Unigram"}, {"unk_id", 0}, {"byte_fallback", false},
                       {"vocab", json::array({json::array({"<unk>", 0.0}), json::array({"a", -1.0}),
                                              json::array({"b", -2.0}), json::array({"ab", -1.5}),
                                              json::array({"\xE2\x96\x81", -1.0}),
                                              json::array({"\xE2\x96\x81" "a", -0.5})})}}},
            {"normalizer", nullptr},
            {"pre_tokenizer", {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}, {"split", true}}},
            {"decoder", {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}}}};
  auto t = load(j);
  // "ab" -> ▁a + b (-2.5) beats ▁ + ab (-2.5 tie: first found wins) and ▁ + a + b (-4).
  const auto ids = t->encode("ab");
  EXPECT_EQ(t->decode(ids), "ab");
  EXPECT_EQ(stream_decode(*t, t->encode("ab a")), "ab a");
  EXPECT_EQ(t->encode("a cc"), (std::vector<int32_t>{5, 4, 0}));  // unknown run fused into one <unk>
  EXPECT_EQ(t->token_text(5), "\xE2\x96\x81" "a");
}

TEST(TokenizerUnits, WordPieceBert) {
  json j = {
      {"normalizer", {{"type", "BertNormalizer"}, {"clean_text", true}, {"handle_chinese_chars", true},
                      {"strip_accents", nullptr}, {"lowercase", true}}},
      {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
      {"post_processor", {{"type", "BertProcessing"}, {"sep", {"[SEP]", 3}}, {"cls", {"[CLS]", 2}}}},
      {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
      {"added_tokens", {{{"id", 2}, {"content", "[CLS]"}, {"special", true}},
                        {{"id", 3}, {"content", "[SEP]"}, {"special", true}}}},
      {"model", {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"continuing_subword_prefix", "##"},
                 {"max_input_chars_per_word", 100},
                 {"vocab", {{"[PAD]", 0}, {"[UNK]", 1}, {"[CLS]", 2}, {"[SEP]", 3}, {"hel", 4}, {"##lo", 5},
                            {"world", 6}, {"!", 7}, {"cafe", 8}}}}}};
  auto t = load(j);
  EXPECT_EQ(t->encode("Hello WORLD!"), (std::vector<int32_t>{4, 5, 6, 7}));
  EXPECT_EQ(t->encode("Café xyz", {.add_special = true}), (std::vector<int32_t>{2, 8, 1, 3}));
  EXPECT_EQ(t->decode({4, 5, 6, 7}), "hello world!");
  EXPECT_EQ(t->decode({2, 4, 5, 3}, true), "hello");
}

TEST(TokenizerUnits, AddedTokenFlags) {
  json j = bpe_json({{"a", 0}, {"b", 1}, {" ", 2}}, json::array());
  j["added_tokens"] = {
      {{"id", 3}, {"content", "<l>"}, {"lstrip", true}, {"special", true}},
      {{"id", 4}, {"content", "<r>"}, {"rstrip", true}, {"special", true}},
      {{"id", 5}, {"content", "ab"}, {"single_word", true}, {"special", false}, {"normalized", false}}};
  auto t = load(j);
  const brisk::EncodeOptions p{.parse_special = true};
  EXPECT_EQ(t->encode("a <l>b", p), (std::vector<int32_t>{0, 3, 1}));
  EXPECT_EQ(t->encode("a<r> b", p), (std::vector<int32_t>{0, 4, 1}));
  EXPECT_EQ(t->encode("a ab b", p), (std::vector<int32_t>{0, 2, 5, 2, 1}));
  EXPECT_EQ(t->encode("aab", p), (std::vector<int32_t>{0, 0, 1}));  // inside a word: not matched
  // Without parse_special, special tokens are plain text; non-special added tokens still match.
  EXPECT_EQ(t->encode("<l>"), (std::vector<int32_t>{}));  // '<', 'l', '>' are not in the vocab
  EXPECT_EQ(t->encode("ab"), (std::vector<int32_t>{5}));
  EXPECT_TRUE(t->is_special(3));
  EXPECT_FALSE(t->is_special(5));
}

TEST(TokenizerUnits, TemplatePostProcessorAndConfig) {
  json j = bpe_json({{"a", 0}, {"<s>", 1}, {"</s>", 2}, {"<|eot|>", 3}}, json::array());
  j["added_tokens"] = {{{"id", 1}, {"content", "<s>"}, {"special", true}},
                       {{"id", 2}, {"content", "</s>"}, {"special", true}},
                       {{"id", 3}, {"content", "<|eot_id|>"}, {"special", true}}};
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                     {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                     {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}}},
                         {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}},
                                             {"</s>", {{"id", "</s>"}, {"ids", {2}}, {"tokens", {"</s>"}}}}}}};
  auto t = load(j, {{"bos_token", "<s>"}, {"eos_token", {{"content", "</s>"}}}});
  EXPECT_EQ(t->encode("a", {.add_special = true}), (std::vector<int32_t>{1, 0, 2}));
  EXPECT_EQ(t->bos_id(), 1);
  EXPECT_EQ(t->eos_id(), 2);
  const auto eog = t->end_of_generation_ids();
  EXPECT_EQ(eog, (std::vector<int32_t>{2, 3}));
  // Without a template, add_bos_token from tokenizer_config.json decides.
  j["post_processor"] = nullptr;
  auto u = load(j, {{"bos_token", "<s>"}, {"add_bos_token", true}});
  EXPECT_EQ(u->encode("a", {.add_special = true}), (std::vector<int32_t>{1, 0}));
}

TEST(TokenizerUnits, MalformedTokenizerJson) {
  const json ok = bpe_json({{"a", 0}, {"b", 1}, {"ab", 2}}, {"a b"});
  EXPECT_NO_THROW(Tokenizer::from_hf_dir(write_dir(ok.dump())));
  expect_error("{not json", "invalid JSON");
  expect_error(json::object().dump(), "missing field \"model\"");
  expect_error(bpe_json({{"a", 0}}, {"a zz"}).dump(), "not in the vocab");
  expect_error(bpe_json({{"a", 0}}, {"nospace"}).dump(), "model.merges[0]");
  expect_error(bpe_json({{"a", -5}}, json::array()).dump(), "out of range");
  expect_error(bpe_json({{"a", 1ll << 40}}, json::array()).dump(), "out of range");
  expect_error(bpe_json({{"a", "x"}}, json::array()).dump(), "expected an integer");
  json j = ok;
  j["normalizer"] = {{"type", "Precompiled"}};
  expect_error(j.dump(), "precompiled_charsmap");
  j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}};
  expect_error(j.dump(), "normalizer.precompiled_charsmap");
  j = ok;
  j["normalizer"] = {{"type", "NoSuchNormalizer"}};
  expect_error(j.dump(), "unsupported normalizer");
  j = ok;
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  expect_error(j.dump(), "does not compile");
  j = ok;
  j["added_tokens"] = {{{"id", -1}, {"content", "<x>"}}};
  expect_error(j.dump(), "out of range");
  j = ok;
  j["post_processor"] = {{"type", "TemplateProcessing"}, {"single", {{{"SpecialToken", {{"id", "<s>"}}}}}},
                         {"special_tokens", json::object()}};
  expect_error(j.dump(), "not declared");
  j = ok;
  j["post_processor"] = {{"type", "BertProcessing"}, {"sep", {"x", 99}}, {"cls", {"y", 0}}};
  expect_error(j.dump(), "out of range");
  j = ok;
  j["model"]["type"] = "Nope";
  expect_error(j.dump(), "unsupported model type");
  EXPECT_THROW(Tokenizer::from_hf_dir("/nonexistent/dir"), brisk::Error);
}

TEST(TokenizerUnits, MalformedGguf) {
  const std::string base = (brisk::testing::process_temp_dir() / "tok").string();
  using brisk::gguf::Value;
  auto write = [&](const std::string& name, auto fill) {
    brisk::gguf::Writer w;
    w.set("general.architecture", Value::from_string("llama"));
    fill(w);
    const std::string path = base + "_" + name + ".gguf";
    w.write(path);
    return path;
  };
  auto expect_gguf_error = [&](const std::string& path, const std::string& needle) {
    try {
      Tokenizer::from_gguf(brisk::gguf::File::open(path));
      ADD_FAILURE() << path << ": no error; expected \"" << needle << "\"";
    } catch (const brisk::Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const std::vector<std::string> toks = {"a", "b", "ab"};
  expect_gguf_error(write("nomodel", [](auto&) {}), "tokenizer.ggml.model");
  expect_gguf_error(write("notokens", [](auto& w) { w.set("tokenizer.ggml.model", Value::from_string("gpt2")); }),
                    "tokenizer.ggml.tokens");
  expect_gguf_error(write("badtypes", [&](auto& w) {
                      w.set("tokenizer.ggml.model", Value::from_string("gpt2"));
                      w.set("tokenizer.ggml.tokens", Value::from_strings(toks));
                      w.set("tokenizer.ggml.token_type", Value::from_i32s({1, 1}));
                    }),
                    "token_type");
  expect_gguf_error(write("badmerge", [&](auto& w) {
                      w.set("tokenizer.ggml.model", Value::from_string("gpt2"));
                      w.set("tokenizer.ggml.tokens", Value::from_strings(toks));
                      w.set("tokenizer.ggml.merges", Value::from_strings({"a c"}));
                    }),
                    "not in the vocabulary");
  expect_gguf_error(write("badeos", [&](auto& w) {
                      w.set("tokenizer.ggml.model", Value::from_string("gpt2"));
                      w.set("tokenizer.ggml.tokens", Value::from_strings(toks));
                      w.set("tokenizer.ggml.merges", Value::from_strings({"a b"}));
                      w.set("tokenizer.ggml.eos_token_id", Value::from_u32(7));
                    }),
                    "out of range");
  expect_gguf_error(write("badpre", [&](auto& w) {
                      w.set("tokenizer.ggml.model", Value::from_string("gpt2"));
                      w.set("tokenizer.ggml.pre", Value::from_string("no-such-pre"));
                      w.set("tokenizer.ggml.tokens", Value::from_strings(toks));
                      w.set("tokenizer.ggml.merges", Value::from_strings({"a b"}));
                    }),
                    "no-such-pre");
  expect_gguf_error(write("badkind", [&](auto& w) {
                      w.set("tokenizer.ggml.model", Value::from_string("rwkv"));
                      w.set("tokenizer.ggml.tokens", Value::from_strings(toks));
                    }),
                    "not supported");
  // A well-formed minimal byte-level vocabulary loads and encodes.
  const std::string good = write("good", [&](auto& w) {
    w.set("tokenizer.ggml.model", Value::from_string("gpt2"));
    w.set("tokenizer.ggml.pre", Value::from_string("gpt-2"));
    w.set("tokenizer.ggml.tokens", Value::from_strings(toks));
    w.set("tokenizer.ggml.merges", Value::from_strings({"a b"}));
  });
  const auto t = Tokenizer::from_gguf(brisk::gguf::File::open(good));
  EXPECT_EQ(t->encode("abab"), (std::vector<int32_t>{2, 2}));
  EXPECT_EQ(t->decode({2, 0}), "aba");
}

// One tokenizer shared by threads (piece cache, per-thread regex state) gives the same ids.
TEST(TokenizerUnits, ConcurrentEncodeMatchesSerial) {
  const std::string dir = shared_data() + "/models/qwen3/hf";
  if (!fs::exists(dir)) BRISK_SKIP_MISSING_ASSET() << "missing " << dir << " (shared data)";
  const auto tok = Tokenizer::from_hf_dir(dir);
  const auto corpus = json::parse(read_file(std::string(BRISK_FIXTURES) + "/tokenizer/corpus.json"));
  std::vector<std::string> strings;
  for (const auto& s : corpus.at("strings")) strings.push_back(s.get<std::string>());
  std::vector<std::vector<int32_t>> serial;
  for (const auto& s : strings) serial.push_back(tok->encode(s));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (size_t i = 0; i < strings.size(); ++i) {
        const size_t k = (i * 7 + static_cast<size_t>(t) * 13) % strings.size();
        if (tok->encode(strings[k]) != serial[k]) ++mismatches;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// Random bytes (often invalid UTF-8) and random ids: encode/decode never fail or crash, the
// streaming decoder's output is always valid UTF-8, and ids are always in range.
TEST(TokenizerUnits, RandomInputIsHandled) {
  std::vector<std::string> paths = {shared_data() + "/models/qwen3/hf",
                                    shared_data() + "/vocab/ggml-vocab-llama-spm.gguf",
                                    shared_data() + "/vocab/ggml-vocab-bert-bge.gguf"};
  std::mt19937 rng(7);
  int loaded = 0;
  for (const auto& path : paths) {
    if (!fs::exists(path)) continue;
    ++loaded;
    const auto tok = path.size() > 5 && path.substr(path.size() - 5) == ".gguf"
                         ? Tokenizer::from_gguf(brisk::gguf::File::open(path))
                         : Tokenizer::from_hf_dir(path);
    for (int iter = 0; iter < 200; ++iter) {
      std::string s(rng() % 64, '\0');
      for (auto& c : s) c = static_cast<char>(rng() % 4 == 0 ? rng() % 256 : 32 + rng() % 96);
      for (bool add : {false, true})
        for (bool parse : {false, true}) {
          const auto ids = tok->encode(s, {.add_special = add, .parse_special = parse});
          for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok->vocab_size()) << path;
          EXPECT_TRUE(brisk::text::utf8_is_valid(tok->decode(ids))) << path;
        }
      std::vector<int32_t> ids(rng() % 16);
      for (auto& id : ids) id = static_cast<int32_t>(rng() % static_cast<uint32_t>(tok->vocab_size()));
      const std::string whole = tok->decode(ids);
      EXPECT_TRUE(brisk::text::utf8_is_valid(whole)) << path;
      brisk::StreamDecoder dec(*tok);
      std::string streamed;
      for (int32_t id : ids) {
        const std::string part = dec.push(id);
        EXPECT_TRUE(brisk::text::utf8_is_valid(part)) << path;
        streamed += part;
      }
      streamed += dec.flush();
      EXPECT_TRUE(brisk::text::utf8_is_valid(streamed)) << path;
    }
  }
  if (loaded == 0) BRISK_SKIP_MISSING_ASSET() << "no shared tokenizers found under " << shared_data();
}
