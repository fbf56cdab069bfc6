// Read-only bytes of a file: memory-mapped, or read into an aligned heap buffer. Parsers work
// on a MappedFile so that tests and fuzzers can hand them an in-memory buffer as well.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace brisk {

class MappedFile {
 public:
  enum class Mode { mmap, read };
  // Throws brisk::Error naming the path when the file cannot be opened or read.
  static std::shared_ptr<const MappedFile> open(const std::string& path, Mode mode = Mode::mmap);
  // Copies `size` bytes into an owned 64-byte-aligned buffer (for tests and fuzzers).
  static std::shared_ptr<const MappedFile> from_memory(const void* data, size_t size,
                                                       std::string name = "<memory>");
  // An owned 64-byte-aligned buffer of `size` bytes that `fill` writes (once, here).
  static std::shared_ptr<const MappedFile> filled(size_t size, std::string name,
                                                  const std::function<void(uint8_t*)>& fill);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // True for a memory map (its pages must not be written); false for bytes read into a buffer
  // this object owns.
  bool mapped() const { return mapped_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
  bool mapped_ = false;
  void* owned_ = nullptr;
};

}  // namespace brisk
