#include "runtime/model_tokenizer.h"

#include <filesystem>

#include "core/log.h"
#include "formats/gguf.h"

namespace brisk {

std::unique_ptr<Tokenizer> tokenizer_load_gguf(const gguf::File& file) {
  if (!file.find("tokenizer.ggml.model")) return nullptr;
  log_info("tokenizer: not built into this binary yet; use --prompt-ids");
  return nullptr;
}

std::unique_ptr<Tokenizer> tokenizer_load_hf(const std::string& dir) {
  if (!std::filesystem::exists(std::filesystem::path(dir) / "tokenizer.json")) return nullptr;
  log_info("tokenizer: not built into this binary yet; use --prompt-ids");
  return nullptr;
}

}  // namespace brisk
