// Typed access to fields of an untrusted JSON request body. A missing field gives the default;
// a field of the wrong type or out of range is a 400 naming the field.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace brisk::server {

using nlohmann::json;

// The field, or nullptr when absent or null.
const json* field(const json& obj, const char* name);

std::optional<std::string> get_string(const json& obj, const char* name);
std::optional<bool> get_bool(const json& obj, const char* name);
// Integer in [lo, hi] (floats with an integral value are accepted).
std::optional<int64_t> get_int(const json& obj, const char* name, int64_t lo, int64_t hi);
// Number in [lo, hi].
std::optional<double> get_number(const json& obj, const char* name, double lo, double hi);
// Parses a request body: must be a JSON object.
json parse_body(const std::string& body);
// JSON text that is always valid UTF-8 (invalid bytes become U+FFFD).
std::string dump_json(const json& j);
// The longest prefix of a JSON text cut short (a tool call's arguments at max_tokens) that
// ends after a complete member or element, with its open strings and containers closed:
// `{"a": 1, "b": "xy` -> `{"a":1,"b":"xy"}`-like text, `{"a": 1, "b` -> `{"a": 1}`.
std::string close_partial_json(std::string_view text);

}  // namespace brisk::server
