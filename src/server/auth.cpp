#include "server/auth.h"

#include <algorithm>
#include <cctype>

namespace brisk::server {

bool keys_equal(std::string_view a, std::string_view b) {
  // Runs over the longer length whatever the contents, so timing does not reveal a prefix.
  const size_t n = std::max(a.size(), b.size());
  unsigned diff = unsigned(a.size() != b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? (unsigned char)a[i] : 0;
    const unsigned char y = i < b.size() ? (unsigned char)b[i] : 0;
    diff |= unsigned(x ^ y);
  }
  return diff == 0;
}

bool request_authorized(std::string_view key, std::string_view authorization, std::string_view x_api_key) {
  if (key.empty()) return true;
  bool ok = false;
  if (authorization.size() > 7) {
    std::string scheme(authorization.substr(0, 7));
    for (auto& c : scheme) c = char(std::tolower((unsigned char)c));
    if (scheme == "bearer ") {
      std::string_view token = authorization.substr(7);
      while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
      while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
      ok |= keys_equal(token, key);
    }
  }
  if (!x_api_key.empty()) ok |= keys_equal(x_api_key, key);
  return ok;
}

}  // namespace brisk::server
