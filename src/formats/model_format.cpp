#include "formats/model_format.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "formats/display.h"
#include "formats/json_file.h"

namespace brisk {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kMaxIndexBytes = 64ull << 20;  // an index this large is not an index

// " (it looks like a text file starting with "...")" or " (first bytes 12 ab ...)".
std::string describe_start(const std::string& head) {
  const bool text = std::all_of(head.begin(), head.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x20 || c == '\n' || c == '\r' || c == '\t';
  });
  if (text) return str_cat("it looks like a text file starting with \"", display_text(head.substr(0, 40)), "\"");
  std::string hex;
  for (size_t i = 0; i < std::min<size_t>(head.size(), 8); ++i) {
    char b[4];
    std::snprintf(b, sizeof b, "%02x", static_cast<unsigned char>(head[i]));
    if (i) hex += ' ';
    hex += b;
  }
  return "its first bytes are " + hex;
}

bool is_index(const std::string& path, uint64_t size, const std::string& head) {
  const size_t first = head.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || head[first] != '{' || size > kMaxIndexBytes) return false;
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("weight_map");
}

}  // namespace

const char* model_format_name(ModelFormat format) {
  switch (format) {
    case ModelFormat::gguf: return "GGUF";
    case ModelFormat::safetensors: return "safetensors";
    case ModelFormat::safetensors_index: return "safetensors index";
    case ModelFormat::folder: return "folder";
  }
  return "?";
}

ModelFormat model_format_detect(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  BRISK_CHECK(fs::exists(st), path, ": no such file or folder");
  if (fs::is_directory(st)) return ModelFormat::folder;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  BRISK_CHECK(f, path, ": cannot open: ", std::strerror(errno));
  char buf[64];
  const size_t n = std::fread(buf, 1, sizeof buf, f);
  std::fclose(f);
  const std::string head(buf, n);
  BRISK_CHECK(n > 0, path, ": empty file, not a model");
  const uint64_t size = fs::file_size(path, ec);
  if (n >= 4 && head.compare(0, 4, "GGUF") == 0) return ModelFormat::gguf;
  if (n >= 9) {
    uint64_t header = 0;
    for (int i = 7; i >= 0; --i) header = (header << 8) | static_cast<unsigned char>(head[size_t(i)]);
    if (head[8] == '{' && header >= 2 && header <= size - 8) return ModelFormat::safetensors;
  }
  if (is_index(path, size, head)) return ModelFormat::safetensors_index;
  fail(path, ": not a model file: neither GGUF (starts with \"GGUF\") nor safetensors (an 8-byte header length, "
             "then JSON); ", describe_start(head));
}

std::string hf_folder_of(const std::string& path, ModelFormat format) {
  const fs::path dir = format == ModelFormat::folder ? fs::path(path) : fs::path(path).parent_path();
  const std::string shown = dir.empty() ? "." : dir.string();
  std::error_code ec;
  if (fs::exists((dir.empty() ? fs::path(".") : dir) / "config.json", ec)) return dir.empty() ? "." : dir.string();
  if (format != ModelFormat::folder)
    fail(path, ": a ", model_format_name(format), " file needs the model's config.json (architecture and sizes) in ",
         "its folder, and ", shown, " has none");
  bool has_gguf = false, has_safetensors = false;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    has_gguf = has_gguf || e.path().extension() == ".gguf";
    has_safetensors = has_safetensors || e.path().extension() == ".safetensors";
  }
  if (has_gguf && !has_safetensors) fail(shown, ": no config.json; the folder holds GGUF files: give one of them");
  fail(shown, ": no config.json: a Hugging Face model folder needs config.json (architecture and sizes) beside its ",
       "*.safetensors files");
}

}  // namespace brisk
