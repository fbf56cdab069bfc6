// libFuzzer target: the tokenizer built from GGUF metadata (tokenizer.ggml.*: model, tokens,
// scores, types, merges, pre-tokenizer, special ids). Parsed from memory; when a tokenizer
// builds, fixed texts (ASCII, accents, CJK, emoji, digits, whitespace runs, special-token
// spellings) are encoded plain and with special tokens parsed: every id must be in
// [0, vocab_size); the ids are decoded whole and through StreamDecoder, as are ids at the
// vocabulary's edges. brisk::Error is the only acceptable failure.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/gguf.h"
#include "text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace brisk;
  std::unique_ptr<Tokenizer> tok;
  try {
    const auto f = gguf::File::parse(MappedFile::from_memory(data, size, "fuzz.gguf"));
    tok = Tokenizer::from_gguf(f);
  } catch (const Error&) {
    return 0;
  }
  static const char* const kTexts[] = {
      "Hello world! It's 2024-12-05, 3.14159.", "  leading and   runs\n\n\ttabs ", "Über naïve café — 東京 🦙",
      "<|im_start|>user\nhi<|im_end|><s></s><|endoftext|>", "1234567890 00 007", "\xff\xfe invalid \xc3"};
  try {
    volatile size_t sink = size_t(tok->vocab_size());
    for (const char* text : kTexts)
      for (bool special : {false, true}) {
        const std::vector<int32_t> ids = tok->encode(text, {.add_special = special, .parse_special = special});
        for (int32_t id : ids)
          if (id < 0 || id >= tok->vocab_size()) std::abort();  // encode must give valid ids
        sink = sink + tok->decode(ids, special).size();
        StreamDecoder stream(*tok);
        for (int32_t id : ids) sink = sink + stream.push(id).size();
        sink = sink + stream.flush().size();
      }
    const int32_t n = tok->vocab_size();
    if (n > 0) sink = sink + tok->decode({0, n - 1, n / 2}).size();
  } catch (const Error&) {
  }
  return 0;
}
