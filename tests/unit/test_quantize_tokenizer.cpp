// The random benchmark models embed a real tokenizer as GGUF tokenizer.ggml.* keys: the GGUF
// tokenizer must encode like the tokenizer.json it came from. Also a tiny random model with a
// recipe is written and read back with the recipe's types.
#include <gtest/gtest.h>

#include "required_assets.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "formats/gguf.h"
#include "models/random_model.h"
#include "temp_files.h"
#include "test_tokenizer_common.h"
#include "text/tokenizer.h"

namespace brisk {
namespace {

std::string temp_path(const std::string& name) {
  return (brisk::testing::process_temp_dir() / name).string();
}

void check_tokenizer(const std::string& package, const std::string& arch, int32_t n_vocab) {
  const std::string dir = testing::npm_tokenizer_dir(package);
  if (dir.empty()) BRISK_SKIP_MISSING_ASSET() << package << " not installed (run scripts/fetch_test_assets.sh)";
  RandomModelParams p = random_model_preset("tiny");
  p.arch = arch;
  p.n_vocab = n_vocab;
  p.tokenizer_dir = dir;
  p.n_threads = 1;
  const std::string path = temp_path(package + ".gguf");
  random_model_write(p, path);
  const auto file = gguf::File::open(path);
  const auto from_gguf = Tokenizer::from_gguf(file);
  const auto from_hf = Tokenizer::from_hf_dir(dir);
  ASSERT_TRUE(from_gguf && from_hf);
  EXPECT_EQ(file.get_string_array("tokenizer.ggml.tokens").size(), size_t(n_vocab));
  for (const std::string text : {"Hello world, how are you?", "  indented\n\tcode(x) = 42;", "naïve café 東京 🙂",
                                 "<|im_start|>user\nhi<|im_end|>"}) {
    EncodeOptions opt;
    opt.parse_special = true;
    EXPECT_EQ(from_gguf->encode(text, opt), from_hf->encode(text, opt)) << package << ": " << text;
  }
  std::filesystem::remove(path);
}

TEST(QuantizeTokenizer, QwenTokenizerJsonToGguf) { check_tokenizer("tokenizer-qwen3", "qwen2", 151936); }
TEST(QuantizeTokenizer, Llama3TokenizerJsonToGguf) { check_tokenizer("tokenizer-llama3", "llama", 128256); }

TEST(QuantizeTokenizer, TinyRandomModelWithRecipe) {
  RandomModelParams p = random_model_preset("tiny");
  p.n_embd = 256;
  p.n_ff = 512;
  p.head_dim = 64;
  p.n_layer = 8;
  p.recipe = "Q4_K_M";
  p.n_threads = 2;
  const std::string path = temp_path("recipe.gguf");
  random_model_write(p, path);
  const auto f = gguf::File::open(path);
  EXPECT_EQ(f.get_int("general.file_type"), 15);
  EXPECT_EQ(f.find_tensor("blk.0.ffn_down.weight")->type, QuantType::Q6_K);
  EXPECT_EQ(f.find_tensor("blk.2.ffn_down.weight")->type, QuantType::Q4_K);
  EXPECT_EQ(f.find_tensor("blk.0.attn_v.weight")->type, QuantType::Q6_K);
  EXPECT_EQ(f.find_tensor("token_embd.weight")->type, QuantType::Q6_K);
  EXPECT_EQ(f.find_tensor("blk.0.attn_norm.weight")->type, QuantType::F32);
  // Same seed, same bytes (rows are generated in parallel from per-row streams).
  const std::string path2 = temp_path("recipe2.gguf");
  p.n_threads = 1;
  random_model_write(p, path2);
  const auto g = gguf::File::open(path2);
  const auto* a = f.find_tensor("blk.1.ffn_up.weight");
  const auto* b = g.find_tensor("blk.1.ffn_up.weight");
  ASSERT_EQ(a->n_bytes, b->n_bytes);
  EXPECT_EQ(0, std::memcmp(a->data, b->data, a->n_bytes));
  std::filesystem::remove(path);
  std::filesystem::remove(path2);
}

}  // namespace
}  // namespace brisk
