#include "text/precompiled.h"

#include <cstring>
#include <utf8proc.h>

#include "core/error.h"
#include "text/unicode.h"

namespace brisk::text {

namespace {

// darts-clone unit fields.
bool unit_has_leaf(uint32_t u) { return ((u >> 8) & 1) != 0; }
uint32_t unit_value(uint32_t u) { return u & ((1u << 31) - 1); }
uint32_t unit_label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
uint32_t unit_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

}  // namespace

PrecompiledCharsMap::PrecompiledCharsMap(std::string_view blob, const std::string& where) {
  BRISK_CHECK(blob.size() >= 4, where, ": precompiled charsmap of ", blob.size(), " bytes has no trie size");
  uint32_t trie_bytes = 0;
  for (int i = 3; i >= 0; --i) trie_bytes = (trie_bytes << 8) | uint8_t(blob[size_t(i)]);
  BRISK_CHECK(trie_bytes % 4 == 0 && trie_bytes >= 4 && trie_bytes <= blob.size() - 4, where,
              ": precompiled charsmap trie size ", trie_bytes, " does not fit its ", blob.size(), " bytes");
  units_.resize(trie_bytes / 4);
  for (size_t i = 0; i < units_.size(); ++i) {
    const auto* p = reinterpret_cast<const uint8_t*>(blob.data()) + 4 + 4 * i;
    units_[i] = uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
  }
  strings_ = std::string(blob.substr(4 + trie_bytes));
  BRISK_CHECK(utf8_is_valid(strings_), where, ": precompiled charsmap replacements are not valid UTF-8");
}

bool PrecompiledCharsMap::lookup(std::string_view s, std::string_view* replacement) const {
  const size_t n = units_.size();
  size_t node = unit_offset(units_[0]);
  for (char ch : s) {
    const uint8_t c = uint8_t(ch);
    if (c == 0) break;
    node ^= c;
    if (node >= n) return false;
    const uint32_t u = units_[node];
    if (unit_label(u) != c) return false;
    node ^= unit_offset(u);
    if (node >= n) return false;
    if (unit_has_leaf(u)) {
      const uint32_t at = unit_value(units_[node]);
      if (at >= strings_.size()) return false;  // a value outside the strings: no replacement
      size_t end = at;
      while (end < strings_.size() && strings_[end] != '\0') ++end;
      *replacement = std::string_view(strings_).substr(at, end - at);
      return true;
    }
  }
  return false;
}

std::string PrecompiledCharsMap::normalize(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  std::string_view rep;
  size_t i = 0;
  while (i < text.size()) {
    // One extended grapheme cluster [i, end).
    uint32_t prev = 0;
    size_t end = i + utf8_next(text, i, &prev);
    utf8proc_int32_t state = 0;
    while (end < text.size()) {
      uint32_t c = 0;
      const size_t len = utf8_next(text, end, &c);
      if (utf8proc_grapheme_break_stateful(utf8proc_int32_t(prev), utf8proc_int32_t(c), &state)) break;
      prev = c;
      end += len;
    }
    const std::string_view g = text.substr(i, end - i);
    if (g.size() < 6 && lookup(g, &rep)) {
      out += rep;
    } else {
      for (size_t j = 0; j < g.size();) {
        uint32_t c = 0;
        const size_t len = utf8_next(g, j, &c);
        if (lookup(g.substr(j, len), &rep)) out += rep;
        else out.append(g.substr(j, len));
        j += len;
      }
    }
    i = end;
  }
  return out;
}

}  // namespace brisk::text
