#include "server/json_fields.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "server/errors.h"

namespace brisk::server {

const json* field(const json& obj, const char* name) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<std::string> get_string(const json& obj, const char* name) {
  const json* f = field(obj, name);
  if (!f) return std::nullopt;
  if (!f->is_string()) bad_request(name, str_cat("'", name, "' must be a string, got ", f->type_name()));
  return f->get<std::string>();
}

std::optional<bool> get_bool(const json& obj, const char* name) {
  const json* f = field(obj, name);
  if (!f) return std::nullopt;
  if (!f->is_boolean()) bad_request(name, str_cat("'", name, "' must be a boolean, got ", f->type_name()));
  return f->get<bool>();
}

std::optional<int64_t> get_int(const json& obj, const char* name, int64_t lo, int64_t hi) {
  const json* f = field(obj, name);
  if (!f) return std::nullopt;
  int64_t v = 0;
  if (f->is_number_integer() || f->is_number_unsigned()) {
    if (f->is_number_unsigned() && f->get<uint64_t>() > uint64_t(INT64_MAX))
      bad_request(name, str_cat("'", name, "' is out of range [", lo, ", ", hi, "]"));
    v = f->get<int64_t>();
  } else if (f->is_number_float()) {
    const double d = f->get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15)
      bad_request(name, str_cat("'", name, "' must be an integer, got ", d));
    v = int64_t(d);
  } else {
    bad_request(name, str_cat("'", name, "' must be an integer, got ", f->type_name()));
  }
  if (v < lo || v > hi) bad_request(name, str_cat("'", name, "' is ", v, ", outside [", lo, ", ", hi, "]"));
  return v;
}

std::optional<double> get_number(const json& obj, const char* name, double lo, double hi) {
  const json* f = field(obj, name);
  if (!f) return std::nullopt;
  if (!f->is_number()) bad_request(name, str_cat("'", name, "' must be a number, got ", f->type_name()));
  const double v = f->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi)
    bad_request(name, str_cat("'", name, "' is ", v, ", outside [", lo, ", ", hi, "]"));
  return v;
}

// Nesting depth of a JSON text (brackets outside strings); bounded before parsing so that a
// deeply nested body cannot exhaust the stack of the recursive parts of the JSON library.
static size_t json_depth(const std::string& s) {
  size_t depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return max_depth;
}

json parse_body(const std::string& body) {
  constexpr size_t kMaxDepth = 128;
  if (json_depth(body) > kMaxDepth)
    throw HttpError(400, str_cat("request body nests JSON deeper than ", kMaxDepth, " levels"));
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw HttpError(400, "request body is not valid JSON");
  if (!j.is_object()) throw HttpError(400, str_cat("request body must be a JSON object, got ", j.type_name()));
  return j;
}

std::string close_partial_json(std::string_view text) {
  // Per open container: '{' or '['; for objects whether the next string is a key.
  struct Frame {
    char open;
    bool expect_key;
  };
  std::vector<Frame> stack;
  // The last cut point: text[0, cut) is whole members / elements, with `cut_stack` open.
  size_t cut = 0;
  std::vector<Frame> cut_stack;
  bool in_string = false, escaped = false, string_is_key = false;
  size_t i = 0;
  const auto mark = [&](size_t at) {
    cut = at;
    cut_stack = stack;
  };
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') {
        in_string = false;
        if (!string_is_key) mark(i + 1);
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        string_is_key = !stack.empty() && stack.back().open == '{' && stack.back().expect_key;
        break;
      case '{':
      case '[':
        stack.push_back({c, c == '{'});
        mark(i + 1);
        break;
      case '}':
      case ']':
        if (!stack.empty()) stack.pop_back();
        mark(i + 1);
        break;
      case ':':
        if (!stack.empty()) stack.back().expect_key = false;
        break;
      case ',':
        if (!stack.empty() && stack.back().open == '{') stack.back().expect_key = true;
        break;
      default:
        // The end of a number or literal is a cut point once the next byte shows it ended.
        if (i + 1 < text.size() && (std::isalnum((unsigned char)c) || c == '.' || c == '-' || c == '+')) {
          const char n = text[i + 1];
          if (!(std::isalnum((unsigned char)n) || n == '.' || n == '-' || n == '+')) mark(i + 1);
        }
        break;
    }
  }
  std::string out;
  if (in_string && !string_is_key) {
    // Inside a value string: keep it, without a dangling escape.
    size_t end = text.size();
    if (escaped) --end;
    const size_t u = text.rfind("\\u", end);
    if (u != std::string_view::npos && end - u < 6) end = u;
    out = std::string(text.substr(0, end)) + '"';
  } else {
    out = std::string(text.substr(0, cut));
    stack = cut_stack;
  }
  // A trailing separator has nothing after it.
  while (!out.empty() && (out.back() == ',' || out.back() == ' ' || out.back() == '\n' || out.back() == '\t')) out.pop_back();
  for (auto it = stack.rbegin(); it != stack.rend(); ++it) out += it->open == '{' ? '}' : ']';
  return out;
}

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace brisk::server
