// `brisk quantize`: rewrites a model (GGUF file, or a Hugging Face folder converted on the way)
// with the tensor types of a recipe, keeping every metadata key, the tokenizer and the chat
// template, and setting general.file_type to llama.cpp's ftype value of the recipe. Refused
// before anything is written: an output that is the input file, an architecture brisk does
// not know, and (without allow_requantize) an input that is already quantized.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "quant/recipe.h"

namespace brisk {

// Where a quantization is: converting a Hugging Face folder to float32 first (total 0), or
// tensor `done` of `total` (name: the tensor being written).
struct QuantizeProgress {
  bool converting = false;
  size_t done = 0, total = 0;
  std::string name;
};

struct QuantizeParams {
  std::string in;        // GGUF file, or a Hugging Face folder (or one of its safetensors files)
  std::string out;       // GGUF file written; never the input file
  QuantRecipe recipe;
  int32_t n_threads = 0; // 0: all cores
  // A GGUF whose tensors are already quantized is refused unless this is set: requantizing
  // compounds the rounding of both formats (llama.cpp's --allow-requantize).
  bool allow_requantize = false;
  std::function<void(const QuantizeProgress&)> on_progress{};  // optional
};

struct QuantizeReport {
  uint64_t bytes_in = 0;                 // tensor data bytes read
  uint64_t bytes_out = 0;                // tensor data bytes written
  int n_fallback = 0;                    // matrices that left the recipe's type (row length)
  int n_requantized = 0;                 // tensors that were quantized in the input
  std::map<std::string, int> type_counts;  // type name -> tensors written in it
};

QuantizeReport quantize_gguf(const QuantizeParams& params);

}  // namespace brisk
