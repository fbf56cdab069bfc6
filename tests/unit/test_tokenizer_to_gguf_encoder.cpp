// WordPiece and Unigram tokenizer.json files converted to GGUF keys (bert, t5) by
// formats/tokenizer_to_gguf_encoder.cpp: the GGUF tokenizer encodes and decodes the tokenizer
// corpus (and llama.cpp's bert-bge strings) exactly as the tokenizer.json pipeline does, with and
// without special tokens; the bert keys equal llama.cpp's own conversion of the same
// vocabulary; malformed files and pipelines GGUF cannot hold are errors naming file and field.
//
// The tokenizer.json files are rebuilt from vocabularies in the shared data, in the layout the
// Hugging Face converters write: bge-small-en-v1.5's WordPiece from llama.cpp's
// ggml-vocab-bert-bge.gguf (its phantom-space form undone), and an XLM-RoBERTa-style / T5-style
// Unigram over the pieces and scores of ggml-vocab-llama-spm.gguf with a compatibility charsmap
// (every code point of several blocks whose NFKC form differs, composed accents, control
// characters) compiled as SentencePiece does.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "charsmap_blob.h"
#include "core/error.h"
#include "formats/gguf.h"
#include "formats/tokenizer_to_gguf.h"
#include "required_assets.h"
#include "temp_files.h"
#include "test_tokenizer_common.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

namespace fs = std::filesystem;
using brisk::Tokenizer;
using json = nlohmann::json;
using namespace brisk::testing;

namespace {

const char* const kSpace = "\xE2\x96\x81";

fs::path new_dir(const std::string& name) {
  static int counter = 0;
  const fs::path dir = process_temp_dir() / (name + "_" + std::to_string(counter++));
  fs::create_directories(dir);
  return dir;
}

void write_json(const fs::path& path, const json& j) { std::ofstream(path) << j.dump(); }

json added(int id, const std::string& content) {
  return {{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
          {"normalized", false}, {"special", true}};
}

json special_token(const std::string& name) { return {{"SpecialToken", {{"id", name}, {"type_id", 0}}}}; }
json sequence(const std::string& name) { return {{"Sequence", {{"id", name}, {"type_id", 0}}}}; }

// bge-small-en-v1.5's tokenizer.json and tokenizer_config.json rebuilt from llama.cpp's
// conversion: "▁x" -> "x", control and "[...]" tokens as they are, others "##x".
fs::path bge_folder(const brisk::gguf::File& f, bool lowercase, bool cleanup) {
  const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  const auto types = f.get_int_array("tokenizer.ggml.token_type");
  json vocab = json::object(), added_tokens = json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string t = tokens[i];
    if (t.rfind(kSpace, 0) == 0) t.erase(0, 3);
    else if (types[i] != 3 && !(t.size() >= 2 && t.front() == '[' && t.back() == ']')) t = "##" + t;
    vocab[t] = int(i);
    if (types[i] == 3) added_tokens.push_back(added(int(i), t));
  }
  const json pair = json::array({special_token("[CLS]"), sequence("A"), special_token("[SEP]"), sequence("B"),
                                 special_token("[SEP]")});
  const json tj = {
      {"version", "1.0"},
      {"added_tokens", added_tokens},
      {"normalizer",
       {{"type", "BertNormalizer"}, {"clean_text", true}, {"handle_chinese_chars", true},
        {"strip_accents", lowercase ? json() : json(false)}, {"lowercase", lowercase}}},
      {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", json::array({special_token("[CLS]"), sequence("A"), special_token("[SEP]")})},
        {"pair", pair},
        {"special_tokens",
         {{"[CLS]", {{"id", "[CLS]"}, {"ids", {101}}, {"tokens", {"[CLS]"}}}},
          {"[SEP]", {{"id", "[SEP]"}, {"ids", {102}}, {"tokens", {"[SEP]"}}}}}}}},
      {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", cleanup}}},
      {"model",
       {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"continuing_subword_prefix", "##"},
        {"max_input_chars_per_word", 100}, {"vocab", vocab}}},
  };
  const fs::path dir = new_dir("bge");
  write_json(dir / "tokenizer.json", tj);
  write_json(dir / "tokenizer_config.json",
             {{"cls_token", "[CLS]"}, {"sep_token", "[SEP]"}, {"pad_token", "[PAD]"}, {"unk_token", "[UNK]"},
              {"mask_token", "[MASK]"}, {"do_lower_case", lowercase}, {"model_max_length", 512}});
  write_json(dir / "config.json", {{"type_vocab_size", 2}});
  return dir;
}

