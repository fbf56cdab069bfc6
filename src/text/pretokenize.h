// Normalizers and pre-tokenizers of the Hugging Face `tokenizers` pipeline, as plain data
// (one step struct per kind, applied in order). Both loaders (tokenizer.json, GGUF) build
// these; the encode path runs: normalize(segment) -> pre_tokenize -> model, per segment of
// text between added tokens.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace brisk::text {

class PrecompiledCharsMap;  // text/precompiled.h

// A compiled PCRE2 pattern (UTF + UCP, JIT when available). Subjects must be valid UTF-8.
class Regex {
 public:
  explicit Regex(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  const std::string& pattern() const { return pattern_; }
  // Non-overlapping matches, left to right, as byte ranges [begin, end) of `s`.
  void find_all(std::string_view s, std::vector<std::pair<size_t, size_t>>& out) const;

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

struct NormalizerStep {
  enum class Kind {
    nfc, nfd, nfkc, nfkd, lowercase, strip_accents, replace, prepend, strip, bert, byte_level, precompiled
  };
  Kind kind = Kind::nfc;
  std::string pattern{};               // replace: literal pattern (when regex is null)
  std::shared_ptr<const Regex> regex{};  // replace: regex pattern
  std::string content{};               // replace: replacement; prepend: prefix
  bool strip_left = false, strip_right = false;  // strip
  // bert
  bool clean_text = true, handle_chinese_chars = true, lowercase = true;
  int strip_accents = -1;  // -1: follow lowercase, 0: no, 1: yes
  std::shared_ptr<const PrecompiledCharsMap> charsmap{};  // precompiled (SentencePiece charsmap)
};

std::string normalize(const std::vector<NormalizerStep>& steps, std::string text);

enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

struct PreTokenizerStep {
  enum class Kind {
    split, byte_level, digits, metaspace, whitespace, whitespace_split, bert, punctuation,
    char_delimiter
  };
  Kind kind = Kind::split;
  std::shared_ptr<const Regex> regex{};  // split (regex pattern); byte_level with use_regex
  std::string literal{};               // split (string pattern); char_delimiter
  SplitBehavior behavior = SplitBehavior::isolated;
  bool invert = false;
  bool add_prefix_space = false;  // byte_level
  bool individual_digits = false; // digits
  std::string replacement = "\xE2\x96\x81";  // metaspace (U+2581)
  enum class Prepend { always, first, never } prepend = Prepend::always;  // metaspace
  bool metaspace_split = true;
};

// A piece of text on its way to the model. `at_start`: begins at offset 0 of the input.
struct Piece {
  std::string text;
  bool at_start = false;
};

void pre_tokenize(const std::vector<PreTokenizerStep>& steps, std::vector<Piece>& pieces);

// The GPT-2 split pattern used by ByteLevel(use_regex=true).
extern const char* const kGpt2Pattern;

}  // namespace brisk::text
