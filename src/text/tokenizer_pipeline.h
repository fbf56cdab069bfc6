// The one Tokenizer implementation: added-token matching, normalizer, pre-tokenizer, model,
// post-processor (BOS/EOS) and decoder, configured as data by the loaders
// (tokenizer_hf.cpp for tokenizer.json, tokenizer_gguf.cpp for GGUF metadata).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "text/pretokenize.h"
#include "text/tokenizer.h"
#include "text/tokenizer_model.h"

namespace brisk::text {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;     // skipped by decode(skip_special); matched only with parse_special
  bool lstrip = false;      // the match takes the whitespace on its left
  bool rstrip = false;      // ... and on its right
  bool normalized = false;  // matched in normalized text instead of raw text
  bool single_word = false; // not matched inside a word
};

struct DecoderStep {
  enum class Kind { byte_level, replace, byte_fallback, fuse, strip, metaspace, wordpiece, bpe_suffix };
  Kind kind = Kind::fuse;
  std::string pattern{}, content{};  // replace (literal); strip: content; metaspace: replacement
  int strip_start = 0, strip_stop = 0;
  bool metaspace_prepend = true;  // metaspace: drop replacement chars of the first token
  std::string prefix = "##";      // wordpiece
  bool cleanup = true;            // wordpiece
  std::string suffix = "</w>";    // bpe_suffix
};

struct TokenizerSpec {
  std::vector<std::string> tokens;  // id -> text as stored (model vocab and added tokens)
  std::vector<uint8_t> special;     // id -> control/special flag
  TokenIndex index;                 // text -> id over `tokens` (first id wins)
  std::unique_ptr<TokenModel> model;
  std::vector<NormalizerStep> normalizer;
  std::vector<PreTokenizerStep> pre_tokenizer;
  std::vector<AddedToken> added;
  std::vector<int32_t> add_prefix, add_suffix;  // ids around the text with add_special
  std::vector<DecoderStep> decoder;             // empty: tokens joined by " "
  int32_t bos = -1, eos = -1;
  std::vector<int32_t> end_of_generation;
};

std::unique_ptr<Tokenizer> make_pipeline_tokenizer(TokenizerSpec spec);

// Adds to `spec.end_of_generation` the eos id and the end-of-turn tokens that exist
// (<|im_end|>, <|eot_id|>, <|eom_id|>, <end_of_turn>, <|endoftext|>, <|end|>), without duplicates.
void add_end_of_generation_defaults(TokenizerSpec& spec);

// Decoder steps applied to token strings. `raw`: keep bytes as they are (no U+FFFD repair).
std::string run_decoder(const std::vector<DecoderStep>& steps, std::vector<std::string> tokens, bool raw);

}  // namespace brisk::text