// The keys brisk's converter writes for `dir`, as a vocabulary-only GGUF file.
std::string convert(const fs::path& dir, int32_t n_vocab = 0) {
  brisk::gguf::Writer w;
  w.set("general.architecture", brisk::gguf::Value::from_string("bert"));
  brisk::tokenizer_to_gguf({.folder = dir.string(), .pre = "", .n_vocab = n_vocab, .model = "gpt2"}, w);
  const std::string path = (dir / "vocab.gguf").string();
  w.write(path);
  return path;
}

// Encodes and decodes every string both ways: plain, special tokens parsed, specials added,
// decode, decode skipping specials, the streaming decoder. Returns the number of strings.
size_t expect_same(const Tokenizer& gguf, const Tokenizer& hf, const std::vector<std::string>& texts,
                   const std::string& what) {
  size_t bad = 0;
  for (const std::string& s : texts) {
    const auto plain = hf.encode(s), parse = hf.encode(s, {.parse_special = true});
    const auto add = hf.encode(s, {.add_special = true, .parse_special = true});
    const bool same = gguf.encode(s) == plain && gguf.encode(s, {.parse_special = true}) == parse &&
                      gguf.encode(s, {.add_special = true, .parse_special = true}) == add &&
                      gguf.decode(plain) == hf.decode(plain) && gguf.decode(parse, true) == hf.decode(parse, true) &&
                      stream_decode(gguf, plain) == gguf.decode(plain);
    if (!same && bad++ < 5)
      ADD_FAILURE() << what << " [" << s << "]\n gguf " << ids_str(gguf.encode(s, {.add_special = true, .parse_special = true}))
                    << " '" << gguf.decode(plain) << "'\n hf   " << ids_str(add) << " '" << hf.decode(plain) << "'";
  }
  EXPECT_EQ(bad, 0u) << what << ": of " << texts.size() << " strings";
  return texts.size();
}

