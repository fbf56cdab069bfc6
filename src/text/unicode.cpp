// UTF-8 and code point classes for the tokenizers. Classes come from utf8proc's tables.
#include "text/unicode.h"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <memory>

#include "core/error.h"
#include "core/flags.h"

namespace brisk::text {

size_t utf8_next(std::string_view s, size_t i, uint32_t* cpt) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + i;
  const size_t left = s.size() - i;
  const uint8_t b0 = p[0];
  if (b0 < 0x80) { *cpt = b0; return 1; }
  size_t n = 0;
  uint32_t c = 0, min = 0;
  if ((b0 & 0xE0) == 0xC0) { n = 2; c = b0 & 0x1F; min = 0x80; }
  else if ((b0 & 0xF0) == 0xE0) { n = 3; c = b0 & 0x0F; min = 0x800; }
  else if ((b0 & 0xF8) == 0xF0) { n = 4; c = b0 & 0x07; min = 0x10000; }
  else { *cpt = 0xFFFD; return 1; }
  if (left < n) { *cpt = 0xFFFD; return 1; }
  for (size_t k = 1; k < n; ++k) {
    if ((p[k] & 0xC0) != 0x80) { *cpt = 0xFFFD; return 1; }
    c = (c << 6) | (p[k] & 0x3F);
  }
  if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) { *cpt = 0xFFFD; return 1; }
  *cpt = c;
  return n;
}

static bool utf8_valid_at(std::string_view s, size_t i, size_t* len) {
  uint32_t c = 0;
  size_t n = utf8_next(s, i, &c);
  *len = n;
  return !(c == 0xFFFD && !(n == 3 && static_cast<uint8_t>(s[i]) == 0xEF));
}

void utf8_append(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

size_t utf8_incomplete_tail(std::string_view s) {
  // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const uint8_t b = static_cast<uint8_t>(s[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking
    size_t need = 0;
    if ((b & 0xE0) == 0xC0) need = 2;
    else if ((b & 0xF0) == 0xE0) need = 3;
    else if ((b & 0xF8) == 0xF0) need = 4;
    return need > back ? back : 0;
  }
  return 0;
}

bool utf8_is_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    if (!utf8_valid_at(s, i, &len)) return false;
    i += len;
  }
  return true;
}

std::string utf8_sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    if (utf8_valid_at(s, i, &len)) {
      out.append(s.substr(i, len));
      i += len;
      continue;
    }
    // Maximal invalid subpart: a lead byte followed by the continuation bytes it accepts.
    size_t j = i + 1;
    const uint8_t b0 = static_cast<uint8_t>(s[i]);
    size_t need = (b0 & 0xE0) == 0xC0 ? 2 : (b0 & 0xF0) == 0xE0 ? 3 : (b0 & 0xF8) == 0xF0 ? 4 : 1;
    if (b0 == 0xC0 || b0 == 0xC1 || b0 > 0xF4) need = 1;
    while (j < s.size() && j < i + need && (static_cast<uint8_t>(s[j]) & 0xC0) == 0x80) {
      const uint8_t b = static_cast<uint8_t>(s[j]);
      if (j == i + 1) {
        if (b0 == 0xE0 && b < 0xA0) break;
        if (b0 == 0xED && b > 0x9F) break;
        if (b0 == 0xF0 && b < 0x90) break;
        if (b0 == 0xF4 && b > 0x8F) break;
      }
      ++j;
    }
    out += "\xEF\xBF\xBD";
    i = j;
  }
  return out;
}

