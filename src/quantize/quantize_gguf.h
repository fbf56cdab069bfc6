// `brisk quantize`: rewrites a model (GGUF file, or a Hugging Face folder converted on the way)
// with the tensor types of a recipe, keeping every metadata key and the tokenizer, and setting
// general.file_type to llama.cpp's ftype value of the recipe.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "quant/recipe.h"

namespace brisk {

struct QuantizeParams {
  std::string in;        // GGUF file, or a Hugging Face folder (llama, mistral, qwen2, qwen3)
  std::string out;       // GGUF file written
  QuantRecipe recipe;
  int32_t n_threads = 0; // 0: all cores
};

struct QuantizeReport {
  uint64_t bytes_in = 0;                 // tensor data bytes read
  uint64_t bytes_out = 0;                // tensor data bytes written
  int n_fallback = 0;                    // matrices that left the recipe's type (row length)
  std::map<std::string, int> type_counts;  // type name -> tensors written in it
};

QuantizeReport quantize_gguf(const QuantizeParams& params);

}  // namespace brisk