std::vector<std::string> corpus_strings() {
  std::vector<std::string> out;
  const auto corpus = json::parse(read_file(std::string(BRISK_FIXTURES) + "/tokenizer/corpus.json"));
  for (const auto& s : corpus.at("strings")) out.push_back(s.get<std::string>());
  return out;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const brisk::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TokenizerToGgufEncoder, WordPieceAsLlamaCppConvertsIt) {
  const std::string vocab = shared_data() + "/vocab/ggml-vocab-bert-bge.gguf";
  if (!fs::exists(vocab) || !fs::exists(vocab + ".inp"))
    BRISK_SKIP_MISSING_ASSET() << "missing " << vocab << " or its .inp/.out (shared data)";
  const auto ref = brisk::gguf::File::open(vocab);
  const fs::path dir = bge_folder(ref, /*lowercase=*/true, /*cleanup=*/true);
  const auto hf = Tokenizer::from_hf_dir(dir.string());
  // The rebuilt tokenizer.json is bge's: it gives llama.cpp's ids for its test strings.
  const auto cases = read_vocab_cases(vocab + ".inp", vocab + ".out");
  std::vector<std::string> texts = corpus_strings();
  for (const auto& c : cases) {
    EXPECT_EQ(hf->encode(c.text), c.ids) << c.text;
    texts.push_back(c.text);
  }

  const auto out = brisk::gguf::File::open(convert(dir));
  EXPECT_EQ(out.get_string("tokenizer.ggml.model").value_or(""), "bert");
  const auto want_tokens = ref.get_string_array("tokenizer.ggml.tokens");
  const auto want_types = ref.get_int_array("tokenizer.ggml.token_type");
  const auto tokens = out.get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), want_tokens.size());
  EXPECT_EQ(out.get_int_array("tokenizer.ggml.token_type"), want_types);
  size_t differ = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    // llama.cpp's converter now marks every non-control token; the fixture's older one kept
    // "[unusedN]" bare.
    const bool bracketed = want_types[i] == 1 && want_tokens[i].front() == '[' && want_tokens[i].back() == ']';
    const std::string want = bracketed ? kSpace + want_tokens[i] : want_tokens[i];
    if (tokens[i] != want && differ++ < 5) ADD_FAILURE() << i << ": " << tokens[i] << " vs " << want;
  }
  EXPECT_EQ(differ, 0u);
  for (const char* key : {"tokenizer.ggml.unknown_token_id", "tokenizer.ggml.seperator_token_id",
                          "tokenizer.ggml.padding_token_id", "tokenizer.ggml.cls_token_id",
                          "tokenizer.ggml.mask_token_id", "tokenizer.ggml.token_type_count"})
    EXPECT_EQ(out.get_int(key), ref.get_int(key)) << key;
  EXPECT_EQ(out.get_int("tokenizer.ggml.bos_token_id"), 101);
  EXPECT_EQ(out.get_int("tokenizer.ggml.eos_token_id"), 102);
  EXPECT_EQ(out.get_bool("tokenizer.ggml.add_bos_token"), true);
  EXPECT_EQ(out.get_bool("tokenizer.ggml.add_eos_token"), true);
  EXPECT_FALSE(out.find("brisk.tokenizer.lowercase"));  // llama.cpp's defaults write nothing

  const auto gg = Tokenizer::from_gguf(out);
  EXPECT_GT(expect_same(*gg, *hf, texts, "bge"), 400u);
  EXPECT_EQ(gg->token_id("##ing"), hf->token_id("##ing"));
  EXPECT_EQ(gg->decode(gg->encode("Hello, world!")), "hello, world!");  // cleanup: no space before , !
  // llama.cpp's own file decodes as the tokenizer.json does too.
  const auto llama = Tokenizer::from_gguf(ref);
  for (const auto& c : cases) EXPECT_EQ(llama->decode(c.ids), hf->decode(c.ids)) << c.text;
}

TEST(TokenizerToGgufEncoder, WordPieceCasedWithoutCleanup) {
  const std::string vocab = shared_data() + "/vocab/ggml-vocab-bert-bge.gguf";
  if (!fs::exists(vocab)) BRISK_SKIP_MISSING_ASSET() << "missing " << vocab << " (shared data)";
  const fs::path dir = bge_folder(brisk::gguf::File::open(vocab), /*lowercase=*/false, /*cleanup=*/false);
  const auto out = brisk::gguf::File::open(convert(dir, 30600));
  EXPECT_EQ(out.get_bool("brisk.tokenizer.lowercase"), false);
  EXPECT_EQ(out.get_bool("brisk.tokenizer.decoder_cleanup"), false);
  EXPECT_EQ(out.get_string_array("tokenizer.ggml.tokens").size(), 30600u);  // padded to the model's
  EXPECT_EQ(out.get_int_array("tokenizer.ggml.token_type").back(), 5);
  const auto gg = Tokenizer::from_gguf(out);
  const auto hf = Tokenizer::from_hf_dir(dir.string());
  EXPECT_NE(hf->encode("Hello World"), hf->encode("hello world"));
  EXPECT_GT(expect_same(*gg, *hf, corpus_strings(), "bge cased"), 300u);
}

