// Jinja lexer: splits a template into data (literal text) and the tokens inside {{ }}, {% %}.
// Follows Jinja2's lexer: newlines normalised to "\n", one trailing newline dropped, whitespace
// control with "-" / "+" on tags, trim_blocks (newline after a block or comment tag removed),
// lstrip_blocks (spaces and tabs before a block or comment tag on its own line removed),
// {% raw %}, and "}}" / "%}" only ending a tag when brackets are balanced.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace brisk::jinja {

struct SourcePos {
  uint32_t line = 1;
  uint32_t column = 1;  // 1-based, in bytes
};

enum class TokenKind : uint8_t {
  data, variable_begin, variable_end, block_begin, block_end,
  name, string, integer, floating, op, eof
};

struct Token {
  TokenKind kind;
  std::string text;  // data text, name, decoded string literal, number spelling, operator
  SourcePos pos;
};

struct LexOptions {
  bool trim_blocks = false;
  bool lstrip_blocks = false;
  std::string name = "template";  // used in error messages
};

// Throws brisk::Error ("NAME:LINE:COL: ...") on malformed input.
std::vector<Token> lex(const std::string& source, const LexOptions& options);

}  // namespace brisk::jinja
