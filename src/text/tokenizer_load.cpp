#include "text/tokenizer_load.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "formats/gguf.h"

namespace brisk {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return Tokenizer::from_hf_dir(path);
  const fs::path p(path);
  if (p.filename() == "tokenizer.json") return Tokenizer::from_hf_dir(p.parent_path().string());
  BRISK_CHECK(fs::exists(p, ec), "tokenizer: ", path, " does not exist");
  char magic[4] = {};
  std::ifstream(path, std::ios::binary).read(magic, 4);
  if (p.extension() == ".gguf" || std::memcmp(magic, "GGUF", 4) == 0)
    return Tokenizer::from_gguf(gguf::File::open(path));
  fail("tokenizer: ", path, " is neither a folder with tokenizer.json nor a GGUF file");
}

}  // namespace brisk
