// libFuzzer target: a Hugging Face tokenizer.json loaded from arbitrary text. The input is
// written as tokenizer.json into a private temporary folder and opened with
// Tokenizer::from_hf_dir; when it loads, a slice of the input is encoded (plain and with
// special tokens parsed), decoded whole and through StreamDecoder, and a few ids taken from the
// input (some out of range) are decoded. brisk::Error is the only acceptable failure.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "text/tokenizer.h"

namespace {

const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/brisk_fuzz_tok_XXXXXX";
    if (!mkdtemp(tmpl.data())) std::abort();
    return tmpl;
  }();
  return dir;
}

bool write_file(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace brisk;
  if (size > (8u << 20)) return 0;  // real tokenizer.json files stay well under this
  if (!write_file(scratch_dir() + "/tokenizer.json", data, size)) std::abort();
  std::unique_ptr<Tokenizer> tok;
  try {
    tok = Tokenizer::from_hf_dir(scratch_dir());
  } catch (const Error&) {
    return 0;
  }
  const std::string_view text(reinterpret_cast<const char*>(data), size < 256 ? size : 256);
  try {
    volatile size_t sink = size_t(tok->vocab_size()) + size_t(tok->bos_id() + tok->eos_id());
    for (bool special : {false, true}) {
      const std::vector<int32_t> ids = tok->encode(text, {.add_special = special, .parse_special = special});
      for (int32_t id : ids)
        if (id < 0 || id >= tok->vocab_size()) std::abort();  // encode must give valid ids
      sink = sink + tok->decode(ids, special).size() + tok->decode_bytes(ids).size();
      StreamDecoder stream(*tok);
      for (int32_t id : ids) sink = sink + stream.push(id).size();
      sink = sink + stream.flush().size();
    }
    for (int32_t id : tok->end_of_generation_ids()) sink = sink + size_t(id);
  } catch (const Error&) {
  }
  // Ids straight from the input: out-of-range ones must be rejected with an Error.
  try {
    std::vector<int32_t> ids;
    for (size_t i = 0; i + 1 < size && ids.size() < 16; i += 2)
      ids.push_back(int32_t((data[i] << 8) | data[i + 1]) - 2);
    volatile size_t sink = tok->decode(ids).size();
    for (int32_t id : ids) {
      sink = sink + tok->token_text(id).size() + (tok->is_special(id) ? 1 : 0);
    }
    sink = sink + size_t(tok->token_id(text) + 1);
  } catch (const Error&) {
  }
  return 0;
}
