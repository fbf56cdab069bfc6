#include "text/jinja/unicode.h"

#include <utf8proc.h>

namespace brisk::jinja::unicode {

namespace {

// Decodes one code point at s[i]; advances i. Malformed sequences give U+FFFD and consume one
// byte.
char32_t next_code_point(std::string_view s, size_t& i) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i);
  utf8proc_int32_t cp = 0;
  utf8proc_ssize_t n = utf8proc_iterate(p, utf8proc_ssize_t(s.size() - i), &cp);
  if (n <= 0) {
    i += 1;
    return 0xFFFD;
  }
  i += size_t(n);
  return char32_t(cp);
}

utf8proc_category_t category(char32_t c) {
  return utf8proc_category(utf8proc_int32_t(c));
}

}  // namespace

std::vector<char32_t> decode(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      out.push_back(char32_t(static_cast<unsigned char>(s[i])));
      ++i;
    } else {
      out.push_back(next_code_point(s, i));
    }
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
    return;
  }
  utf8proc_uint8_t buf[4];
  utf8proc_ssize_t n = utf8proc_encode_char(utf8proc_int32_t(cp), buf);
  if (n <= 0) {
    out += "\xEF\xBF\xBD";
    return;
  }
  out.append(reinterpret_cast<const char*>(buf), size_t(n));
}

std::string encode(const std::vector<char32_t>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t c : cps) append_utf8(out, c);
  return out;
}

size_t length(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
    } else {
      next_code_point(s, i);
    }
    ++n;
  }
  return n;
}

std::vector<size_t> offsets(std::string_view s) {
  std::vector<size_t> out;
  out.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size();) {
    out.push_back(i);
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
    } else {
      next_code_point(s, i);
    }
  }
  out.push_back(s.size());
  return out;
}

bool is_space(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  if (c == 0x85 || c == 0xA0) return true;
  auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL ||
         cat == UTF8PROC_CATEGORY_ZP;
}

bool is_printable(char32_t c) {
  if (c < 0x80) return c >= 0x20 && c != 0x7F;
  if (c == ' ') return true;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

bool is_alpha(char32_t c) {
  auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL ||
         cat == UTF8PROC_CATEGORY_LT || cat == UTF8PROC_CATEGORY_LM ||
         cat == UTF8PROC_CATEGORY_LO;
}

bool is_digit(char32_t c) { return category(c) == UTF8PROC_CATEGORY_ND; }
bool is_alnum(char32_t c) { return is_alpha(c) || is_digit(c); }
bool is_upper(char32_t c) { return category(c) == UTF8PROC_CATEGORY_LU; }
bool is_lower(char32_t c) { return category(c) == UTF8PROC_CATEGORY_LL; }
bool is_cased(char32_t c) {
  auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL ||
         cat == UTF8PROC_CATEGORY_LT;
}

char32_t to_upper(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  return char32_t(utf8proc_toupper(utf8proc_int32_t(c)));
}
char32_t to_lower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  return char32_t(utf8proc_tolower(utf8proc_int32_t(c)));
}
char32_t to_title(char32_t c) {
  if (c < 0x80) return to_upper(c);
  return char32_t(utf8proc_totitle(utf8proc_int32_t(c)));
}

// Unconditional multi-character mappings of Unicode SpecialCasing.txt that Python's
// str.upper() / str.lower() apply (the Greek iota-subscript forms are not included).
const char* special_upper(char32_t c) {
  switch (c) {
    case 0x00DF: return "SS";
    case 0x0149: return "\u02BCN";
    case 0x01F0: return "J\u030C";
    case 0x0390: return "\u0399\u0308\u0301";
    case 0x03B0: return "\u03A5\u0308\u0301";
    case 0x0587: return "\u0535\u0552";
    case 0x1E96: return "H\u0331";
    case 0x1E97: return "T\u0308";
    case 0x1E98: return "W\u030A";
    case 0x1E99: return "Y\u030A";
    case 0x1E9A: return "A\u02BE";
    case 0xFB00: return "FF";
    case 0xFB01: return "FI";
    case 0xFB02: return "FL";
    case 0xFB03: return "FFI";
    case 0xFB04: return "FFL";
    case 0xFB05: return "ST";
    case 0xFB06: return "ST";
    default: return nullptr;
  }
}

std::string upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : decode(s)) {
    if (c >= 0x80) {
      if (const char* sp = special_upper(c)) {
        out += sp;
        continue;
      }
      if (c == 0x1E9E) {  // ẞ stays (Python has no simple uppercase change for it)
        append_utf8(out, c);
        continue;
      }
    }
    append_utf8(out, to_upper(c));
  }
  return out;
}

std::string lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : decode(s)) {
    if (c == 0x0130) {  // İ -> i + combining dot above
      out += "i\u0307";
      continue;
    }
    append_utf8(out, to_lower(c));
  }
  return out;
}

}  // namespace brisk::jinja::unicode
