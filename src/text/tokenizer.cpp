// Tokenizer entry points that do not depend on the file format, and the streaming decoder.
#include "text/tokenizer.h"

#include "core/error.h"
#include "text/unicode.h"

namespace brisk {

StreamDecoder::StreamDecoder(const Tokenizer& tok, bool skip_special)
    : tok_(tok), skip_special_(skip_special) {}

// The window keeps at least one earlier id that the decoder sees (so rules that apply to the
// first token of a sequence, like SentencePiece's leading-space strip, are not re-applied),
// and every id whose text is not complete UTF-8 yet. Output is the growth of the window's
// decoded bytes, which is the suffix a whole-sequence decode would add.
std::string StreamDecoder::push(int32_t id) {
  BRISK_CHECK(id >= 0 && id < tok_.vocab_size(), "token id ", id, " is out of range (vocab size ",
              tok_.vocab_size(), ")");
  ids_.push_back(id);
  const std::string text = tok_.decode_bytes(ids_, skip_special_);
  const size_t hold = text::utf8_incomplete_tail(text);
  std::string out;
  if (text.size() >= emitted_bytes_ + hold) {
    out = text.substr(emitted_bytes_, text.size() - hold - emitted_bytes_);
    emitted_bytes_ = text.size() - hold;
  }
  if (hold == 0) {
    // Shrink the window to the last id that the decoder sees; when every id is skipped, the
    // next one starts the decoded text, as in a whole-sequence decode.
    size_t keep = ids_.size();
    for (size_t k = ids_.size(); k-- > 0;) {
      if (!(skip_special_ && tok_.is_special(ids_[k]))) {
        keep = k;
        break;
      }
    }
    if (keep == ids_.size()) {
      ids_.clear();
      emitted_bytes_ = 0;
    } else if (keep > 0) {
      ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(keep));
      emitted_bytes_ = tok_.decode_bytes(ids_, skip_special_).size();
    }
  }
  // Bytes that can no longer form a character (a broken sequence from the model) come out
  // as U+FFFD, so the output is always valid UTF-8.
  return text::utf8_is_valid(out) ? out : text::utf8_sanitize(out);
}

std::string StreamDecoder::flush() {
  const std::string text = tok_.decode_bytes(ids_, skip_special_);
  std::string rest = text.size() > emitted_bytes_ ? text.substr(emitted_bytes_) : std::string();
  ids_.clear();
  emitted_bytes_ = 0;
  return text::utf8_sanitize(rest);
}

}  // namespace brisk
