// Converts a Hugging Face tokenizer (tokenizer.json, and tokenizer_config.json /
// chat_template.jinja when present beside it) into GGUF `tokenizer.ggml.*` keys as llama.cpp's
// converter writes them. By tokenizer.json's model.type:
//   WordPiece -> "bert", Unigram -> "t5" (tokenizer_to_gguf_encoder.cpp);
//   BPE -> byte-level ("gpt2") or llama.cpp's Gemma 4 form ("gemma4", byte tokens
// typed BYTE 6), as TokenizerToGgufParams::model says: tokens by id (padded to the model's vocabulary with "[PADn]" entries of type UNUSED),
// token types (NORMAL 1, CONTROL 3 for special added tokens, USER_DEFINED 4 for other added
// tokens), merges "a b", bos/eos ids and the chat template (chat_template.jinja,
// chat_template.json or tokenizer_config.json, as transformers looks for it).
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace brisk {
namespace gguf {
class Writer;
}

struct TokenizerToGgufParams {
  std::string folder;        // holds tokenizer.json (and optionally tokenizer_config.json)
  std::string pre;           // tokenizer.ggml.pre, e.g. "qwen2", "llama-bpe"; "": from the
                             // pre-tokenizer's digit rule (tokenizer_pre_of)
  int32_t n_vocab = 0;       // model's vocabulary (>= the tokenizer's); 0: the tokenizer's
  std::string model = "gpt2";  // a BPE tokenizer's tokenizer.ggml.model: "gpt2" (byte-level)
                               // or "gemma4" (SentencePiece-style, <0xXX> byte tokens; no pre)
};

// tokenizer.json's model.type ("BPE", "WordPiece", "Unigram", ...); throws naming the file when
// the file or the field is missing or malformed.
std::string tokenizer_json_model_type(const std::string& folder);

// The llama.cpp pre-tokenizer name of a tokenizer.json: "llama-bpe" when its split pattern
// groups digits by up to three (Llama 3), else "qwen2" (digits one by one).
std::string tokenizer_pre_of(const nlohmann::json& tokenizer_json);

// Adds the keys to `w`; returns the number of token entries written.
int32_t tokenizer_to_gguf(const TokenizerToGgufParams& p, gguf::Writer& w);

}  // namespace brisk
