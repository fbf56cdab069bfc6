// SentencePiece Unigram model (tokenizer.json "Unigram"): Viterbi search for the segmentation
// with the highest total piece score; characters without a piece become <unk> (runs fused) or,
// with byte_fallback, their <0xXX> byte pieces. SentencePiece-BPE (GGUF "llama") is a BpeModel
// with merges ranked by score (bpe_merges_from_scores in bpe.h).
#pragma once
#include <string>
#include <vector>

#include "text/tokenizer_model.h"

namespace brisk::text {

struct UnigramParams {
  int32_t unk_id = -1;
  bool byte_fallback = false;
  bool fuse_unk = true;
};

class UnigramModel final : public TokenModel {
 public:
  UnigramModel(const std::vector<std::string>& pieces, const std::vector<float>& scores,
               UnigramParams params);
  void tokenize(std::string_view piece, std::vector<int32_t>& out) const override;

 private:
  TokenIndex index_;
  std::vector<double> scores_;
  size_t max_piece_bytes_ = 0;
  double unk_score_ = 0;
  UnigramParams params_;
  int32_t byte_ids_[256];
};

}  // namespace brisk::text
