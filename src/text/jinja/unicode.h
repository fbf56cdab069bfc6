// UTF-8 helpers for the Jinja engine: Python string semantics work on code points (len,
// indexing, slicing, case mapping, whitespace). Invalid UTF-8 bytes decode as U+FFFD so that
// hostile input never breaks an operation.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace brisk::jinja::unicode {

std::vector<char32_t> decode(std::string_view s);
std::string encode(const std::vector<char32_t>& cps);
void append_utf8(std::string& out, char32_t cp);
size_t length(std::string_view s);  // number of code points

// Byte offset of each code point, plus s.size() at the end (size = length + 1).
std::vector<size_t> offsets(std::string_view s);

bool is_space(char32_t c);      // Python str.isspace()
bool is_printable(char32_t c);  // Python str.isprintable() for one character
bool is_alpha(char32_t c);
bool is_digit(char32_t c);
bool is_alnum(char32_t c);
bool is_upper(char32_t c);
bool is_lower(char32_t c);
bool is_cased(char32_t c);
char32_t to_upper(char32_t c);
char32_t to_lower(char32_t c);
char32_t to_title(char32_t c);

std::string upper(std::string_view s);
std::string lower(std::string_view s);

}  // namespace brisk::jinja::unicode
