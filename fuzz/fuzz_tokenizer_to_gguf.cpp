// libFuzzer target: the tokenizer.json -> GGUF converter (formats/tokenizer_to_gguf*.cpp:
// BPE as gpt2 / gemma4, WordPiece as bert, Unigram as t5). The input is up to three texts
// separated by NUL bytes: tokenizer.json, then tokenizer_config.json, then config.json (each
// file written only when its part is present; config.json's integer "vocab_size" becomes the
// model's vocabulary, as the model converter passes it). The input's length picks the BPE
// form (odd: gemma4). When the converter succeeds, its keys are written to a GGUF in memory,
// parsed back and loaded with Tokenizer::from_gguf; a tokenizer that loads encodes fixed texts
// to ids in [0, vocab_size) and decodes them. brisk::Error is the only acceptable failure.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/tokenizer_to_gguf.h"
#include "scratch.h"
#include "text/tokenizer.h"

namespace {

// The model's vocabulary from config.json's "vocab_size" (0: the tokenizer's), up to 2^16 so
// that an input pads to at most that many tokens (the converter's own bound is tested apart).
int32_t fuzz_vocab_of(std::string_view config) {
  const auto cfg = nlohmann::json::parse(config, nullptr, /*allow_exceptions=*/false);
  if (!cfg.is_object() || !cfg.contains("vocab_size") || !cfg["vocab_size"].is_number_integer()) return 0;
  const int64_t n = cfg["vocab_size"].get<int64_t>();
  return n > 0 && n <= (1 << 16) ? int32_t(n) : 0;
}

void fuzz_run_tokenizer(const brisk::Tokenizer& tok) {
  static const char* const kTexts[] = {"Hello world! It's 2024-12-05.", "  leading and   runs\n\ttabs ",
                                       "Über naïve café — 東京 🦙", "[CLS] <s></s><unk>[MASK] <pad>",
                                       "\xff\xfe invalid \xc3"};
  volatile size_t sink = size_t(tok.vocab_size());
  for (const char* text : kTexts)
    for (bool special : {false, true}) {
      const std::vector<int32_t> ids = tok.encode(text, {.add_special = special, .parse_special = special});
      for (int32_t id : ids)
        if (id < 0 || id >= tok.vocab_size()) std::abort();  // encode must give valid ids
      sink = sink + tok.decode(ids, special).size();
      brisk::StreamDecoder stream(tok);
      for (int32_t id : ids) sink = sink + stream.push(id).size();
      sink = sink + stream.flush().size();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace brisk;
  namespace fs = std::filesystem;
  if (size > (8u << 20)) return 0;  // real tokenizer.json files stay well under this
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> parts;
  for (size_t start = 0; parts.size() < 3;) {
    const size_t end = input.find('\0', start);
    parts.push_back(input.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  const std::string& dir = fuzz::scratch_dir("tok2gguf");
  const char* const kNames[] = {"tokenizer.json", "tokenizer_config.json", "config.json"};
  for (size_t i = 0; i < 3; ++i) {
    const std::string path = dir + "/" + kNames[i];
    if (i < parts.size()) fuzz::write_file(path, reinterpret_cast<const uint8_t*>(parts[i].data()), parts[i].size());
    else fs::remove(path);
  }
  const TokenizerToGgufParams params{.folder = dir,
                                     .pre = "",
                                     .n_vocab = parts.size() > 2 ? fuzz_vocab_of(parts[2]) : 0,
                                     .model = size % 2 ? "gemma4" : "gpt2"};
  gguf::Writer w;
  try {
    const int32_t n_tok = tokenizer_to_gguf(params, w);
    if (n_tok < 0 || (params.n_vocab > 0 && n_tok > params.n_vocab)) std::abort();
  } catch (const Error&) {
    return 0;
  }
  // What the converter wrote must parse back as a GGUF, and load as a tokenizer or an Error.
  std::optional<gguf::File> file;
  try {
    file.emplace(gguf::File::parse(w.write_to_memory("fuzz.gguf")));
  } catch (const Error&) {
    std::abort();
  }
  std::unique_ptr<Tokenizer> tok;
  try {
    tok = Tokenizer::from_gguf(*file);
  } catch (const Error&) {
    return 0;
  }
  try {
    fuzz_run_tokenizer(*tok);
  } catch (const Error&) {
  }
  return 0;
}
