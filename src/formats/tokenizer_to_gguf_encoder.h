// The encoder tokenizers of tokenizer.json as GGUF keys (used by tokenizer_to_gguf, which
// dispatches on model.type):
//   WordPiece -> tokenizer.ggml.model "bert": llama.cpp's phantom-space vocabulary (a word-start
//     piece "x" is written "▁x", a continuation "##x" is written "x", control tokens as they
//     are), token types, the special ids, add_bos_token / add_eos_token from the post-processor;
//   Unigram -> "t5": pieces, scores, token types (UNKNOWN for unk_id, CONTROL for special added
//     tokens, USER_DEFINED for other added tokens, BYTE for <0xXX> pieces with byte_fallback),
//     tokenizer.ggml.precompiled_charsmap (the Precompiled normalizer's bytes),
//     add_space_prefix (the Metaspace prepend scheme), remove_extra_whitespaces (the normalizer's
//     " {2,}" -> " " rule or a WhitespaceSplit pre-tokenizer), the special ids.
// What the tokenizers pipeline does and llama.cpp's keys cannot say is written under
// `brisk.tokenizer.*` (only when it differs from llama.cpp's fixed behaviour; llama.cpp ignores
// these keys): the BertNormalizer flags (`lowercase`, `strip_accents`, `clean_text`,
// `handle_chinese_chars`), the WordPiece decoder's `decoder_cleanup`,
// `max_input_chars_per_word`, and the Unigram's `pre_tokenizer` ("metaspace" or
// "whitespace_split metaspace": a Metaspace pre-tokenizer without WhitespaceSplit keeps a space
// at the end of the text as "▁" and prepends "▁" only where the text does not start with a
// space, where llama.cpp strips both ends; with the key, control pieces stay matchable in
// unparsed text, as the tokenizers library's Unigram has them), Metaspace's `prepend_scheme`
// "first" and `metaspace_split` false; `added_token_ids` / `added_token_flags` (1 lstrip,
// 2 rstrip, 4 single_word, 8 normalized) for the added tokens tokenizer.json matches other than
// whole in raw text. A pipeline that neither form
// can hold (another normalizer, pre-tokenizer or continuation prefix, more than one token added
// before or after a text) is an error naming the file and the field.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace brisk {
namespace gguf {
class Writer;
}

// llama.cpp's token types (tokenizer.ggml.token_type).
namespace gguf_token_type {
inline constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6;
}

// One past the largest token id a tokenizer.json of n_entries tokens (model.vocab and
// added_tokens together) may use: the model's vocabulary n_vocab, or twice the entries plus
// 1024, whichever is larger, and at most 2^24. Ids beyond it would leave mostly holes (each
// written as a "[PADn]" token): a file that asks for them is an error, not gigabytes of padding.
int64_t tokenizer_id_limit(int64_t n_entries, int32_t n_vocab);

// A special token as tokenizer_config.json names it: a string or {"content": ...}; "" otherwise.
std::string hf_token_text(const nlohmann::json& v);

struct EncoderTokenizerParams {
  std::string folder;   // holds tokenizer.json, optionally tokenizer_config.json / config.json
  int32_t n_vocab = 0;  // the model's vocabulary (>= the tokenizer's); 0: the tokenizer's
};

// `tj` is the folder's tokenizer.json. Each adds the keys to `w` and returns the number of
// token entries the tokenizer defines (before padding to n_vocab).
int32_t wordpiece_to_gguf(const EncoderTokenizerParams& p, const nlohmann::json& tj, gguf::Writer& w);
int32_t unigram_to_gguf(const EncoderTokenizerParams& p, const nlohmann::json& tj, gguf::Writer& w);

}  // namespace brisk
