// Python's text forms of values, as templates print them: repr() of floats (shortest
// round-trip digits, exponent outside 1e-4 <= |x| < 1e16) and strings (quote choice, escapes
// of non-printable characters), and json.dumps (transformers' tojson: ensure_ascii, indent,
// separators, sort_keys).
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace brisk::jinja {

class Value;

std::string py_float_repr(double d);
void py_string_repr(std::string& out, std::string_view s);

struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent = std::nullopt;          // None: one line; else per level
  std::optional<std::string> item_separator = std::nullopt;  // default ", " ("," when indented)
  std::optional<std::string> key_separator = std::nullopt;   // default ": "
  bool sort_keys = false;
};

// Throws brisk::Error for values json.dumps cannot serialise (undefined, callables, ...).
std::string json_dumps(const Value& v, const JsonDumpOptions& opt);

}  // namespace brisk::jinja
