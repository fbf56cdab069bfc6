// Unicode helpers for the tokenizers: UTF-8 decoding with validation, the GPT-2 byte <-> char
// map of byte-level BPE, character classes and normalization forms (through utf8proc).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace brisk::text {

// Length in bytes of the UTF-8 sequence starting at s[i] (1..4). Invalid or truncated
// sequences count as 1 byte; *cpt receives U+FFFD for them.
size_t utf8_next(std::string_view s, size_t i, uint32_t* cpt);
void utf8_append(std::string& out, uint32_t cpt);
// Bytes at the end of `s` that start an incomplete (but so far valid) UTF-8 sequence (0..3).
size_t utf8_incomplete_tail(std::string_view s);
// Replaces every invalid UTF-8 sequence by U+FFFD (one per maximal invalid subpart).
std::string utf8_sanitize(std::string_view s);
bool utf8_is_valid(std::string_view s);

// GPT-2 byte-level map: each byte to one printable code point, and back.
uint32_t byte_to_unicode(uint8_t b);
int byte_from_unicode(uint32_t cpt);  // -1 when the code point is not in the map
// Maps every byte of `in` to its code point (UTF-8 encoded).
void byte_level_encode(std::string_view in, std::string& out);
// Inverse map; returns false (and leaves `out` partially written) when a char is not in the map.
bool byte_level_decode(std::string_view in, std::string& out);

bool cpt_is_whitespace(uint32_t c);   // White_Space as Python's str.isspace / Rust char::is_whitespace
bool cpt_is_control(uint32_t c);      // BERT's notion: Cc/Cf/Cn/Co except \t \n \r
bool cpt_is_punctuation(uint32_t c);  // BERT's notion: ASCII symbols or any P* category
bool cpt_is_cjk(uint32_t c);          // CJK ideograph blocks (BERT's handle_chinese_chars)
bool cpt_is_mark(uint32_t c);         // Mn, Mc, Me
bool cpt_is_alnum(uint32_t c);        // L*, N*
bool cpt_is_number(uint32_t c);       // N* (Rust char::is_numeric)
uint32_t cpt_tolower(uint32_t c);

enum class NormalForm { nfc, nfd, nfkc, nfkd };
// NFC skips runs that NFC cannot change (BRISK_NO_FAST_NFC turns that off).
std::string unicode_normalize(std::string_view s, NormalForm form);
std::string unicode_normalize_reference(std::string_view s, NormalForm form);  // all through utf8proc
std::string unicode_lowercase(std::string_view s);
std::string unicode_strip_accents(std::string_view s);  // drops combining marks (Mn)

}  // namespace brisk::text