namespace {
struct ByteMap {
  std::array<uint32_t, 256> to_cpt{};
  std::array<int16_t, 324> from_cpt{};  // code points used are < 324
  ByteMap() {
    from_cpt.fill(-1);
    uint32_t extra = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_cpt[b] = printable ? static_cast<uint32_t>(b) : extra++;
      from_cpt[to_cpt[b]] = static_cast<int16_t>(b);
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}
}  // namespace

uint32_t byte_to_unicode(uint8_t b) { return byte_map().to_cpt[b]; }

int byte_from_unicode(uint32_t cpt) {
  return cpt < byte_map().from_cpt.size() ? byte_map().from_cpt[cpt] : -1;
}

void byte_level_encode(std::string_view in, std::string& out) {
  const auto& m = byte_map();
  out.reserve(out.size() + in.size() * 2);
  for (char ch : in) utf8_append(out, m.to_cpt[static_cast<uint8_t>(ch)]);
}

bool byte_level_decode(std::string_view in, std::string& out) {
  for (size_t i = 0; i < in.size();) {
    uint32_t c = 0;
    i += utf8_next(in, i, &c);
    const int b = byte_from_unicode(c);
    if (b < 0) return false;
    out += static_cast<char>(b);
  }
  return true;
}

bool cpt_is_whitespace(uint32_t c) {
  switch (c) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0x85: case 0xA0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

bool cpt_is_control(uint32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF ||
         cat == UTF8PROC_CATEGORY_CN || cat == UTF8PROC_CATEGORY_CO;
}

bool cpt_is_punctuation(uint32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126))
    return true;
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

bool cpt_is_cjk(uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool cpt_is_mark(uint32_t c) {
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC || cat == UTF8PROC_CATEGORY_ME;
}

bool cpt_is_alnum(uint32_t c) {
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
         (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
}

bool cpt_is_number(uint32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO;
}

uint32_t cpt_tolower(uint32_t c) {
  return static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
}

namespace {

// Code points that NFC leaves alone whatever surrounds them: starters that never decompose
// and never combine with a preceding character (NFC_Quick_Check = Yes in blocks where every
// character has it). Text made only of these needs no composition work.
bool nfc_inert(uint32_t c) {
  return c < 0x300 || (c >= 0x400 && c < 0x483) || (c >= 0x3040 && c < 0x3099) ||
         (c >= 0x309B && c < 0x3100) || (c >= 0x4E00 && c < 0xA000) ||
         (c >= 0xAC00 && c < 0xD7A4) || (c >= 0x1F300 && c < 0x1FB00);
}

}  // namespace

// NFC: only windows around code points outside the inert set go through utf8proc. A window
// starts at the inert starter before such a run (it may compose with what follows) and ends
// before the next inert code point (which cannot compose with what precedes it).
std::string unicode_normalize(std::string_view s, NormalForm form) {
  if (s.empty()) return {};
  if (form != NormalForm::nfc || flags().no_fast_nfc) return unicode_normalize_reference(s, form);
  std::string out;
  size_t done = 0;        // bytes of `s` already copied or normalized
  size_t last_inert = 0;  // start of the last inert code point seen
  bool any = false;
  for (size_t i = 0; i < s.size();) {
    uint32_t c = 0;
    const size_t n = utf8_next(s, i, &c);
    if (nfc_inert(c) && !(c == 0xFFFD && n == 1)) {
      last_inert = i;
      i += n;
      continue;
    }
    // Window [begin, end): from the last inert starter to the next inert code point.
    const size_t begin = std::max(done, last_inert);
    size_t end = i + n;
    while (end < s.size()) {
      uint32_t c2 = 0;
      const size_t n2 = utf8_next(s, end, &c2);
      if (nfc_inert(c2) && !(c2 == 0xFFFD && n2 == 1)) break;
      end += n2;
    }
    if (!any) {
      out.reserve(s.size() + 16);
      any = true;
    }
    out.append(s.substr(done, begin - done));
    out += unicode_normalize_reference(s.substr(begin, end - begin), form);
    done = end;
    last_inert = end;
    i = end;
  }
  if (!any) return std::string(s);
  out.append(s.substr(done));
  return out;
}

std::string unicode_normalize_reference(std::string_view s, NormalForm form) {
  if (s.empty()) return {};
  // Invalid UTF-8 cannot be normalized by utf8proc: make it valid first.
  std::string valid = utf8_is_valid(s) ? std::string(s) : utf8_sanitize(s);
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::nfc: options |= UTF8PROC_COMPOSE; break;
    case NormalForm::nfd: options |= UTF8PROC_DECOMPOSE; break;
    case NormalForm::nfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::nfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(valid.data()),
                   static_cast<utf8proc_ssize_t>(valid.size()), &out,
                   static_cast<utf8proc_option_t>(options));
  if (n < 0) fail("unicode normalization failed: ", utf8proc_errmsg(n));
  std::unique_ptr<utf8proc_uint8_t, void (*)(void*)> hold(out, std::free);
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

std::string unicode_lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t c = 0;
    i += utf8_next(s, i, &c);
    if (c == 0x130) {  // İ lowercases to i + combining dot above (full case mapping)
      out += "i\xCC\x87";
      continue;
    }
    utf8_append(out, cpt_tolower(c));
  }
  return out;
}

std::string unicode_strip_accents(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t c = 0;
    const size_t n = utf8_next(s, i, &c);
    if (utf8proc_category(static_cast<utf8proc_int32_t>(c)) != UTF8PROC_CATEGORY_MN)
      out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace brisk::text
