#include "runtime/model_tokenizer.h"

#include <filesystem>

#include "core/log.h"
#include "formats/gguf.h"

namespace brisk {

std::unique_ptr<Tokenizer> tokenizer_load_gguf(const gguf::File& file) {
  if (!file.find("tokenizer.ggml.model")) return nullptr;
  // GGUF vocabularies are read by the tokenizer module once it supports them; until then a
  // GGUF model runs from --prompt-ids.
  log_info("tokenizer: GGUF vocabularies are not supported by this build; use --prompt-ids");
  return nullptr;
}

std::unique_ptr<Tokenizer> tokenizer_load_hf(const std::string& dir) {
  if (!std::filesystem::exists(std::filesystem::path(dir) / "tokenizer.json")) return nullptr;
  return Tokenizer::from_hf_dir(dir);
}

}  // namespace brisk
