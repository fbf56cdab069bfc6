// libFuzzer target: the byte-level JSON recognizer (JsonConstraint) on arbitrary bytes. The
// first byte picks the options and the piece sizes; the rest is fed piece by piece through
// accepts()/advance() until a piece is rejected. Checked against nlohmann::json as the
// reference parser: an accepted prefix that is complete() must parse (and be an object under
// require_object), and with default options a text the reference parses must be accepted
// whole. brisk::Error is the only acceptable failure of the API itself.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/json_constraint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace brisk;
  if (size < 1 || size > (256u << 10)) return 0;
  const uint8_t ctl = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const bool defaults = (ctl & 0x0F) == 0;
  const JsonConstraintOptions opt = {
      .require_object = (ctl & 1) != 0,
      .max_depth = defaults ? 256 : 1 + (ctl & 0x0E) * 4,
      .max_whitespace_run = (ctl & 2) ? int32_t((ctl >> 4) & 7) : 0,
  };
  const size_t piece = 1 + (ctl >> 5);
  try {
    JsonConstraint c(opt);
    size_t pos = 0;
    while (pos < text.size()) {
      const std::string_view p = text.substr(pos, std::min(piece, text.size() - pos));
      const bool ok = c.accepts(p);
      JsonConstraint copy = c;
      bool advanced = true;
      try {
        copy.advance(p);
      } catch (const Error&) {
        advanced = false;
      }
      if (ok != advanced) std::abort();  // accepts() and advance() must agree
      if (!ok) break;
      c = copy;
      pos += p.size();
    }
    const std::string_view accepted = text.substr(0, pos);
    if (c.complete()) {
      // A complete accepted text must be valid JSON. The grammar has no number range, so a
      // number beyond double range (1E999), which the reference refuses, is not a mismatch.
      try {
        const auto j = nlohmann::json::parse(accepted);
        if (opt.require_object && !j.is_object()) std::abort();
      } catch (const nlohmann::json::out_of_range&) {
      } catch (const nlohmann::json::exception&) {
        std::abort();
      }
    }
    // Reference direction: valid JSON must be accepted whole by the default recognizer. Left
    // out: nesting over the limit, a byte order mark (the reference skips it) and NUL bytes
    // (the reference reads a NUL as the end of the input).
    size_t opens = 0;
    for (char ch : text) opens += (ch == '[' || ch == '{');
    if (defaults && opens < 256 && text.substr(0, 3) != "\xEF\xBB\xBF" &&
        text.find('\0') == std::string_view::npos) {
      const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (!j.is_discarded() && (!opt.require_object || j.is_object())) {
        if (pos != text.size() || !c.complete()) std::abort();
      }
    }
  } catch (const Error&) {
  }
  return 0;
}