// A compatibility charsmap as SentencePiece's nmt_nfkc holds it: every code point of several
// blocks whose NFKC form differs, composed accents, tab / newline / CR as a space, other C0
// controls removed.
std::string nfkc_charsmap() {
  std::map<std::string, std::string> map;
  const std::pair<uint32_t, uint32_t> blocks[] = {{0x00A0, 0x02FF}, {0x2000, 0x215F}, {0x2460, 0x24FF},
                                                  {0x3000, 0x30FF}, {0xFB00, 0xFB4F}, {0xFF00, 0xFFEF}};
  for (auto [lo, hi] : blocks)
    for (uint32_t c = lo; c <= hi; ++c) {
      std::string key;
      brisk::text::utf8_append(key, c);
      const std::string nfkc = brisk::text::unicode_normalize(key, brisk::text::NormalForm::nfkc);
      if (nfkc != key && !nfkc.empty()) map[key] = nfkc;
    }
  for (const char* base : {"a", "e", "i", "o", "u", "n", "c", "A", "E", "O"})
    for (const char* mark : {"\xCC\x81", "\xCC\x80", "\xCC\x88", "\xCC\x83", "\xCC\xA7"}) {
      const std::string key = std::string(base) + mark;
      const std::string nfc = brisk::text::unicode_normalize(key, brisk::text::NormalForm::nfc);
      if (nfc != key) map[key] = nfc;
    }
  for (uint32_t c = 1; c < 0x20; ++c) {
    const bool space = c == 9 || c == 10 || c == 13;
    map.emplace(std::string(1, char(c)), std::string(space ? 1 : 0, ' '));
  }
  return charsmap_blob(map);
}

// A Unigram tokenizer.json over llama-spm's pieces and scores: XLM-RoBERTa's layout
// (Metaspace, <s> $A </s>, the " {2,}" rule) or T5's (WhitespaceSplit + Metaspace, $A </s>,
// byte fallback).
fs::path unigram_folder(const brisk::gguf::File& f, bool t5_style, const std::string& scheme = "always") {
  const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  const auto scores = f.get_float_array("tokenizer.ggml.scores");
  json vocab = json::array();
  for (size_t i = 0; i < tokens.size(); ++i) vocab.push_back(json::array({tokens[i], i < 3 ? 0.0 : double(scores[i])}));
  const json metaspace = {{"type", "Metaspace"}, {"replacement", kSpace}, {"prepend_scheme", scheme}, {"split", true}};
  json normalizers = json::array({{{"type", "Precompiled"}, {"precompiled_charsmap", base64(nfkc_charsmap())}}});
  if (!t5_style) normalizers.push_back({{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}});
  // XLM-RoBERTa's <mask> takes the space before it (lstrip); a user-defined token is matched in
  // normalized text.
  json mask = added(int(tokens.size()), "<mask>");
  mask["lstrip"] = true;
  json user = added(int(tokens.size()) + 1, "brisk");
  user["special"] = false;
  user["normalized"] = true;
  const json added_tokens = json::array({added(0, "<unk>"), added(1, "<s>"), added(2, "</s>"), mask, user});
  const json single = t5_style ? json::array({sequence("A"), special_token("</s>")})
                               : json::array({special_token("<s>"), sequence("A"), special_token("</s>")});
  const json tj = {
      {"version", "1.0"},
      {"added_tokens", added_tokens},
      {"normalizer", {{"type", "Sequence"}, {"normalizers", normalizers}}},
      {"pre_tokenizer", t5_style ? json{{"type", "Sequence"},
                                        {"pretokenizers", json::array({{{"type", "WhitespaceSplit"}}, metaspace})}}
                                 : metaspace},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", single},
        {"pair", json::array()},
        {"special_tokens",
         {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}},
          {"</s>", {{"id", "</s>"}, {"ids", {2}}, {"tokens", {"</s>"}}}}}}}},
      {"decoder", metaspace},
      {"model", {{"type", "Unigram"}, {"unk_id", 0}, {"vocab", vocab}, {"byte_fallback", t5_style}}},
  };
  const fs::path dir = new_dir(t5_style ? "t5" : "xlmr");
  write_json(dir / "tokenizer.json", tj);
  json cfg = {{"eos_token", "</s>"}, {"unk_token", "<unk>"}};
  if (!t5_style) cfg.update({{"bos_token", "<s>"}, {"cls_token", "<s>"}, {"sep_token", "</s>"}});
  write_json(dir / "tokenizer_config.json", cfg);
  return dir;
}

