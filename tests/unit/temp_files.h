// Temporary files of one test process: every path is inside one folder per process, which is
// removed with everything in it when the process exits (no files left behind across runs).
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace brisk::testing {

inline const std::filesystem::path& process_temp_dir() {
  struct Dir {
    std::filesystem::path path;
    Dir() : path(std::filesystem::path(::testing::TempDir()) / ("brisk_tests_" + std::to_string(::getpid()))) {
      std::filesystem::create_directories(path);
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return dir.path;
}

}  // namespace brisk::testing
