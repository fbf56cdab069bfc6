// The model stage of a tokenizer: turns one pre-tokenized piece into ids. Implementations:
// BpeModel (bpe.h), UnigramModel (spm.h), WordPieceModel (wordpiece.h).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace brisk::text {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
// token text -> id, with lookups by string_view.
using TokenIndex = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

inline int32_t token_index_find(const TokenIndex& index, std::string_view text) {
  auto it = index.find(text);
  return it == index.end() ? -1 : it->second;
}

class TokenModel {
 public:
  virtual ~TokenModel() = default;
  // Appends the ids of `piece` to `out`. Thread-safe.
  virtual void tokenize(std::string_view piece, std::vector<int32_t>& out) const = 0;
};

}  // namespace brisk::text
