// The tokenizer corpus (tests/fixtures/tokenizer/corpus.json, 370+ strings) against the
// reference ids recorded in reference_NAME.json for the Qwen3, Llama 3, Gemma 3, Llama 2,
// DeepSeek V3 and GPT-4o tokenizer.json files: encode with and without special-token parsing and with add_special,
// decode, decode(skip_special), the streaming decoder, and the byte-level round trip.
#include <gtest/gtest.h>

#include "required_assets.h"

#include <nlohmann/json.hpp>

#include "test_tokenizer_common.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

using brisk::Tokenizer;
using namespace brisk::testing;

namespace {

std::string show(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

enum class RoundTrip { exact, nfc, none };

// `config_bos`: tokenizer_config.json sets add_bos_token and tokenizer.json has no template;
// like transformers (and unlike the tokenizers library alone) we then add BOS.
void check_corpus(const std::string& name, const std::string& package, RoundTrip round_trip,
                  bool config_bos = false) {
  const std::string dir = npm_tokenizer_dir(package);
  if (dir.empty()) BRISK_SKIP_MISSING_ASSET() << package << " not installed (run scripts/fetch_test_assets.sh)";
  const std::string fixtures = BRISK_FIXTURES;
  const auto corpus = nlohmann::json::parse(read_file(fixtures + "/tokenizer/corpus.json"));
  const auto ref = nlohmann::json::parse(read_file(fixtures + "/tokenizer/reference_" + name + ".json"));
  const auto& strings = corpus.at("strings");
  const auto& cases = ref.at("cases");
  ASSERT_EQ(strings.size(), cases.size());
  ASSERT_GE(strings.size(), 300u);
  const auto tok = Tokenizer::from_hf_dir(dir);

  size_t bad_plain = 0, bad_parse = 0, bad_add = 0, bad_dec = 0, bad_skip = 0, bad_stream = 0,
         bad_round = 0;
  for (size_t i = 0; i < strings.size(); ++i) {
    const std::string s = strings[i].get<std::string>();
    const auto& c = cases[i];
    const auto want_plain = c.at("plain").get<std::vector<int32_t>>();
    const auto want_parse = c.at("parse").get<std::vector<int32_t>>();
    auto want_add = c.at("add").get<std::vector<int32_t>>();
    if (config_bos) want_add.insert(want_add.begin(), tok->bos_id());
    const auto plain = tok->encode(s);
    const auto parse = tok->encode(s, {.add_special = false, .parse_special = true});
    const auto add = tok->encode(s, {.add_special = true, .parse_special = true});
    if (plain != want_plain && bad_plain++ < 5)
      ADD_FAILURE() << name << " plain #" << i << " [" << show(s) << "]\n got  " << ids_str(plain)
                    << "\n want " << ids_str(want_plain);
    if (parse != want_parse && bad_parse++ < 5)
      ADD_FAILURE() << name << " parse #" << i << " [" << show(s) << "]\n got  " << ids_str(parse)
                    << "\n want " << ids_str(want_parse);
    if (add != want_add && bad_add++ < 5)
      ADD_FAILURE() << name << " add #" << i << " [" << show(s) << "]\n got  " << ids_str(add)
                    << "\n want " << ids_str(want_add);
    const std::string dec = tok->decode(want_plain);
    if (dec != c.at("decoded").get<std::string>() && bad_dec++ < 5)
      ADD_FAILURE() << name << " decode #" << i << " got [" << show(dec) << "] want ["
                    << show(c.at("decoded").get<std::string>()) << "]";
    const std::string skip = tok->decode(want_parse, true);
    if (skip != c.at("decoded_skip").get<std::string>() && bad_skip++ < 5)
      ADD_FAILURE() << name << " decode(skip) #" << i << " got [" << show(skip) << "] want ["
                    << show(c.at("decoded_skip").get<std::string>()) << "]";
    if ((stream_decode(*tok, want_plain, false) != dec ||
         stream_decode(*tok, want_parse, true) != skip) && bad_stream++ < 5)
      ADD_FAILURE() << name << " stream decode #" << i << " differs from decode";
    if (round_trip != RoundTrip::none) {
      const std::string want = round_trip == RoundTrip::nfc
                                   ? brisk::text::unicode_normalize(s, brisk::text::NormalForm::nfc)
                                   : s;
      if (tok->decode(plain) != want && bad_round++ < 5)
        ADD_FAILURE() << name << " round trip #" << i << " [" << show(s) << "]";
    }
  }
  EXPECT_EQ(bad_plain, 0u);
  EXPECT_EQ(bad_parse, 0u);
  EXPECT_EQ(bad_add, 0u);
  EXPECT_EQ(bad_dec, 0u);
  EXPECT_EQ(bad_skip, 0u);
  EXPECT_EQ(bad_stream, 0u);
  EXPECT_EQ(bad_round, 0u);
}

}  // namespace

// Qwen3 normalizes to NFC, so its round trip holds up to NFC.
TEST(TokenizerCorpus, Qwen3) { check_corpus("qwen3", "tokenizer-qwen3", RoundTrip::nfc); }
TEST(TokenizerCorpus, Llama3) { check_corpus("llama3", "tokenizer-llama3", RoundTrip::exact); }
TEST(TokenizerCorpus, Gemma3) { check_corpus("gemma3", "tokenizer-gemma3", RoundTrip::none); }
TEST(TokenizerCorpus, Llama2) { check_corpus("llama2", "tokenizer-llama2", RoundTrip::none); }
TEST(TokenizerCorpus, DeepSeekV3) {
  check_corpus("deepseek_v3", "tokenizer-deepseek_v3", RoundTrip::exact, /*config_bos=*/true);
}
TEST(TokenizerCorpus, Gpt4o) { check_corpus("gpt4o", "tokenizer-gpt4o", RoundTrip::exact); }
