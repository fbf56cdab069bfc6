// libFuzzer target: the JSON Schema compiler and recognizer (SchemaConstraint), and the forced
// XML and Gemma 4 tool calls built from the same schema as a function's parameters.
// Input: a control byte (piece size), a schema as JSON text up to the first NUL, then a text
// fed piece by piece through accepts()/advance() until a piece is rejected. Checks: compile
// either succeeds or throws brisk::Error; accepts() and advance() agree; an accepted prefix
// that is complete() parses as JSON with nlohmann::json (numbers included: they stay finite).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/gemma4_tool_call_constraint.h"
#include "runtime/schema_constraint.h"
#include "runtime/xml_tool_call_constraint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace brisk;
  if (size < 2 || size > (64u << 10)) return 0;
  const size_t piece = 1 + (data[0] & 7);
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t nul = rest.find('\0');
  if (nul == std::string_view::npos) return 0;
  const auto schema = nlohmann::json::parse(rest.substr(0, nul), nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  const std::string_view text = rest.substr(nul + 1);
  const auto feed = [&](auto c) {  // accepts() / advance() agreement; returns the accepted length
    size_t pos = 0;
    while (pos < text.size()) {
      const std::string_view p = text.substr(pos, std::min(piece, text.size() - pos));
      const bool ok = c.accepts(p);
      auto copy = c;
      bool advanced = true;
      try {
        copy.advance(p);
      } catch (const Error&) {
        advanced = false;
      }
      if (ok != advanced) std::abort();
      if (!ok) break;
      c = copy;
      pos += p.size();
    }
    return std::make_pair(pos, c.complete());
  };
  try {
    (void)feed(XmlToolCallConstraint({tool_function_spec("f", &schema)}));
    (void)feed(Gemma4ToolCallConstraint({tool_function_spec("f", &schema)}));
  } catch (const Error&) {
  }
  try {
    const auto [pos, complete] = feed(SchemaConstraint(compile_json_schema(schema)));
    if (complete) {  // numbers are kept finite, so nlohmann reads every one
      try {
        (void)nlohmann::json::parse(text.substr(0, pos));
      } catch (const nlohmann::json::exception&) {
        std::abort();
      }
    }
  } catch (const Error&) {
  }
  return 0;
}
