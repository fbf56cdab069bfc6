// Tokenizers from GGUF metadata: llama.cpp's vocabulary fixtures (.inp/.out vectors) for every
// vocab GGUF in the shared data, and the tiny fixture models' prompts from model-f32.gguf.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "required_assets.h"
#include "core/error.h"
#include "formats/gguf.h"
#include "formats/tokenizer_to_gguf.h"
#include "test_tokenizer_common.h"
#include "text/tokenizer.h"

namespace fs = std::filesystem;
using brisk::Tokenizer;
using namespace brisk::testing;

namespace {

class VocabGguf : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabGguf, MatchesLlamaCppVectors) {
  const std::string base = shared_data() + "/vocab/ggml-vocab-" + GetParam() + ".gguf";
  if (!fs::exists(base) || !fs::exists(base + ".inp"))
    BRISK_SKIP_MISSING_ASSET() << "missing " << base << " or its .inp/.out (shared data)";
  const auto tok = Tokenizer::from_gguf(brisk::gguf::File::open(base));
  const auto cases = read_vocab_cases(base + ".inp", base + ".out");
  ASSERT_GT(cases.size(), 10u);
  size_t failures = 0;
  for (const auto& c : cases) {
    const auto ids = tok->encode(c.text);
    if (ids != c.ids && failures++ < 8)
      ADD_FAILURE() << GetParam() << " [" << c.text << "]\n got  " << ids_str(ids) << "\n want "
                    << ids_str(c.ids);
    // The streaming decoder reproduces the whole-sequence decode.
    EXPECT_EQ(stream_decode(*tok, c.ids), tok->decode(c.ids)) << "[" << c.text << "]";
  }
  EXPECT_EQ(failures, 0u) << "of " << cases.size() << " vectors";
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, VocabGguf,
                         ::testing::Values("gpt-2", "mpt", "deepseek-llm", "llama-spm", "phi-3",
                                           "bert-bge"));

}  // namespace

TEST(TokenizerGguf, FixtureModelPromptsMatchReference) {
  const std::string models = shared_data() + "/models";
  if (!fs::exists(models)) BRISK_SKIP_MISSING_ASSET() << "missing " << models << " (shared data)";
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(models)) {
    const fs::path gguf = entry.path() / "model-f32.gguf";
    const fs::path ref = entry.path() / "ref.json";
    if (!fs::exists(gguf) || !fs::exists(ref)) continue;
    const auto j = nlohmann::json::parse(read_file(ref.string()));
    const std::string prompt = j.at("prompt").get<std::string>();
    const auto want = j.at("input_ids").get<std::vector<int32_t>>();
    const auto tok = Tokenizer::from_gguf(brisk::gguf::File::open(gguf.string()));
    const auto ids = tok->encode(prompt);
    EXPECT_EQ(ids, want) << gguf;
    EXPECT_EQ(tok->decode(ids), prompt) << gguf;
    const auto eog = tok->end_of_generation_ids();
    EXPECT_NE(std::find(eog.begin(), eog.end(), tok->token_id("<|im_end|>")), eog.end()) << gguf;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(TokenizerGguf, SentencePieceSpecialsAndDecode) {
  const std::string path = shared_data() + "/vocab/ggml-vocab-llama-spm.gguf";
  if (!fs::exists(path)) BRISK_SKIP_MISSING_ASSET() << "missing " << path << " (shared data)";
  const auto tok = Tokenizer::from_gguf(brisk::gguf::File::open(path));
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  const auto ids = tok->encode("Hello world", {.add_special = true});
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(tok->decode(ids, /*skip_special=*/true), "Hello world");
  // Byte fallback: a character outside the vocabulary round-trips through <0xXX> pieces.
  const std::string rare = "\xF0\x9F\xA6\x99";  // U+1F999
  const auto rare_ids = tok->encode(rare);
  EXPECT_EQ(tok->decode(rare_ids), rare);
  EXPECT_EQ(stream_decode(*tok, rare_ids), rare);
  // Special-token text is only matched with parse_special.
  const auto parsed = tok->encode("<s>x", {.parse_special = true});
  EXPECT_EQ(parsed.front(), 1);
  EXPECT_NE(tok->encode("<s>x").front(), 1);
}

// llama.cpp's "gemma4" vocabulary form (BPE over raw UTF-8 with SentencePiece spaces and byte
// fallback, text split into newline runs and the rest), written by brisk's converter
// (tokenizer_to_gguf, model "gemma4") from the Gemma 3 tokenizer.json, the same kind of
// vocabulary: text without newlines encodes as the tokenizer.json pipeline encodes it, a
// newline run that is a token is taken whole, decoding matches, BOS is added, EOS stops.
TEST(TokenizerGguf, Gemma4VocabularyFollowsTheHfPipeline) {
  const std::string dir = npm_tokenizer_dir("tokenizer-gemma3");
  if (dir.empty()) GTEST_SKIP() << "tokenizer-gemma3 not installed (run scripts/fetch_test_assets.sh)";
  brisk::gguf::Writer w;
  w.set("general.architecture", brisk::gguf::Value::from_string("gemma4"));
  brisk::tokenizer_to_gguf({.folder = dir, .pre = "", .n_vocab = 0, .model = "gemma4"}, w);
  const std::string path = (fs::temp_directory_path() / "brisk_gemma4_vocab.gguf").string();
  w.write(path);
  const auto gg = Tokenizer::from_gguf(brisk::gguf::File::open(path));
  const auto hf = Tokenizer::from_hf_dir(dir);
  const auto corpus = nlohmann::json::parse(read_file(std::string(BRISK_FIXTURES) + "/tokenizer/corpus.json"));
  size_t compared = 0, bad = 0;
  for (const auto& sj : corpus.at("strings")) {
    const std::string text = sj.get<std::string>();
    if (text.find('\n') != std::string::npos) continue;
    const auto a = gg->encode(text), b = hf->encode(text);
    if (a != b && bad++ < 3) ADD_FAILURE() << "'" << text << "': gguf " << ids_str(a) << "vs hf " << ids_str(b);
    EXPECT_EQ(gg->decode(a), hf->decode(b)) << text;
    ++compared;
  }
  EXPECT_GT(compared, 200u);
  const int32_t nn = gg->token_id("\n\n");
  ASSERT_GE(nn, 0);
  const auto split = gg->encode("one\n\ntwo");
  EXPECT_NE(std::find(split.begin(), split.end(), nn), split.end()) << ids_str(split);
  EXPECT_EQ(gg->decode(split), "one\n\ntwo");
  EXPECT_EQ(gg->encode("x", {.add_special = true}).front(), gg->token_id("<bos>"));
  const auto eog = gg->end_of_generation_ids();
  ASSERT_GE(gg->eos_id(), 0);  // tokenizer_config.json's eos_token
  EXPECT_NE(std::find(eog.begin(), eog.end(), gg->eos_id()), eog.end());
  fs::remove(path);
}
