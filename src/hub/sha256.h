// SHA-256 (FIPS 180-4), used to verify files downloaded from the Hub against the sha256 the
// Hub publishes for LFS files. Streaming: update() any number of times, then hex().
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace brisk::hub {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n_bytes);
  std::array<uint8_t, 32> digest();  // finalizes; the object must be reset() before reuse
  std::string hex();                 // finalizes; lowercase 64 hex digits
  void reset();

 private:
  void compress(const uint8_t* block);  // block: 64 bytes
  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_;
  size_t buffer_len_ = 0;
  uint64_t total_len_ = 0;  // bytes
};

// sha256 of a whole file, lowercase hex; brisk::Error when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace brisk::hub
