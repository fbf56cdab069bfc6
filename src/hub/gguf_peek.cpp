// Reads just enough of a GGUF header to find general.architecture, for `brisk list`. The
// layout (magic, version, n_tensors, n_kv, then key/type/value records) is the GGUF v2/v3
// format; values are skipped by their encoded size, each bounded by the file size.
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

#include "core/checked_math.h"
#include "hub/cache_scan.h"

namespace brisk::hub {
namespace {

class Reader {
 public:
  explicit Reader(const std::string& path) : in_(path, std::ios::binary) {
    if (in_) {
      in_.seekg(0, std::ios::end);
      size_ = uint64_t(in_.tellg());
      in_.seekg(0);
    }
  }
  bool ok() const { return bool(in_) && !bad_; }
  template <class T>
  T read() {
    T v{};
    if (!bytes(&v, sizeof v)) bad_ = true;
    return v;
  }
  bool bytes(void* out, uint64_t n) {
    if (bad_ || !range_within(pos_, n, size_)) return bad_ = true, false;
    in_.read(static_cast<char*>(out), std::streamsize(n));
    pos_ += n;
    return bool(in_);
  }
  bool skip(uint64_t n) {
    if (bad_ || !range_within(pos_, n, size_)) return bad_ = true, false;
    pos_ += n;
    in_.seekg(std::streamoff(pos_));
    return bool(in_);
  }
  std::string string(uint64_t max_len) {
    const uint64_t n = read<uint64_t>();
    if (bad_ || n > max_len) return bad_ = true, std::string();
    std::string s(n, '\0');
    bytes(s.data(), n);
    return s;
  }

 private:
  std::ifstream in_;
  uint64_t size_ = 0;
  uint64_t pos_ = 0;
  bool bad_ = false;
};

// Byte size of a scalar GGUF value type; 0 for string/array/unknown.
uint64_t scalar_size(uint32_t type) {
  switch (type) {
    case 0: case 1: case 7: return 1;     // u8 i8 bool
    case 2: case 3: return 2;             // u16 i16
    case 4: case 5: case 6: return 4;     // u32 i32 f32
    case 10: case 11: case 12: return 8;  // u64 i64 f64
    default: return 0;
  }
}

bool skip_value(Reader& r, uint32_t type) {
  if (const uint64_t s = scalar_size(type)) return r.skip(s);
  if (type == 8) return r.skip(r.read<uint64_t>());  // string
  if (type != 9) return false;
  const uint32_t elem = r.read<uint32_t>();
  const uint64_t count = r.read<uint64_t>();
  if (const uint64_t s = scalar_size(elem)) {
    const auto n = checked_mul(s, count);
    return n && r.skip(*n);
  }
  if (elem != 8) return false;  // nested arrays are not needed before the architecture key
  for (uint64_t i = 0; i < count && r.ok(); ++i) r.skip(r.read<uint64_t>());
  return r.ok();
}

}  // namespace

std::string gguf_peek_architecture(const std::string& path) {
  Reader r(path);
  char magic[4];
  if (!r.bytes(magic, 4) || std::memcmp(magic, "GGUF", 4) != 0) return "";
  const uint32_t version = r.read<uint32_t>();
  if (version < 2 || version > 3) return "";
  r.read<uint64_t>();  // n_tensors
  const uint64_t n_kv = r.read<uint64_t>();
  for (uint64_t i = 0; i < n_kv && i < 4096 && r.ok(); ++i) {
    const std::string key = r.string(1 << 16);
    const uint32_t type = r.read<uint32_t>();
    if (!r.ok()) return "";
    if (key == "general.architecture" && type == 8) {
      std::string arch = r.string(256);
      return r.ok() ? arch : "";
    }
    if (!skip_value(r, type)) return "";
  }
  return "";
}

}  // namespace brisk::hub
