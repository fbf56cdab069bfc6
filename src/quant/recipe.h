// Per-tensor type choice for `brisk quantize` and the random benchmark models: the mixtures
// llama.cpp's recipes produce (Q4_K_M puts Q6_K on attn_v and on the ffn_down of some layers,
// the output matrix gets Q6_K, rows that are not whole K-blocks fall back to a legacy format),
// so that a file of a given recipe name has the same tensor types and size as llama.cpp's.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "quant/types.h"

namespace brisk {

struct QuantRecipe {
  std::string name;        // "Q4_K_M"
  QuantType base;          // the default type of matrices
  uint32_t ftype;          // llama.cpp's llama_ftype value, stored as general.file_type
};

// Case-insensitive: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, F16,
// BF16, F32 (also Q4_K / Q5_K as the _M recipes, as llama.cpp accepts). nullopt when unknown.
std::optional<QuantRecipe> quant_recipe_from_name(std::string_view name);
std::string quant_recipe_names();  // for error messages

struct RecipeTensor {
  std::string name;               // GGUF name, e.g. "blk.3.ffn_down.weight"
  std::vector<uint64_t> ne;       // GGUF order: ne[0] is the row length
};

// Chooses the stored type of every tensor of one model. Needs the whole tensor list up front:
// some choices depend on a tensor's position among its kind (layer i of n).
class RecipeChooser {
 public:
  RecipeChooser(const QuantRecipe& recipe, const std::vector<RecipeTensor>& tensors);
  // The type for tensor `name` (one of those given). `current` is its stored type: tensors
  // that are not quantized (1-D, norms) keep F32 unless already F16/BF16.
  QuantType choose(const std::string& name, QuantType current) const;
  // How many matrices had to leave the recipe's type because of their row length.
  int n_fallback() const { return n_fallback_; }

 private:
  QuantType choose_uncounted(const RecipeTensor& t) const;
  QuantRecipe recipe_;
  std::vector<RecipeTensor> tensors_;
  bool has_output_ = false;
  int n_attn_v_ = 0;
  int n_ffn_down_ = 0;
  mutable int n_fallback_ = 0;
};

}  // namespace brisk
