// Piecewise helpers shared by the byte-level recognizers (SchemaConstraint and the forced tool
// calls). Each recognizer has borrowed_copy() (a copy that does not own what it shares) and
// step(byte) (false: refused, the state is then unusable).
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"

namespace brisk {

// JSON whitespace (RFC 8259) and ASCII digits.
inline bool is_json_ws(uint8_t b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }
inline bool is_ascii_digit(uint8_t b) { return b >= '0' && b <= '9'; }

// Whether every byte of `piece` would be accepted in turn.
template <class C>
bool steps_accept(const C& c, std::string_view piece) {
  C copy = c.borrowed_copy();
  for (char ch : piece)
    if (!copy.step(uint8_t(ch))) return false;
  return true;
}

// `c` advanced by `piece`, as a borrowed copy; throws brisk::Error naming `what` and the byte.
template <class C>
C steps_advance(const C& c, std::string_view piece, const char* what) {
  C copy = c.borrowed_copy();
  for (size_t i = 0; i < piece.size(); ++i)
    BRISK_CHECK(copy.step(uint8_t(piece[i])), what, ": byte ", i, " of the appended piece is not accepted here");
  return copy;
}

// In sorted strings [lo, hi) that share their first `pos` bytes, the subrange whose byte at
// `pos` is b (a string of length pos sorts first). Empty (first == second) when none.
inline std::pair<uint32_t, uint32_t> narrow_candidates(const std::vector<std::string>& v, uint32_t lo, uint32_t hi,
                                                       uint32_t pos, uint8_t b) {
  const auto key = [pos](const std::string& s) { return s.size() <= pos ? -1 : int(uint8_t(s[pos])); };
  const auto first = v.begin() + lo, last = v.begin() + hi;
  const auto a = std::partition_point(first, last, [&](const std::string& s) { return key(s) < int(b); });
  const auto z = std::partition_point(a, last, [&](const std::string& s) { return key(s) == int(b); });
  return {uint32_t(a - v.begin()), uint32_t(z - v.begin())};
}

// Free text up to a marker: keeps the last marker.size() bytes in `tail`; true when they are
// the marker (the tail is then cleared).
inline bool marker_reached(std::string& tail, std::string_view marker, uint8_t b) {
  tail.push_back(char(b));
  if (tail.size() > marker.size()) tail.erase(0, tail.size() - marker.size());
  if (tail != marker) return false;
  tail.clear();
  return true;
}

}  // namespace brisk
