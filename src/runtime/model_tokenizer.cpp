#include "runtime/model_tokenizer.h"

#include <filesystem>

#include "formats/gguf.h"

namespace brisk {

std::unique_ptr<Tokenizer> tokenizer_load_gguf(const gguf::File& file) {
  if (!file.find("tokenizer.ggml.model")) return nullptr;
  return Tokenizer::from_gguf(file);
}

std::unique_ptr<Tokenizer> tokenizer_load_hf(const std::string& dir) {
  if (!std::filesystem::exists(std::filesystem::path(dir) / "tokenizer.json")) return nullptr;
  return Tokenizer::from_hf_dir(dir);
}

}  // namespace brisk
