// libFuzzer target: the GGUF reader on arbitrary bytes. Parses from memory, walks every metadata
// value (nested arrays included) and reads the first and last byte of every tensor; brisk::Error
// is the only acceptable failure.
#include <cstddef>
#include <cstdint>
#include <functional>

#include "core/error.h"
#include "formats/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace brisk;
  try {
    const auto f = gguf::File::parse(MappedFile::from_memory(data, size, "fuzz.gguf"));
    volatile uint64_t sink = f.alignment() + f.data_offset() + f.architecture().size();
    std::function<void(const gguf::Value&)> visit = [&](const gguf::Value& v) {
      sink = sink + uint64_t(v.type) + v.as_int().value_or(0) + uint64_t(v.as_bool().value_or(false));
      if (const std::string* s = v.as_string()) sink = sink + s->size();
      if (const gguf::Array* a = v.as_array())
        for (const auto& item : a->items) visit(item);
    };
    for (const auto& [key, value] : f.metadata()) {
      sink = sink + key.size();
      visit(value);
    }
    for (const auto& t : f.tensors()) {
      sink = sink + t.n_elements + (f.find_tensor(t.name) == &t ? 1 : 0);
      if (t.n_bytes > 0) sink = sink + t.data[0] + t.data[t.n_bytes - 1];
    }
    // The typed getters on keys consumers ask for.
    try {
      (void)f.get_string_array("tokenizer.ggml.tokens");
      (void)f.get_float_array("tokenizer.ggml.scores");
      (void)f.get_int_array("tokenizer.ggml.token_type");
      (void)f.get_int(f.architecture() + ".block_count");
    } catch (const Error&) {
    }
  } catch (const Error&) {
  }
  return 0;
}
