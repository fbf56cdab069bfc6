// WordPiece greedy longest match, on character boundaries.
#include "text/wordpiece.h"

#include "core/error.h"
#include "text/unicode.h"

namespace brisk::text {

WordPieceModel::WordPieceModel(TokenIndex index, WordPieceParams params)
    : index_(std::move(index)), params_(std::move(params)) {}

void WordPieceModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  std::vector<size_t> bounds;  // character boundaries, including 0 and size
  for (size_t i = 0; i < word.size();) {
    bounds.push_back(i);
    uint32_t c = 0;
    i += utf8_next(word, i, &c);
  }
  bounds.push_back(word.size());
  auto unk = [&] {
    BRISK_CHECK(params_.unk_id >= 0, "wordpiece tokenizer has no unknown token for \"", word, "\"");
    out.push_back(params_.unk_id);
  };
  if (bounds.size() - 1 > params_.max_input_chars_per_word) return unk();
  std::vector<int32_t> pieces;
  std::string key;
  size_t start = 0;  // index into bounds
  while (start + 1 < bounds.size()) {
    int32_t found = -1;
    size_t end = bounds.size() - 1;
    for (; end > start; --end) {
      key = start == 0 ? params_.word_prefix : params_.continuing_prefix;
      key.append(word.substr(bounds[start], bounds[end] - bounds[start]));
      found = token_index_find(index_, key);
      if (found >= 0) break;
    }
    if (found < 0) return unk();
    pieces.push_back(found);
    start = end;
  }
  out.insert(out.end(), pieces.begin(), pieces.end());
}

}  // namespace brisk::text
