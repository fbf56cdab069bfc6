// Helpers shared by the GGUF and safetensors tests: temporary files and whole-file reads.
#pragma once
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "temp_files.h"

namespace brisk::test {

// A fresh temporary path, unique within the process and across concurrent runs.
inline std::string temp_path(const std::string& stem) {
  static std::atomic<int> counter{0};
  return (brisk::testing::process_temp_dir() / (std::to_string(counter++) + "_" + stem)).string();
}

inline std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline void write_all(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

inline std::string shared_data() { return BRISK_SHARED_DATA; }

// Files under shared data matching `dir/*suffix` (sorted); empty when the folder is missing.
inline std::vector<std::string> shared_files(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(shared_data() + "/" + dir, ec)) {
    const std::string p = e.path().string();
    if (p.size() >= suffix.size() && p.compare(p.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace brisk::test
