// The Precompiled normalizer (SentencePiece character map, text/precompiled.h) on maps built
// here in darts-clone's double-array layout: lookups by key, whole-cluster replacement of
// graphemes shorter than 6 bytes, code point by code point otherwise, base64, tokenizer.json's
// Precompiled step, and errors naming the file and key for malformed maps.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/gguf.h"
#include "charsmap_blob.h"
#include "temp_files.h"
#include "text/precompiled.h"
#include "text/tokenizer.h"

namespace brisk::text {
namespace precompiled_test {

using brisk::testing::base64;
using brisk::testing::charsmap_blob;

// Compatibility forms as SentencePiece's nmt_nfkc map holds them.
const std::map<std::string, std::string> kMap = {
    {"\xEF\xAC\x81", "fi"},           // U+FB01 LATIN SMALL LIGATURE FI
    {"\xEF\xBC\xA1", "A"},            // U+FF21 FULLWIDTH LATIN CAPITAL LETTER A
    {"\xE3\x80\x80", " "},            // U+3000 IDEOGRAPHIC SPACE
    {"e\xCC\x81", "\xC3\xA9"},        // e + U+0301 COMBINING ACUTE -> U+00E9
    {"\xE2\x84\xA2", "TM"},           // U+2122 TRADE MARK SIGN
};

TEST(Precompiled, LooksUpEveryKeyAndNothingElse) {
  const PrecompiledCharsMap m(charsmap_blob(kMap), "test");
  for (const auto& [key, rep] : kMap) {
    std::string_view got;
    ASSERT_TRUE(m.lookup(key, &got)) << key;
    EXPECT_EQ(got, rep);
  }
  std::string_view got;
  EXPECT_FALSE(m.lookup("e", &got));                   // a prefix of a key only
  EXPECT_FALSE(m.lookup("\xEF\xAC\x82", &got));        // U+FB02: its last byte differs
  EXPECT_FALSE(m.lookup("x", &got));
  EXPECT_TRUE(m.lookup("\xEF\xAC\x81zz", &got));       // a key that prefixes the text
  EXPECT_EQ(got, "fi");
}

TEST(Precompiled, NormalizesByGraphemeThenByCodePoint) {
  const PrecompiledCharsMap m(charsmap_blob(kMap), "test");
  EXPECT_EQ(m.normalize("\xEF\xAC\x81nd\xE3\x80\x80\xEF\xBC\xA1\xE2\x84\xA2"), "find ATM");
  // e + U+0301 is one cluster of 3 bytes: replaced whole by its key.
  EXPECT_EQ(m.normalize("caf" "e\xCC\x81" "!"), "caf\xC3\xA9!");
  // A cluster of 6 bytes or more goes code point by code point: U+FF21 maps, the marks stay.
  EXPECT_EQ(m.normalize("\xEF\xBC\xA1\xCC\x81\xCC\x81"), "A\xCC\x81\xCC\x81");
  EXPECT_EQ(m.normalize("plain text"), "plain text");
  EXPECT_EQ(m.normalize(""), "");
}

TEST(Precompiled, Base64AndMalformedMaps) {
  const std::string blob = charsmap_blob(kMap);
  EXPECT_EQ(base64_decode(base64(blob), "w"), blob);
  EXPECT_EQ(base64_decode("YWI", "w"), "ab");  // unpadded
  EXPECT_THROW(base64_decode("a$cd", "w"), Error);
  EXPECT_THROW(base64_decode("abcde", "w"), Error);
  EXPECT_THROW(PrecompiledCharsMap("ab", "file.json: normalizer.precompiled_charsmap"), Error);
  std::string too_big = blob;
  too_big[0] = char(0xFC);  // the trie size past the blob's end
  too_big[1] = char(0xFF);
  try {
    PrecompiledCharsMap m(too_big, "file.json: normalizer.precompiled_charsmap");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("file.json: normalizer.precompiled_charsmap"), std::string::npos) << e.what();
  }
}

// tokenizer.json with a Precompiled step in a normalizer Sequence (as XLM-RoBERTa's has it).
TEST(Precompiled, TokenizerJsonStep) {
  using json = nlohmann::json;
  static std::atomic<int> counter{0};
  const std::filesystem::path dir = brisk::testing::process_temp_dir() / ("precompiled_" + std::to_string(counter++));
  std::filesystem::create_directories(dir);
  json vocab = json::array();
  for (const char* p : {"<unk>", "\xE2\x96\x81" "fi", "nd", "\xE2\x96\x81" "A", "TM", "\xE2\x96\x81", "f", "i", "n", "d"})
    vocab.push_back(json::array({p, -1.0}));
  const json tok = {
      {"model", {{"type", "Unigram"}, {"unk_id", 0}, {"vocab", vocab}}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers", json::array({json{{"type", "Precompiled"}, {"precompiled_charsmap", base64(charsmap_blob(kMap))}}})}}},
      {"pre_tokenizer", {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}}},
      {"decoder", {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}}},
  };
  std::ofstream(dir / "tokenizer.json") << tok.dump();
  auto t = Tokenizer::from_hf_dir(dir.string());
  EXPECT_EQ(t->encode("\xEF\xAC\x81nd \xEF\xBC\xA1\xE2\x84\xA2", {}), (std::vector<int32_t>{1, 2, 3, 4}));
  // A null charsmap normalizes nothing, as tokenizers treats it.
  json null_map = tok;
  null_map["normalizer"]["normalizers"][0]["precompiled_charsmap"] = nullptr;
  std::ofstream(dir / "tokenizer.json") << null_map.dump();
  EXPECT_EQ(Tokenizer::from_hf_dir(dir.string())->encode("fi", {}), (std::vector<int32_t>{1}));
}

