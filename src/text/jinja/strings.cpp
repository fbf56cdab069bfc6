#include "text/jinja/strings.h"

#include "core/error.h"
#include "text/jinja/unicode.h"

namespace brisk::jinja::pystr {

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  auto cps = unicode::decode(s);
  std::vector<char32_t> set;
  if (chars) set = unicode::decode(*chars);
  auto drop = [&](char32_t c) {
    if (!chars) return unicode::is_space(c);
    for (char32_t x : set)
      if (x == c) return true;
    return false;
  };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && drop(cps[b])) ++b;
  if (right)
    while (e > b && drop(cps[e - 1])) --e;
  return unicode::encode(std::vector<char32_t>(cps.begin() + std::ptrdiff_t(b), cps.begin() + std::ptrdiff_t(e)));
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) fail("empty separator");
    size_t start = 0;
    while (maxsplit < 0 || int64_t(out.size()) < maxsplit) {
      size_t p = s.find(*sep, start);
      if (p == std::string_view::npos) break;
      out.emplace_back(s.substr(start, p - start));
      start = p + sep->size();
    }
    out.emplace_back(s.substr(start));
    return out;
  }
  auto cps = unicode::decode(s);
  size_t i = 0, n = cps.size();
  while (true) {
    while (i < n && unicode::is_space(cps[i])) ++i;
    if (i >= n) break;
    if (maxsplit >= 0 && int64_t(out.size()) >= maxsplit) {
      size_t e = n;
      while (e > i && unicode::is_space(cps[e - 1])) --e;
      out.push_back(unicode::encode(std::vector<char32_t>(cps.begin() + std::ptrdiff_t(i), cps.begin() + std::ptrdiff_t(e))));
      break;
    }
    size_t j = i;
    while (j < n && !unicode::is_space(cps[j])) ++j;
    out.push_back(unicode::encode(std::vector<char32_t>(cps.begin() + std::ptrdiff_t(i), cps.begin() + std::ptrdiff_t(j))));
    i = j;
  }
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  if (maxsplit < 0) return split(s, sep, maxsplit);
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) fail("empty separator");
    size_t end = s.size();
    while (int64_t(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      size_t p = s.rfind(*sep, end - sep->size());
      if (p == std::string_view::npos) break;
      out.emplace_back(s.substr(p + sep->size(), end - p - sep->size()));
      end = p;
    }
    out.emplace_back(s.substr(0, end));
  } else {
    auto cps = unicode::decode(s);
    int64_t e = int64_t(cps.size());
    while (true) {
      while (e > 0 && unicode::is_space(cps[size_t(e - 1)])) --e;
      if (e <= 0) break;
      if (int64_t(out.size()) >= maxsplit) {
        size_t b = 0;
        while (b < size_t(e) && unicode::is_space(cps[b])) ++b;
        out.push_back(unicode::encode(std::vector<char32_t>(cps.begin() + std::ptrdiff_t(b), cps.begin() + e)));
        break;
      }
      int64_t b = e;
      while (b > 0 && !unicode::is_space(cps[size_t(b - 1)])) --b;
      out.push_back(unicode::encode(std::vector<char32_t>(cps.begin() + b, cps.begin() + e)));
      e = b;
    }
  }
  return std::vector<std::string>(out.rbegin(), out.rend());
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  auto cps = unicode::decode(s);
  std::vector<std::string> out;
  size_t start = 0, i = 0;
  while (i < cps.size()) {
    char32_t c = cps[i];
    bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
               c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) {
      ++i;
      continue;
    }
    size_t eol = i + 1;
    if (c == '\r' && eol < cps.size() && cps[eol] == '\n') ++eol;
    size_t end = keepends ? eol : i;
    out.push_back(unicode::encode(std::vector<char32_t>(cps.begin() + std::ptrdiff_t(start), cps.begin() + std::ptrdiff_t(end))));
    start = i = eol;
  }
  if (start < cps.size())
    out.push_back(unicode::encode(std::vector<char32_t>(cps.begin() + std::ptrdiff_t(start), cps.end())));
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `repl` between every character (and at both ends).
    auto offs = unicode::offsets(s);
    int64_t done = 0;
    for (size_t i = 0; i + 1 < offs.size() + 1; ++i) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      if (i + 1 < offs.size()) out.append(s.substr(offs[i], offs[i + 1] - offs[i]));
    }
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t p = s.find(old, start);
    if (p == std::string_view::npos) break;
    out.append(s.substr(start, p - start));
    out.append(repl);
    start = p + old.size();
    ++done;
  }
  out.append(s.substr(start));
  return out;
}

int64_t find(std::string_view s, std::string_view sub, std::optional<int64_t> start,
             std::optional<int64_t> end, bool reverse) {
  auto offs = unicode::offsets(s);
  int64_t n = int64_t(offs.size()) - 1;
  auto adjust = [n](int64_t i) {
    if (i < 0) i = std::max<int64_t>(0, i + n);
    return std::min(i, n);
  };
  int64_t b = start ? adjust(*start) : 0;
  int64_t e = end ? adjust(*end) : n;
  if (b > e) return -1;
  std::string_view window = s.substr(offs[size_t(b)], offs[size_t(e)] - offs[size_t(b)]);
  size_t p = reverse ? window.rfind(sub) : window.find(sub);
  if (p == std::string_view::npos) return -1;
  return b + int64_t(unicode::length(window.substr(0, p)));
}

int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return int64_t(unicode::length(s)) + 1;
  int64_t n = 0;
  for (size_t p = s.find(sub); p != std::string_view::npos; p = s.find(sub, p + sub.size())) ++n;
  return n;
}

std::string title(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t c : unicode::decode(s)) {
    unicode::append_utf8(out, prev_cased ? unicode::to_lower(c) : unicode::to_title(c));
    prev_cased = unicode::is_cased(c);
  }
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for (char32_t c : unicode::decode(s)) {
    unicode::append_utf8(out, first ? unicode::to_title(c) : unicode::to_lower(c));
    first = false;
  }
  return out;
}

std::string jinja_title(std::string_view s) {
  // re.split(r"([-\s({\[<]+)") then item[0].upper() + item[1:].lower() for each piece.
  auto cps = unicode::decode(s);
  auto is_sep = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || unicode::is_space(c);
  };
  std::string out;
  size_t i = 0;
  while (i < cps.size()) {
    size_t j = i;
    bool sep = is_sep(cps[i]);
    while (j < cps.size() && is_sep(cps[j]) == sep) ++j;
    for (size_t k = i; k < j; ++k)
      unicode::append_utf8(out, k == i ? unicode::to_upper(cps[k]) : unicode::to_lower(cps[k]));
    i = j;
  }
  return out;
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace brisk::jinja::pystr
