#include "text/jinja/pyformat.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "text/jinja/unicode.h"
#include "text/jinja/value.h"

namespace brisk::jinja {

std::string py_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci = [-]D[.DDDD]e(+|-)XX
  bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  size_t e_pos = sci.find('e');
  std::string mantissa = sci.substr(0, e_pos);
  int exponent = std::stoi(sci.substr(e_pos + 1));
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits[0];
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1);
    }
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += ebuf;
    return out;
  }
  int point = exponent + 1;  // digits before the decimal point
  if (point <= 0) {
    out += "0.";
    out.append(size_t(-point), '0');
    out += digits;
  } else if (size_t(point) >= digits.size()) {
    out += digits;
    out.append(size_t(point) - digits.size(), '0');
    out += ".0";
  } else {
    out.append(digits, 0, size_t(point));
    out += '.';
    out.append(digits, size_t(point));
  }
  return out;
}

namespace {

void append_hex(std::string& out, const char* prefix, uint32_t v, int width) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%s%0*x", prefix, width, v);
  out += buf;
}

}  // namespace

void py_string_repr(std::string& out, std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  out += quote;
  for (char32_t c : unicode::decode(s)) {
    if (c == char32_t(quote) || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (unicode::is_printable(c)) {
      unicode::append_utf8(out, c);
    } else if (c <= 0xFF) {
      append_hex(out, "\\x", uint32_t(c), 2);
    } else if (c <= 0xFFFF) {
      append_hex(out, "\\u", uint32_t(c), 4);
    } else {
      append_hex(out, "\\U", uint32_t(c), 8);
    }
  }
  out += quote;
}

namespace {

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  auto escape_unit = [&](uint32_t u) { append_hex(out, "\\u", u, 4); };
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char b = static_cast<unsigned char>(s[i]);
    switch (b) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (b < 0x20) {
      escape_unit(b);
    } else if (b < 0x80 || !ensure_ascii) {
      out += char(b);
    } else {
      // Decode this one code point and write it as \uXXXX (surrogate pair above U+FFFF).
      size_t end = i + 1;
      while (end < s.size() && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80 &&
             end - i < 4)
        ++end;
      auto cps = unicode::decode(s.substr(i, end - i));
      char32_t cp = cps.empty() ? 0xFFFD : cps[0];
      if (cps.size() > 1) end = i + 1;  // malformed: one byte became U+FFFD
      if (cp > 0xFFFF) {
        uint32_t v = uint32_t(cp) - 0x10000;
        escape_unit(0xD800 + (v >> 10));
        escape_unit(0xDC00 + (v & 0x3FF));
      } else {
        escape_unit(uint32_t(cp));
      }
      i = end - 1;
    }
  }
  out += '"';
}

std::string json_key(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::string: return k.as_string();
    case Value::Kind::boolean: return k.as_bool() ? "true" : "false";
    case Value::Kind::none: return "null";
    case Value::Kind::integer: return std::to_string(k.as_int());
    case Value::Kind::floating: return py_float_repr(k.as_float());
    default:
      fail("keys must be str, int, float, bool or None, not ", k.type_name());
  }
}

struct JsonWriter {
  const JsonDumpOptions& opt;
  std::string item_sep;
  std::string key_sep;
  std::string out;
  int depth = 0;

  void newline_indent(int level) {
    out += '\n';
    for (int i = 0; i < level; ++i) out += *opt.indent;
  }

  void write(const Value& v) {
    BRISK_CHECK(depth < 512, "tojson: value nested too deeply");
    switch (v.kind()) {
      case Value::Kind::none: out += "null"; return;
      case Value::Kind::boolean: out += v.as_bool() ? "true" : "false"; return;
      case Value::Kind::integer: out += std::to_string(v.as_int()); return;
      case Value::Kind::floating: {
        double d = v.as_float();
        if (std::isnan(d)) out += "NaN";
        else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
        else out += py_float_repr(d);
        return;
      }
      case Value::Kind::string: json_string(out, v.as_string(), opt.ensure_ascii); return;
      case Value::Kind::list: {
        const auto& l = *v.as_list();
        size_t start = l.generator ? l.consumed : 0;
        BRISK_CHECK(!l.generator, "tojson: Object of type generator is not JSON serializable");
        if (l.items.size() == start) {
          out += "[]";
          return;
        }
        out += '[';
        ++depth;
        for (size_t i = start; i < l.items.size(); ++i) {
          if (i > start) out += item_sep;
          if (opt.indent) newline_indent(depth);
          write(l.items[i]);
        }
        --depth;
        if (opt.indent) newline_indent(depth);
        out += ']';
        return;
      }
      case Value::Kind::dict: {
        const auto& items = v.as_dict()->items();
        if (items.empty()) {
          out += "{}";
          return;
        }
        std::vector<std::pair<std::string, const Value*>> entries;
        entries.reserve(items.size());
        for (const auto& [k, val] : items) entries.emplace_back(json_key(k), &val);
        if (opt.sort_keys) {
          for (const auto& [k, val] : items)
            BRISK_CHECK(k.is_string() || items.size() == 1,
                        "tojson: sort_keys needs string keys");
          std::stable_sort(entries.begin(), entries.end(),
                           [](const auto& a, const auto& b) { return a.first < b.first; });
        }
        out += '{';
        ++depth;
        bool first = true;
        for (const auto& [k, val] : entries) {
          if (!first) out += item_sep;
          first = false;
          if (opt.indent) newline_indent(depth);
          json_string(out, k, opt.ensure_ascii);
          out += key_sep;
          write(*val);
        }
        --depth;
        if (opt.indent) newline_indent(depth);
        out += '}';
        return;
      }
      case Value::Kind::undefined:
        fail("tojson: Object of type Undefined is not JSON serializable");
      default:
        fail("tojson: Object of type ", v.type_name(), " is not JSON serializable");
    }
  }
};

}  // namespace

std::string json_dumps(const Value& v, const JsonDumpOptions& opt) {
  JsonWriter w{.opt = opt,
               .item_sep = opt.item_separator.value_or(opt.indent ? "," : ", "),
               .key_sep = opt.key_separator.value_or(": "),
               .out = {},
               .depth = 0};
  w.write(v);
  return std::move(w.out);
}

}  // namespace brisk::jinja
