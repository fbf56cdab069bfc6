// WordPiece (BERT family): greedy longest-match-first over each pre-tokenized word; a word
// that cannot be covered becomes [UNK]. Continuation pieces carry `continuing_prefix` ("##");
// GGUF vocabularies instead mark word starts with `word_prefix` ("▁") and leave continuations bare.
#pragma once
#include <string>

#include "text/tokenizer_model.h"

namespace brisk::text {

struct WordPieceParams {
  std::string continuing_prefix = "##";
  std::string word_prefix;
  int32_t unk_id = -1;
  size_t max_input_chars_per_word = 100;
};

class WordPieceModel final : public TokenModel {
 public:
  WordPieceModel(TokenIndex index, WordPieceParams params);
  void tokenize(std::string_view word, std::vector<int32_t>& out) const override;

 private:
  TokenIndex index_;
  WordPieceParams params_;
};

}  // namespace brisk::text