// A GGUF SentencePiece Unigram vocabulary (tokenizer.ggml.model "t5", as llama.cpp's converter
// writes XLM-RoBERTa's: bge-m3, multilingual-e5) with its precompiled_charsmap as UINT8 bytes:
// the same ids as the tokenizer.json pipeline of that vocabulary, <s> ... </s> added, extra
// spaces removed, and a clear error for a malformed charsmap or a missing <unk>.
TEST(Precompiled, GgufT5Vocabulary) {
  namespace g = brisk::gguf;
  const std::vector<std::string> pieces = {"<s>", "<pad>", "</s>", "<unk>", "\xE2\x96\x81" "fi", "nd", "\xE2\x96\x81" "A",
                                           "TM", "\xE2\x96\x81", "f", "i", "n", "d", "\xE2\x96\x81" "find"};
  const std::vector<float> scores = {0, 0, 0, 0, -1, -1, -1, -1, -2, -3, -3, -3, -3, -0.5f};
  std::vector<int32_t> types(pieces.size(), 1);
  types[0] = types[1] = types[2] = 3;  // control
  types[3] = 2;                        // unknown
  const std::string blob = charsmap_blob(kMap);
  g::Array bytes{.type = g::ValueType::UINT8, .items = {}};
  for (char c : blob) bytes.items.push_back(g::Value{.type = g::ValueType::UINT8, .data = uint64_t(uint8_t(c))});
  auto vocab = [&](const g::Value& charsmap, bool with_unk) {
    g::Writer w;
    w.set("general.architecture", g::Value::from_string("bert"));
    w.set("tokenizer.ggml.model", g::Value::from_string("t5"));
    std::vector<std::string> p = pieces;
    if (!with_unk) p[3] = "<x>";
    w.set("tokenizer.ggml.tokens", g::Value::from_strings(p));
    w.set("tokenizer.ggml.scores", g::Value::from_f32s(scores));
    std::vector<int32_t> t = types;
    if (!with_unk) t[3] = 1;
    w.set("tokenizer.ggml.token_type", g::Value::from_i32s(t));
    w.set("tokenizer.ggml.precompiled_charsmap", charsmap);
    w.set("tokenizer.ggml.bos_token_id", g::Value::from_u32(0));
    w.set("tokenizer.ggml.eos_token_id", g::Value::from_u32(2));
    w.set("tokenizer.ggml.padding_token_id", g::Value::from_u32(1));
    if (with_unk) w.set("tokenizer.ggml.unknown_token_id", g::Value::from_u32(3));
    w.set("tokenizer.ggml.add_bos_token", g::Value::from_bool(true));
    w.set("tokenizer.ggml.add_eos_token", g::Value::from_bool(true));
    return g::File::parse(w.write_to_memory("t5 vocab"));
  };
  const auto tok = Tokenizer::from_gguf(vocab(g::Value{.type = g::ValueType::ARRAY, .data = bytes}, true));
  // U+FB01 -> "fi", U+FF21 -> "A", U+2122 -> "TM" through the charsmap, then Viterbi ("▁find"
  // scores above "▁fi" + "nd").
  EXPECT_EQ(tok->encode("\xEF\xAC\x81nd \xEF\xBC\xA1\xE2\x84\xA2", {.add_special = true}),
            (std::vector<int32_t>{0, 13, 6, 7, 2}));
  EXPECT_EQ(tok->encode("fi nd", {}), (std::vector<int32_t>{4, 8, 5}));
  EXPECT_EQ(tok->encode("  find   \xEF\xBC\xA1  ", {}), (std::vector<int32_t>{13, 6}));  // extra spaces removed
  EXPECT_EQ(tok->encode("find@@", {}), (std::vector<int32_t>{13, 3}));  // an unknown run is one <unk>
  EXPECT_EQ(tok->decode({0, 4, 5, 6, 7, 2}, /*skip_special=*/true), "find ATM");
  // The same vocabulary as a tokenizer.json pipeline (XLM-RoBERTa's form) gives the same ids.
  using json = nlohmann::json;
  static std::atomic<int> counter{0};
  const std::filesystem::path dir = brisk::testing::process_temp_dir() / ("t5_" + std::to_string(counter++));
  std::filesystem::create_directories(dir);
  json v = json::array();
  for (size_t i = 0; i < pieces.size(); ++i) v.push_back(json::array({pieces[i], scores[i]}));
  const json tj = {
      {"model", {{"type", "Unigram"}, {"unk_id", 3}, {"vocab", v}}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers", json::array({json{{"type", "Precompiled"}, {"precompiled_charsmap", base64(blob)}},
                                     json{{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}}})}}},
      {"pre_tokenizer", {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}}},
      {"decoder", {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}}},
  };
  std::ofstream(dir / "tokenizer.json") << tj.dump();
  const auto hf = Tokenizer::from_hf_dir(dir.string());
  for (const char* text : {"\xEF\xAC\x81nd \xEF\xBC\xA1\xE2\x84\xA2", "find find", "fin d", "A\xE2\x84\xA2 nd", "dnif"})
    EXPECT_EQ(tok->encode(text, {}), hf->encode(text, {})) << text;
  // A value that is not a byte, and a vocabulary without <unk>, name the key.
  try {
    Tokenizer::from_gguf(vocab(g::Value::from_i32s({1, 2, 300}), true));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.precompiled_charsmap"), std::string::npos) << e.what();
  }
  try {
    Tokenizer::from_gguf(vocab(g::Value{.type = g::ValueType::ARRAY, .data = bytes}, false));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown_token_id"), std::string::npos) << e.what();
  }
}

}  // namespace precompiled_test
}  // namespace brisk::text
