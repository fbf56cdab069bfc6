#include "text/jinja/lexer.h"

#include <algorithm>

#include "core/error.h"
#include "text/jinja/unicode.h"

namespace brisk::jinja {

namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Python str.rstrip(): drops trailing whitespace.
size_t rstrip_end(const std::string& s, size_t begin, size_t end) {
  while (end > begin && is_ws(s[end - 1])) --end;
  return end;
}

class Lexer {
 public:
  Lexer(std::string source, const LexOptions& opt) : src_(std::move(source)), opt_(opt) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) lex_root();
    tokens_.push_back({TokenKind::eof, "", position(src_.size())});
    return std::move(tokens_);
  }

 private:
  std::string src_;
  const LexOptions& opt_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  bool line_starting_ = true;

  SourcePos position(size_t offset) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    size_t line = size_t(it - line_starts_.begin());
    return {uint32_t(line), uint32_t(offset - line_starts_[line - 1] + 1)};
  }

  [[noreturn]] void error(size_t offset, const std::string& msg) const {
    SourcePos p = position(offset);
    fail(opt_.name, ":", p.line, ":", p.column, ": syntax error: ", msg);
  }

  bool at(size_t i, const char* s) const { return src_.compare(i, std::char_traits<char>::length(s), s) == 0; }

  // Emits text [begin, end) as data, applying "-" stripping or lstrip_blocks for a tag with
  // strip sign `sign` that follows it. `lstrip_ok`: the tag is a block or comment.
  void emit_text(size_t begin, size_t end, char sign, bool lstrip_ok) {
    if (sign == '-') {
      end = rstrip_end(src_, begin, end);
    } else if (sign != '+' && opt_.lstrip_blocks && lstrip_ok) {
      size_t nl = src_.rfind('\n', end == 0 ? 0 : end - 1);
      size_t l_pos = (nl == std::string::npos || nl < begin) ? begin : nl + 1;
      bool has_newline = l_pos > begin;
      if ((has_newline || line_starting_) && l_pos < end) {
        bool all_ws = true;
        for (size_t i = l_pos; i < end; ++i)
          if (!is_ws(src_[i])) { all_ws = false; break; }
        if (all_ws) end = l_pos;
      }
    }
    if (end > begin) tokens_.push_back({TokenKind::data, src_.substr(begin, end - begin), position(begin)});
  }

  // Length of "{%(-|+|)\s*raw\s*(-%}\s*|%})" at i, or 0.
  size_t match_raw_begin(size_t i) const {
    size_t j = i + 2;
    if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) ++j;
    while (j < src_.size() && is_ws(src_[j])) ++j;
    if (!at(j, "raw")) return 0;
    j += 3;
    while (j < src_.size() && is_ws(src_[j])) ++j;
    if (at(j, "-%}")) {
      j += 3;
      while (j < src_.size() && is_ws(src_[j])) ++j;
      return j - i;
    }
    if (at(j, "%}")) return j + 2 - i;
    return 0;
  }

  void lex_root() {
    size_t tag = pos_;
    while (true) {
      tag = src_.find('{', tag);
      if (tag == std::string::npos || tag + 1 >= src_.size()) {
        emit_text(pos_, src_.size(), 0, false);
        pos_ = src_.size();
        return;
      }
      char c = src_[tag + 1];
      if (c == '{' || c == '%' || c == '#') break;
      ++tag;
    }
    char kind = src_[tag + 1];
    char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : 0;
    if (kind == '%') {
      if (size_t n = match_raw_begin(tag)) {
        emit_text(pos_, tag, sign, true);
        lex_raw(tag + n, tag);
        return;
      }
    }
    emit_text(pos_, tag, sign, kind != '{');
    size_t after = tag + 2 + (sign ? 1 : 0);
    line_starting_ = false;
    if (kind == '#') {
      lex_comment(after, tag);
    } else {
      lex_tag(after, tag, kind == '%');
    }
  }

  void lex_raw(size_t body, size_t tag_start) {
    // Find "{%(-|+|)\s*endraw\s*(+%}|-%}\s*|%}\n?)".
    size_t i = body;
    while (true) {
      i = src_.find("{%", i);
      if (i == std::string::npos) error(tag_start, "missing end of raw directive");
      size_t j = i + 2;
      char sign = 0;
      if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) sign = src_[j++];
      while (j < src_.size() && is_ws(src_[j])) ++j;
      if (!at(j, "endraw")) { i += 2; continue; }
      j += 6;
      while (j < src_.size() && is_ws(src_[j])) ++j;
      size_t end;
      if (at(j, "+%}")) {
        end = j + 3;
      } else if (at(j, "-%}")) {
        end = j + 3;
        while (end < src_.size() && is_ws(src_[end])) ++end;
      } else if (at(j, "%}")) {
        end = j + 2;
        if (opt_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
      } else {
        i += 2;
        continue;
      }
      emit_text(body, i, sign, true);
      pos_ = end;
      line_starting_ = src_[end - 1] == '\n';
      return;
    }
  }

  void lex_comment(size_t body, size_t tag_start) {
    for (size_t i = body; i + 1 < src_.size(); ++i) {
      size_t end = 0;
      if (at(i, "+#}")) {
        end = i + 3;
      } else if (at(i, "-#}")) {
        end = i + 3;
        while (end < src_.size() && is_ws(src_[end])) ++end;
      } else if (at(i, "#}")) {
        end = i + 2;
        if (opt_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
      }
      if (end) {
        pos_ = end;
        line_starting_ = src_[end - 1] == '\n';
        return;
      }
    }
    error(tag_start, "missing end of comment tag");
  }

  // Tokens of a {{ }} or {% %} tag up to its end.
  void lex_tag(size_t i, size_t tag_start, bool block) {
    tokens_.push_back({block ? TokenKind::block_begin : TokenKind::variable_begin, "", position(tag_start)});
    std::vector<char> balance;
    while (true) {
      if (i >= src_.size()) error(tag_start, block ? "unexpected end of template inside '{%'" : "unexpected end of template inside '{{'");
      if (balance.empty()) {
        size_t end = 0;
        if (block) {
          if (at(i, "+%}")) {
            end = i + 3;
          } else if (at(i, "-%}")) {
            end = i + 3;
            while (end < src_.size() && is_ws(src_[end])) ++end;
          } else if (at(i, "%}")) {
            end = i + 2;
            if (opt_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
          }
        } else {
          if (at(i, "-}}")) {
            end = i + 3;
            while (end < src_.size() && is_ws(src_[end])) ++end;
          } else if (at(i, "}}")) {
            end = i + 2;
          }
        }
        if (end) {
          tokens_.push_back({block ? TokenKind::block_end : TokenKind::variable_end, "", position(i)});
          pos_ = end;
          line_starting_ = src_[end - 1] == '\n';
          return;
        }
      }
      char c = src_[i];
      if (is_ws(c)) {
        ++i;
        continue;
      }
      if (is_digit(c)) {
        i = lex_number(i);
        continue;
      }
      if (is_name_start(c)) {
        size_t j = i;
        while (j < src_.size() && is_name_char(src_[j])) ++j;
        tokens_.push_back({TokenKind::name, src_.substr(i, j - i), position(i)});
        i = j;
        continue;
      }
      if (c == '\'' || c == '"') {
        i = lex_string(i);
        continue;
      }
      static const char* const two_char_ops[] = {"//", "**", "==", "!=", ">=", "<="};
      std::string op;
      for (const char* o : two_char_ops)
        if (at(i, o)) { op = o; break; }
      if (op.empty()) {
        static const std::string singles = "+-/*%~[](){}><=.:|,;";
        if (singles.find(c) == std::string::npos)
          error(i, str_cat("unexpected character '", std::string(1, c), "'"));
        op = std::string(1, c);
      }
      if (op == "(" || op == "[" || op == "{") {
        balance.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
      } else if (op == ")" || op == "]" || op == "}") {
        if (balance.empty()) error(i, str_cat("unexpected '", op, "'"));
        if (balance.back() != op[0])
          error(i, str_cat("unexpected '", op, "', expected '", std::string(1, balance.back()), "'"));
        balance.pop_back();
      }
      tokens_.push_back({TokenKind::op, op, position(i)});
      i += op.size();
    }
  }

  // Digits with optional "_" separators; returns the end.
  size_t digits_end(size_t i) const {
    if (i >= src_.size() || !is_digit(src_[i])) return i;
    size_t j = i + 1;
    while (j < src_.size()) {
      if (is_digit(src_[j])) { ++j; continue; }
      if (src_[j] == '_' && j + 1 < src_.size() && is_digit(src_[j + 1])) { j += 2; continue; }
      break;
    }
    return j;
  }

  size_t lex_number(size_t i) {
    size_t j = digits_end(i);
    bool is_float = false;
    if (j + 1 < src_.size() && src_[j] == '.' && is_digit(src_[j + 1])) {
      j = digits_end(j + 1);
      is_float = true;
    }
    if (j < src_.size() && (src_[j] == 'e' || src_[j] == 'E')) {
      size_t k = j + 1;
      if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
      size_t e = digits_end(k);
      if (e > k) {
        j = e;
        is_float = true;
      }
    }
    std::string text;
    for (size_t k = i; k < j; ++k)
      if (src_[k] != '_') text += src_[k];
    tokens_.push_back({is_float ? TokenKind::floating : TokenKind::integer, text, position(i)});
    return j;
  }

  static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // A quoted literal with Python's unicode-escape rules.
  size_t lex_string(size_t i) {
    char quote = src_[i];
    size_t j = i + 1;
    std::string out;
    while (true) {
      if (j >= src_.size()) error(i, "unterminated string literal");
      char c = src_[j];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        ++j;
        continue;
      }
      if (j + 1 >= src_.size()) error(i, "unterminated string literal");
      char e = src_[j + 1];
      j += 2;
      switch (e) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x': case 'u': case 'U': {
          int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (int k = 0; k < n; ++k) {
            int h = j + size_t(k) < src_.size() ? hex_value(src_[j + size_t(k)]) : -1;
            if (h < 0) error(j - 2, "truncated \\" + std::string(1, e) + " escape in string literal");
            cp = cp * 16 + uint32_t(h);
          }
          if (cp > 0x10FFFF) error(j - 2, "illegal Unicode character in string literal");
          unicode::append_utf8(out, char32_t(cp));
          j += size_t(n);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = uint32_t(e - '0');
            for (int k = 0; k < 2 && j < src_.size() && src_[j] >= '0' && src_[j] <= '7'; ++k, ++j)
              cp = cp * 8 + uint32_t(src_[j] - '0');
            unicode::append_utf8(out, char32_t(cp));
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    tokens_.push_back({TokenKind::string, std::move(out), position(i)});
    return j + 1;
  }
};

std::string normalize_newlines(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

std::vector<Token> lex(const std::string& source, const LexOptions& options) {
  return Lexer(normalize_newlines(source), options).run();
}

}  // namespace brisk::jinja
