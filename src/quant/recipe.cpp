// Type mixtures of llama.cpp's quantization recipes (llama_tensor_get_type for the K-quant and
// legacy recipes without an importance matrix):
// - the output matrix (token_embd when embeddings are tied) is Q6_K, or Q8_0 for the Q8_0
//   recipe and when its rows are not whole blocks of the recipe's type;
// - attn_v: Q6_K in "more bits" layers for Q4_K_M / Q5_K_M, Q5_K in the first 4 for Q4_K_S;
// - ffn_down: Q6_K in "more bits" layers for Q4_K_M / Q5_K_M, Q5_K in the first 1/8 for Q4_K_S;
// - a matrix whose row length is not a multiple of its type's block falls back:
//   Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, then F16 if still not whole blocks.
// "More bits" layers: the first and last eighth and every third layer in between.
#include "quant/recipe.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "core/error.h"

namespace brisk {
namespace {

struct RecipeRow {
  const char* name;
  QuantType base;
  uint32_t ftype;
};

using Q = QuantType;
constexpr RecipeRow kRecipes[] = {
    {"F32", Q::F32, 0},      {"F16", Q::F16, 1},       {"Q4_0", Q::Q4_0, 2},     {"Q4_1", Q::Q4_1, 3},
    {"Q8_0", Q::Q8_0, 7},    {"Q5_0", Q::Q5_0, 8},     {"Q5_1", Q::Q5_1, 9},     {"Q4_K_S", Q::Q4_K, 14},
    {"Q4_K_M", Q::Q4_K, 15}, {"Q5_K_S", Q::Q5_K, 16},  {"Q5_K_M", Q::Q5_K, 17},  {"Q6_K", Q::Q6_K, 18},
    {"BF16", Q::BF16, 32},   {"Q4_K", Q::Q4_K, 15},    {"Q5_K", Q::Q5_K, 17},
};

std::string upper(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = char(std::toupper(static_cast<unsigned char>(c)));
  return r;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// "blk.N.xxx" -> N; -1 otherwise.
int layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  const char* p = name.c_str() + 4;
  char* end = nullptr;
  const long v = std::strtol(p, &end, 10);
  if (end == p || *end != '.' || v < 0 || v > 1000000) return -1;
  return int(v);
}

bool is_attn_v(const std::string& n) { return contains(n, "attn_v.weight"); }
bool is_ffn_down(const std::string& n) { return contains(n, "ffn_down") && ends_with(n, ".weight"); }

// Matrices a recipe quantizes: 2-D or more weights, not norms or position embeddings.
bool quantizable(const RecipeTensor& t) {
  if (t.ne.size() < 2 || !ends_with(t.name, "weight")) return false;
  if (contains(t.name, "_norm.") || contains(t.name, "norm.weight")) return false;
  if (contains(t.name, "ffn_gate_inp") || contains(t.name, "position_embd")) return false;  // routers, shared gate
  if (contains(t.name, "ssm_conv1d")) return false;  // small conv kernels (llama.cpp keeps them)
  return true;
}

}  // namespace

std::optional<QuantRecipe> quant_recipe_from_name(std::string_view name) {
  const std::string u = upper(name);
  for (const auto& r : kRecipes)
    if (u == r.name) return QuantRecipe{.name = r.name, .base = r.base, .ftype = r.ftype};
  return std::nullopt;
}

std::string quant_recipe_names() {
  std::string s;
  for (const auto& r : kRecipes) s += (s.empty() ? "" : ", ") + std::string(r.name);
  return s;
}

RecipeChooser::RecipeChooser(const QuantRecipe& recipe, const std::vector<RecipeTensor>& tensors)
    : recipe_(recipe), tensors_(tensors) {
  for (const auto& t : tensors_) {
    if (t.name == "output.weight") has_output_ = true;
    if (is_attn_v(t.name)) ++n_attn_v_;
    if (is_ffn_down(t.name)) ++n_ffn_down_;
  }
}

QuantType RecipeChooser::choose(const std::string& name, QuantType current) const {
  auto it = std::find_if(tensors_.begin(), tensors_.end(), [&](const RecipeTensor& t) { return t.name == name; });
  BRISK_CHECK(it != tensors_.end(), "quantize recipe: tensor '", name, "' was not announced");
  if (!quantizable(*it)) return current == Q::F16 || current == Q::BF16 ? current : Q::F32;
  return choose_uncounted(*it);
}

QuantType RecipeChooser::choose_uncounted(const RecipeTensor& t) const {
  const uint32_t f = recipe_.ftype;
  QuantType type = recipe_.base;
  const auto& info = quant_type_info(type);
  if (!info.quantized) return type;  // F32 / F16 / BF16: every matrix in that type

  const uint64_t nx = t.ne[0];
  const int il = layer_of(t.name);
  if (t.name == "output.weight" || (!has_output_ && t.name == "token_embd.weight")) {
    if (nx % info.block_size != 0) type = Q::Q8_0;
    else if (type != Q::Q8_0) type = Q::Q6_K;
  } else if (is_attn_v(t.name)) {
    // llama.cpp counts attn_v tensors in file order; the layer index is the same count for
    // the dense models (one attn_v per layer, in layer order).
    const int i = il >= 0 ? il : 0;
    if ((f == 15 || f == 17) && use_more_bits(i, n_attn_v_)) type = Q::Q6_K;
    else if (f == 14 && i < 4) type = Q::Q5_K;
  } else if (is_ffn_down(t.name)) {
    const int i = il >= 0 ? il : 0;
    if ((f == 15 || f == 17) && use_more_bits(i, n_ffn_down_)) type = Q::Q6_K;
    else if (f == 14 && i < n_ffn_down_ / 8) type = Q::Q5_K;
  }

  const auto& chosen = quant_type_info(type);
  if (nx % chosen.block_size != 0) {
    ++n_fallback_;
    switch (type) {
      case Q::Q4_K: type = Q::Q5_0; break;
      case Q::Q5_K: type = Q::Q5_1; break;
      case Q::Q6_K: type = Q::Q8_0; break;
      default: type = Q::F16; break;
    }
    if (nx % quant_type_info(type).block_size != 0) type = Q::F16;
  }
  return type;
}

}  // namespace brisk
