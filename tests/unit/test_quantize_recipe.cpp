// Recipe mixtures: the per-tensor types llama.cpp's recipes choose, checked on the real shapes
// whose llama.cpp file sizes are known (Qwen2.5-0.5B: Q8_0 501 MiB, Q4_0 330 MiB, Q4_K_M 374 MiB;
// Llama-3.2-1B Q4_K_M 763 MiB), and on the layer-position rules directly.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "quant/recipe.h"

namespace brisk {
namespace {

struct ModelShape {
  int64_t n_vocab, n_embd, n_layer, q_width, kv_width, n_ff;
  bool tied;
};

std::vector<RecipeTensor> tensors_of(const ModelShape& s) {
  std::vector<RecipeTensor> v;
  auto m = [&](std::string n, int64_t in, int64_t out) { v.push_back({n, {uint64_t(in), uint64_t(out)}}); };
  m("token_embd.weight", s.n_embd, s.n_vocab);
  v.push_back({"output_norm.weight", {uint64_t(s.n_embd)}});
  if (!s.tied) m("output.weight", s.n_embd, s.n_vocab);
  for (int64_t i = 0; i < s.n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    v.push_back({b + "attn_norm.weight", {uint64_t(s.n_embd)}});
    m(b + "attn_q.weight", s.n_embd, s.q_width);
    m(b + "attn_k.weight", s.n_embd, s.kv_width);
    m(b + "attn_v.weight", s.n_embd, s.kv_width);
    m(b + "attn_output.weight", s.q_width, s.n_embd);
    m(b + "ffn_gate.weight", s.n_embd, s.n_ff);
    m(b + "ffn_up.weight", s.n_embd, s.n_ff);
    m(b + "ffn_down.weight", s.n_ff, s.n_embd);
  }
  return v;
}

double mib_of(const ModelShape& s, const char* recipe_name, std::map<std::string, QuantType>* types = nullptr) {
  const auto r = quant_recipe_from_name(recipe_name);
  EXPECT_TRUE(r.has_value());
  const auto list = tensors_of(s);
  RecipeChooser c(*r, list);
  double bytes = 0;
  for (const auto& t : list) {
    const QuantType q = c.choose(t.name, QuantType::F32);
    if (types) (*types)[t.name] = q;
    uint64_t rows = 1;
    for (size_t i = 1; i < t.ne.size(); ++i) rows *= t.ne[i];
    const auto rb = quant_row_bytes(q, t.ne[0]);
    EXPECT_TRUE(rb.has_value()) << t.name;
    bytes += double(rb.value_or(0) * rows);
  }
  return bytes / 1048576.0;
}

const ModelShape kQwen25_05B{151936, 896, 24, 896, 128, 4864, true};
const ModelShape kLlama32_1B{128256, 2048, 16, 2048, 512, 8192, true};

TEST(QuantizeRecipe, FileSizesMatchLlamaCpp) {
  EXPECT_NEAR(mib_of(kQwen25_05B, "Q8_0"), 500.8, 2.0);
  EXPECT_NEAR(mib_of(kQwen25_05B, "Q4_0"), 329.9, 2.0);
  EXPECT_NEAR(mib_of(kQwen25_05B, "Q4_K_M"), 373.4, 2.0);
  EXPECT_NEAR(mib_of(kLlama32_1B, "Q4_K_M"), 762.8, 3.0);
}

TEST(QuantizeRecipe, QwenRowsOf896FallBack) {
  std::map<std::string, QuantType> t;
  mib_of(kQwen25_05B, "Q4_K_M", &t);
  EXPECT_EQ(t["token_embd.weight"], QuantType::Q8_0);       // output role: Q6_K -> Q8_0 (896 % 256)
  EXPECT_EQ(t["blk.0.attn_q.weight"], QuantType::Q5_0);     // Q4_K -> Q5_0
  EXPECT_EQ(t["blk.0.attn_v.weight"], QuantType::Q8_0);     // more bits: Q6_K -> Q8_0
  EXPECT_EQ(t["blk.3.attn_v.weight"], QuantType::Q5_0);
  EXPECT_EQ(t["blk.0.ffn_down.weight"], QuantType::Q6_K);   // 4864 = 19 x 256
  EXPECT_EQ(t["blk.3.ffn_down.weight"], QuantType::Q4_K);
  EXPECT_EQ(t["blk.5.ffn_down.weight"], QuantType::Q6_K);   // (5 - 3) % 3 == 2
  EXPECT_EQ(t["blk.23.ffn_down.weight"], QuantType::Q6_K);
  EXPECT_EQ(t["output_norm.weight"], QuantType::F32);
}

TEST(QuantizeRecipe, LayerRulesOfSmallRecipes) {
  std::map<std::string, QuantType> t;
  mib_of(kLlama32_1B, "Q4_K_S", &t);
  EXPECT_EQ(t["token_embd.weight"], QuantType::Q6_K);
  EXPECT_EQ(t["blk.3.attn_v.weight"], QuantType::Q5_K);
  EXPECT_EQ(t["blk.4.attn_v.weight"], QuantType::Q4_K);
  EXPECT_EQ(t["blk.1.ffn_down.weight"], QuantType::Q5_K);  // first 16/8 layers
  EXPECT_EQ(t["blk.2.ffn_down.weight"], QuantType::Q4_K);
  t.clear();
  mib_of(kLlama32_1B, "Q8_0", &t);
  for (const auto& [name, q] : t) EXPECT_TRUE(q == QuantType::Q8_0 || q == QuantType::F32) << name;
  t.clear();
  mib_of(kLlama32_1B, "Q5_K_S", &t);
  EXPECT_EQ(t["blk.0.attn_v.weight"], QuantType::Q5_K);
  EXPECT_EQ(t["token_embd.weight"], QuantType::Q6_K);
}

TEST(QuantizeRecipe, NamesAndFtypes) {
  EXPECT_EQ(quant_recipe_from_name("q4_k_m")->ftype, 15u);
  EXPECT_EQ(quant_recipe_from_name("Q8_0")->ftype, 7u);
  EXPECT_EQ(quant_recipe_from_name("bf16")->ftype, 32u);
  EXPECT_EQ(quant_recipe_from_name("Q5_K_S")->ftype, 16u);
  EXPECT_FALSE(quant_recipe_from_name("Q3_Z").has_value());
  const auto r = *quant_recipe_from_name("Q4_0");
  RecipeChooser c(r, {{"a.weight", {64, 4}}});
  EXPECT_THROW(c.choose("b.weight", QuantType::F32), Error);
}

}  // namespace
}  // namespace brisk
