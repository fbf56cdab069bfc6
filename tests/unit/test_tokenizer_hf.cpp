// tokenizer.json loading and encoding: the tiny fixture models' prompts, the llama.cpp vectors
// paired with the Qwen3 and Llama 3 tokenizer.json files, and decode / streaming round trips.
#include <gtest/gtest.h>

#include "required_assets.h"

#include <filesystem>

#include "core/error.h"
#include "test_tokenizer_common.h"
#include "text/tokenizer.h"

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;
using brisk::Tokenizer;
using namespace brisk::testing;

namespace {

void check_vocab_pair(const std::string& dir, const std::string& name) {
  const std::string base = shared_data() + "/vocab/ggml-vocab-" + name + ".gguf";
  if (!fs::exists(base + ".inp")) BRISK_SKIP_MISSING_ASSET() << "missing " << base << ".inp (shared data)";
  const auto tok = Tokenizer::from_hf_dir(dir);
  const auto cases = read_vocab_cases(base + ".inp", base + ".out");
  ASSERT_GT(cases.size(), 10u);
  size_t failures = 0;
  for (const auto& c : cases) {
    const auto ids = tok->encode(c.text);
    EXPECT_EQ(ids, c.ids) << "text: [" << c.text << "] got " << ids_str(ids) << " want " << ids_str(c.ids);
    failures += ids != c.ids;
    EXPECT_EQ(tok->decode(ids), c.text);
    EXPECT_EQ(stream_decode(*tok, ids), c.text);
  }
  EXPECT_EQ(failures, 0u) << "of " << cases.size();
}

}  // namespace

TEST(TokenizerHf, FixtureModelPromptsMatchReference) {
  const std::string models = shared_data() + "/models";
  if (!fs::exists(models)) BRISK_SKIP_MISSING_ASSET() << "missing " << models << " (shared data)";
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(models)) {
    const fs::path hf = entry.path() / "hf";
    const fs::path ref = entry.path() / "ref.json";
    if (!fs::exists(hf / "tokenizer.json") || !fs::exists(ref)) continue;
    const auto j = nlohmann::json::parse(read_file(ref.string()));
    const std::string prompt = j.at("prompt").get<std::string>();
    const auto want = j.at("input_ids").get<std::vector<int32_t>>();
    const auto tok = Tokenizer::from_hf_dir(hf.string());
    const auto ids = tok->encode(prompt);
    EXPECT_EQ(ids, want) << entry.path();
    EXPECT_EQ(tok->decode(ids), prompt) << entry.path();
    EXPECT_EQ(stream_decode(*tok, ids), prompt) << entry.path();
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(TokenizerHf, FixtureModelSpecialTokens) {
  const std::string dir = shared_data() + "/models/qwen3/hf";
  if (!fs::exists(dir)) BRISK_SKIP_MISSING_ASSET() << "missing " << dir << " (shared data)";
  const auto tok = Tokenizer::from_hf_dir(dir);
  const int32_t im_start = tok->token_id("<|im_start|>");
  const int32_t im_end = tok->token_id("<|im_end|>");
  ASSERT_GE(im_start, 0);
  ASSERT_GE(im_end, 0);
  EXPECT_TRUE(tok->is_special(im_end));
  EXPECT_EQ(tok->eos_id(), im_end);
  EXPECT_EQ(tok->bos_id(), -1);
  const auto eog = tok->end_of_generation_ids();
  EXPECT_NE(std::find(eog.begin(), eog.end(), im_end), eog.end());
  EXPECT_NE(std::find(eog.begin(), eog.end(), tok->token_id("<|endoftext|>")), eog.end());

  const std::string text = "<|im_start|>user\nhi<|im_end|>";
  const auto parsed = tok->encode(text, {.add_special = false, .parse_special = true});
  ASSERT_GE(parsed.size(), 3u);
  EXPECT_EQ(parsed.front(), im_start);
  EXPECT_EQ(parsed.back(), im_end);
  const auto plain = tok->encode(text);
  EXPECT_EQ(std::find(plain.begin(), plain.end(), im_start), plain.end());
  EXPECT_EQ(tok->decode(parsed), text);
  EXPECT_EQ(tok->decode(parsed, /*skip_special=*/true), "user\nhi");
  EXPECT_EQ(stream_decode(*tok, parsed, true), "user\nhi");
  EXPECT_THROW(tok->decode({tok->vocab_size()}), brisk::Error);
  EXPECT_THROW(tok->decode({-1}), brisk::Error);
}

TEST(TokenizerHf, Qwen3MatchesLlamaCppQwen2Vectors) {
  const std::string dir = npm_tokenizer_dir("tokenizer-qwen3");
  if (dir.empty()) BRISK_SKIP_MISSING_ASSET() << "Qwen3 tokenizer.json not installed (run scripts/fetch_test_assets.sh)";
  check_vocab_pair(dir, "qwen2");
}

TEST(TokenizerHf, Llama3MatchesLlamaCppLlamaBpeVectors) {
  const std::string dir = npm_tokenizer_dir("tokenizer-llama3");
  if (dir.empty()) BRISK_SKIP_MISSING_ASSET() << "Llama 3 tokenizer.json not installed (run scripts/fetch_test_assets.sh)";
  check_vocab_pair(dir, "llama-bpe");
}