void check_unigram(bool t5_style) {
  const std::string vocab = shared_data() + "/vocab/ggml-vocab-llama-spm.gguf";
  if (!fs::exists(vocab)) BRISK_SKIP_MISSING_ASSET() << "missing " << vocab << " (shared data)";
  const auto src = brisk::gguf::File::open(vocab);
  const fs::path dir = unigram_folder(src, t5_style);
  const auto out = brisk::gguf::File::open(convert(dir));
  EXPECT_EQ(out.get_string("tokenizer.ggml.model").value_or(""), "t5");
  auto want_tokens = src.get_string_array("tokenizer.ggml.tokens");
  want_tokens.insert(want_tokens.end(), {"<mask>", "brisk"});
  EXPECT_EQ(out.get_string_array("tokenizer.ggml.tokens"), want_tokens);
  EXPECT_EQ(out.get_int_array("brisk.tokenizer.added_token_ids"),
            (std::vector<int64_t>{int64_t(want_tokens.size()) - 2, int64_t(want_tokens.size()) - 1}));
  EXPECT_EQ(out.get_int_array("brisk.tokenizer.added_token_flags"), (std::vector<int64_t>{1, 8}));
  const auto types = out.get_int_array("tokenizer.ggml.token_type");
  EXPECT_EQ(types.back(), 4);  // user-defined
  EXPECT_EQ(types[0], 2);                 // unk
  EXPECT_EQ(types[1], 3);                 // <s>
  EXPECT_EQ(types[3], t5_style ? 6 : 1);  // <0x00>: a byte with byte_fallback
  EXPECT_EQ(out.get_bool("tokenizer.ggml.remove_extra_whitespaces"), true);
  EXPECT_EQ(out.get_bool("tokenizer.ggml.add_space_prefix"), true);
  EXPECT_EQ(out.get_bool("tokenizer.ggml.add_bos_token"), !t5_style);
  EXPECT_EQ(out.get_bool("tokenizer.ggml.add_eos_token"), true);
  EXPECT_EQ(out.get_int("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(out.get_int_array("tokenizer.ggml.precompiled_charsmap").size(), nfkc_charsmap().size());
  const auto gg = Tokenizer::from_gguf(out);
  const auto hf = Tokenizer::from_hf_dir(dir.string());
  const std::string name = t5_style ? "t5 style" : "xlm-r style";
  EXPECT_GT(expect_same(*gg, *hf, corpus_strings(), name), 300u);
  const std::vector<std::string> added_cases = {"hello <mask> world", "a  <mask>", "a brisk test", "xbriskx",
                                                "\xEF\xBD\x82risk"};  // fullwidth b: normalized
  expect_same(*gg, *hf, added_cases, name + " added tokens");
  const int32_t mask_id = int32_t(want_tokens.size()) - 2;
  const auto with_mask = hf->encode("hello <mask>", {.parse_special = true});
  EXPECT_EQ(with_mask.back(), mask_id);
  EXPECT_EQ(with_mask, hf->encode("hello<mask>", {.parse_special = true}));  // lstrip took the space
  EXPECT_EQ(hf->encode("\xEF\xBD\x82risk").back(), mask_id + 1);  // matched after the charsmap
  // The charsmap is applied; a trailing space is kept as "▁" (the tokenizers library) unless
  // WhitespaceSplit drops it.
  EXPECT_EQ(gg->encode("\xEF\xAC\x81ne  \xEF\xBC\xA1"), gg->encode("fine A"));
  const auto trailing = gg->encode("fine ");
  EXPECT_EQ(trailing.size(), gg->encode("fine").size() + (t5_style ? 0 : 1));
}

TEST(TokenizerToGgufEncoder, UnigramXlmRobertaLayout) { check_unigram(false); }

// Metaspace's prepend_scheme "first": no "▁" before the text after an added token.
TEST(TokenizerToGgufEncoder, UnigramPrependFirst) {
  const std::string vocab = shared_data() + "/vocab/ggml-vocab-llama-spm.gguf";
  if (!fs::exists(vocab)) BRISK_SKIP_MISSING_ASSET() << "missing " << vocab << " (shared data)";
  const auto src = brisk::gguf::File::open(vocab);
  const fs::path dir = unigram_folder(src, false, "first");
  const auto out = brisk::gguf::File::open(convert(dir));
  EXPECT_EQ(out.get_string("brisk.tokenizer.prepend_scheme").value_or(""), "first");
  const auto gg = Tokenizer::from_gguf(out);
  const auto hf = Tokenizer::from_hf_dir(dir.string());
  const auto always = Tokenizer::from_hf_dir(unigram_folder(src, false).string());
  const std::string text = "hello</s>world";
  EXPECT_NE(hf->encode(text, {.parse_special = true}), always->encode(text, {.parse_special = true}));
  EXPECT_GT(expect_same(*gg, *hf, {text, "a <s> b", "x</s>"}, "first"), 0u);
  EXPECT_GT(expect_same(*gg, *hf, corpus_strings(), "first"), 300u);
}
TEST(TokenizerToGgufEncoder, UnigramT5Layout) { check_unigram(true); }

TEST(TokenizerToGgufEncoder, BadTokenizerJsonNamesFileAndField) {
  const fs::path dir = new_dir("bad");
  const std::string file = (dir / "tokenizer.json").string();
  auto fails_with = [&](const json& tj, const std::string& field) {
    write_json(dir / "tokenizer.json", tj);
    const std::string msg = error_of([&] { convert(dir); });
    EXPECT_NE(msg.find(file), std::string::npos) << msg;
    EXPECT_NE(msg.find(field), std::string::npos) << "want '" << field << "' in: " << msg;
  };
  const json wp_pre = {{"type", "BertPreTokenizer"}};
  fails_with({{"model", {{"type", "WordLevel"}, {"vocab", json::object()}}}}, "model.type \"WordLevel\"");
  fails_with({{"model", {{"type", "WordPiece"}, {"vocab", json::array()}}}, {"pre_tokenizer", wp_pre}}, "model.vocab");
  fails_with({{"model", {{"type", "WordPiece"}, {"vocab", {{"a", "x"}}}}}, {"pre_tokenizer", wp_pre}}, "model.vocab[\"a\"]");
  fails_with({{"model", {{"type", "WordPiece"}, {"vocab", {{"a", -4}}}}}, {"pre_tokenizer", wp_pre}}, "out of range");
  fails_with({{"model", {{"type", "WordPiece"}, {"continuing_subword_prefix", "@@"}, {"vocab", {{"a", 0}}}}}},
             "continuing_subword_prefix");
  fails_with({{"model", {{"type", "WordPiece"}, {"vocab", {{"a", 0}}}}}, {"pre_tokenizer", {{"type", "Whitespace"}}}},
             "pre_tokenizer");
  fails_with({{"model", {{"type", "WordPiece"}, {"vocab", {{"a", 0}}}}}, {"normalizer", {{"type", "NFD"}}},
              {"pre_tokenizer", wp_pre}},
             "normalizer.type \"NFD\"");
  const json ms = {{"type", "Metaspace"}, {"replacement", kSpace}};
  const json ab = json::array({json::array({"a", -1.0}), json::array({"b", -1.0})});
  const json a = json::array({json::array({"a", -1.0})});
  fails_with({{"model", {{"type", "Unigram"}, {"vocab", json::array({json::array({"a", -1.0}), json::array({"b"})})}}}, {"pre_tokenizer", ms}}, "model.vocab[1]");
  fails_with({{"model", {{"type", "Unigram"}, {"unk_id", 7}, {"vocab", a}}}, {"pre_tokenizer", ms}},
             "model.unk_id");
  fails_with({{"model", {{"type", "Unigram"}, {"vocab", a}}}, {"pre_tokenizer", ms},
              {"normalizer", {{"type", "Precompiled"}, {"precompiled_charsmap", "a$b"}}}},
             "precompiled_charsmap");
  fails_with({{"model", {{"type", "Unigram"}, {"vocab", a}}}, {"pre_tokenizer", ms},
              {"normalizer", {{"type", "Lowercase"}}}},
             "normalizer step \"Lowercase\"");
  fails_with({{"model", {{"type", "Unigram"}, {"vocab", a}}}, {"pre_tokenizer", {{"type", "ByteLevel"}}}},
             "pre_tokenizer step \"ByteLevel\"");
  fails_with({{"model", {{"type", "Unigram"}, {"vocab", ab}}},
              {"pre_tokenizer", ms},
              {"post_processor",
               {{"type", "TemplateProcessing"},
                {"single", json::array({special_token("a"), special_token("b"), sequence("A")})}}}},
             "post_processor adds 2 tokens before");
  // Too many tokens for the model's vocabulary.
  write_json(dir / "tokenizer.json", {{"model", {{"type", "Unigram"}, {"vocab", ab}}},
                                      {"pre_tokenizer", ms}});
  const std::string msg = error_of([&] { convert(dir, 1); });
  EXPECT_NE(msg.find("do not fit the model's vocabulary of 1"), std::string::npos) << msg;
  // An id far past the entries would pad the vocabulary with millions of "[PADn]" tokens: an
  // error for every model type (ids up to twice the entries + 1024, or the model's vocabulary).
  const json far = json::array({added(16000000, "<far>")});
  fails_with({{"model", {{"type", "WordPiece"}, {"vocab", {{"a", 0}}}}}, {"pre_tokenizer", wp_pre}, {"added_tokens", far}},
             "id 16000000 is out of range (ids below 1028");
  fails_with({{"model", {{"type", "Unigram"}, {"vocab", ab}}}, {"pre_tokenizer", ms}, {"added_tokens", far}},
             "id 16000000 is out of range");
  fails_with({{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}}}, {"merges", json::array()}}},
              {"added_tokens", far}},
             "added token id 16000000 out of range");
  fails_with({{"model", {{"type", "BPE"}, {"vocab", {{"a", 3000}}}, {"merges", json::array()}}}}, "vocab id 3000 out of range");
  // Fields of another JSON type than the pipeline's, and post-processors nested without end,
  // are errors naming the field (not the JSON library's type errors, not a deep recursion).
  fails_with({{"model", {{"type", "WordPiece"}, {"vocab", {{"a", 0}}}}}, {"normalizer", {{"type", 5}}},
              {"pre_tokenizer", wp_pre}},
             "normalizer.type \"\"");
  fails_with({{"model", {{"type", "Unigram"}, {"vocab", a}}}, {"pre_tokenizer", {{"type", "Metaspace"}, {"replacement", 7}}},
              {"normalizer", {{"type", "Replace"}, {"pattern", {{"Regex", 1}}}, {"content", false}}}},
             "normalizer step \"Replace\"");
  json nested = {{"type", "BertProcessing"}, {"cls", {"a", 0}}, {"sep", {"a", 0}}};
  for (int i = 0; i < 200; ++i) nested = {{"type", "Sequence"}, {"processors", json::array({nested})}};
  fails_with({{"model", {{"type", "WordPiece"}, {"vocab", {{"a", 0}}}}}, {"pre_tokenizer", wp_pre}, {"post_processor", nested}},
             "Sequences nested deeper than 8");
  // A BPE added token whose "special" is not a boolean counts as not special.
  write_json(dir / "tokenizer.json", {{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}}}, {"merges", json::array()}}},
                                      {"added_tokens", json::array({{{"id", 1}, {"content", "<x>"}, {"special", "yes"}}})}});
  EXPECT_NO_THROW(convert(dir));
  // Within the model's vocabulary, a sparse id is padding the model asks for.
  write_json(dir / "tokenizer.json", {{"model", {{"type", "BPE"}, {"vocab", {{"a", 3000}}}, {"merges", json::array()}}}});
  EXPECT_NO_THROW(convert(dir, 4096));
  EXPECT_NE(error_of([&] { convert(dir, (1 << 24) + 1); }).find("out of range (0 to 2^24)"), std::string::npos);
}

}  // namespace
