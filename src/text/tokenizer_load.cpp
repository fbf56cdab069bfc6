#include "text/tokenizer_load.h"

#include <filesystem>

#include "core/error.h"

namespace brisk {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return Tokenizer::from_hf_dir(path);
  const fs::path p(path);
  if (p.filename() == "tokenizer.json") return Tokenizer::from_hf_dir(p.parent_path().string());
  BRISK_CHECK(fs::exists(p, ec), "tokenizer: ", path, " does not exist");
  fail("tokenizer: ", path, " is neither a folder with tokenizer.json nor a GGUF file");
}

}  // namespace brisk
