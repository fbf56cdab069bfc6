// What the fuzz targets that load from disk share: a private temporary folder per process
// (under $TMPDIR) and writing the input's bytes into it.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace brisk::fuzz {

inline const std::string& scratch_dir(const char* name) {
  static const std::string dir = [name] {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/brisk_fuzz_" + name + "_XXXXXX";
    if (!mkdtemp(tmpl.data())) std::abort();
    return tmpl;
  }();
  return dir;
}

inline void write_file(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  const bool ok = std::fwrite(data, 1, size, f) == size;
  if (std::fclose(f) != 0 || !ok) std::abort();
}

}  // namespace brisk::fuzz
