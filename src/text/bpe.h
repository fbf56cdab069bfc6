// Byte-pair encoding model: the initial symbols of a piece (characters, or byte tokens
// <0xXX> with byte_fallback) are merged pairwise, lowest merge rank first (leftmost on
// ties), as Hugging Face `tokenizers` does. A bounded cache keeps the ids of recent pieces.
// SentencePiece-BPE vocabularies without merges (GGUF "llama") rank pairs by the score of the
// merged token: see bpe_merges_from_scores.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/tokenizer_model.h"

namespace brisk::text {

struct BpeMerge {
  int32_t left = -1, right = -1;  // ids of the pair
  int32_t result = -1;            // id of the merged token
  int32_t rank = 0;               // lower merges first
};

struct BpeParams {
  bool byte_fallback = false;
  int32_t unk_id = -1;  // -1: unknown characters are dropped
  bool fuse_unk = false;
  bool ignore_merges = false;  // a piece that is a vocab entry is emitted as is
  bool whole_newline_runs = false;  // a piece of only '\n' that is a vocab entry is emitted as is
                                    // (llama.cpp's gemma4 vocabulary)
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
};

class BpeModel final : public TokenModel {
 public:
  // `index` maps every model token to its id; merges are validated by the caller.
  BpeModel(TokenIndex index, const std::vector<BpeMerge>& merges, BpeParams params);
  void tokenize(std::string_view piece, std::vector<int32_t>& out) const override;

  // Reference merge loop without the cache (tests compare the two).
  void tokenize_uncached(std::string_view piece, std::vector<int32_t>& out) const;

 private:
  // Open-addressing map from a 64-bit key to two ints (linear probing, power-of-two size).
  class FlatMap {
   public:
    void reserve(size_t n);
    void insert(uint64_t key, int32_t a, int32_t b);  // keeps the first value for a key
    const int32_t* find(uint64_t key) const;           // {a, b} or nullptr
    bool empty() const { return size_ == 0; }

   private:
    struct Slot {
      uint64_t key;
      int32_t a, b;
    };
    static constexpr uint64_t kEmpty = ~uint64_t{0};
    static uint64_t mix(uint64_t k) {
      k ^= k >> 33;
      k *= 0xff51afd7ed558ccdULL;
      k ^= k >> 33;
      return k;
    }
    std::vector<Slot> slots_;
    size_t mask_ = 0, size_ = 0;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  int32_t char_id(std::string_view ch, uint32_t cpt) const;

  TokenIndex index_;
  FlatMap merges_;     // (left, right) -> (rank, result)
  FlatMap char_ids_;   // code point -> id of the single-character token
  BpeParams params_;
  int32_t byte_ids_[256];

  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

// Pairs (a, b) whose concatenation is a vocabulary entry, ranked by that entry's score
// (higher score merges first). `tokens[i]` has score `scores[i]`; `mergeable[i]` false
// excludes entry i (control, byte and unused tokens).
std::vector<BpeMerge> bpe_merges_from_scores(const std::vector<std::string>& tokens,
                                             const std::vector<float>& scores,
                                             const std::vector<bool>& mergeable,
                                             const TokenIndex& index);

}  // namespace brisk::text
