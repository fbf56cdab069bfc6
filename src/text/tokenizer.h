// Tokenizers: byte-level BPE, SentencePiece (BPE with byte fallback, Unigram) and WordPiece,
// loaded from GGUF metadata (tokenizer.ggml.*) or a Hugging Face folder (tokenizer.json +
// tokenizer_config.json). Ids match Hugging Face `tokenizers`.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace brisk {

namespace gguf { class File; }

struct EncodeOptions {
  bool add_special = false;    // BOS/EOS and post-processor rules of the model
  bool parse_special = false;  // match special/added tokens in the text
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& file);
  // `dir` holds tokenizer.json (+ tokenizer_config.json); throws brisk::Error when missing.
  static std::unique_ptr<Tokenizer> from_hf_dir(const std::string& dir);

  virtual std::vector<int32_t> encode(std::string_view text, const EncodeOptions& opt = {}) const = 0;
  // Whole-sequence decode; ids out of range throw brisk::Error.
  virtual std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const = 0;
  // As decode, but invalid UTF-8 (e.g. a character split across ids) is kept as raw bytes
  // instead of being replaced by U+FFFD. The streaming decoder builds on this.
  virtual std::string decode_bytes(const std::vector<int32_t>& ids, bool skip_special = false) const {
    return decode(ids, skip_special);
  }

  virtual int32_t vocab_size() const = 0;
  virtual std::string token_text(int32_t id) const = 0;  // the vocabulary entry as stored
  virtual bool is_special(int32_t id) const = 0;          // control / special added token
  virtual int32_t bos_id() const = 0;                     // -1 when none
  virtual int32_t eos_id() const = 0;                     // -1 when none
  // Every id that ends a generation: EOS plus end-of-turn tokens (<|im_end|>, <|eot_id|>,
  // <end_of_turn>, ...) declared by the model files.
  virtual std::vector<int32_t> end_of_generation_ids() const = 0;
  virtual int32_t token_id(std::string_view text) const = 0;  // exact vocab entry, -1 if none
};

// Streams text as ids arrive: never splits a UTF-8 character, applies the leading-space rule
// of SentencePiece as a whole-sequence decode does. Concatenated output == decode(all ids).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special = false);
  std::string push(int32_t id);  // newly complete text (may be empty)
  std::string flush();           // whatever is held back (incomplete UTF-8 as U+FFFD)
 private:
  const Tokenizer& tok_;
  bool skip_special_;
  std::vector<int32_t> ids_;  // window: context ids, then ids not yet fully emitted
  size_t emitted_bytes_ = 0;  // bytes of decode_bytes(ids_) already returned
};

}  // namespace brisk
