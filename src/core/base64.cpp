#include "core/base64.h"

#include <cstdint>

#include "core/error.h"

namespace brisk {

std::string base64_decode(std::string_view in, const std::string& where) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  BRISK_CHECK(in.size() % 4 != 1, where, ": base64 text of ", in.size(), " characters is truncated");
  std::string out;
  out.reserve(in.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const int v = value(in[i]);
    BRISK_CHECK(v >= 0, where, ": invalid base64 character at offset ", i);
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += char((acc >> bits) & 0xFF);
    }
  }
  return out;
}

}  // namespace brisk
