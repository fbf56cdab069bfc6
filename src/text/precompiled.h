// The `Precompiled` normalizer of SentencePiece tokenizers (XLM-RoBERTa, T5, mBART, ...): a
// character map compiled into a blob, tokenizer.json's base64 `precompiled_charsmap` or GGUF
// `tokenizer.ggml.precompiled_charsmap`:
//   [u32 LE: trie bytes T][T bytes: a darts-clone double-array trie, u32 LE units]
//   [the normalized strings, each ended by a NUL byte]
// A trie key is the UTF-8 of a string to replace; its value is the byte offset of the
// replacement in the strings part. Normalizing runs as the Hugging Face tokenizers do it: per
// extended grapheme cluster, a cluster shorter than 6 bytes whose first bytes match a key
// (the shortest matching prefix) is replaced whole; otherwise each code point is looked up on
// its own and kept when it matches no key.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/base64.h"

namespace brisk::text {

class PrecompiledCharsMap {
 public:
  // Parses the blob; throws brisk::Error naming `where` (file and key) on a malformed one.
  PrecompiledCharsMap(std::string_view blob, const std::string& where);
  std::string normalize(std::string_view text) const;
  // The replacement of the shortest key that prefixes `s`; false when none does.
  bool lookup(std::string_view s, std::string_view* replacement) const;

 private:
  std::vector<uint32_t> units_;  // the double array
  std::string strings_;          // NUL-ended replacements
};

using brisk::base64_decode;  // core/base64.h

}  // namespace brisk::text
