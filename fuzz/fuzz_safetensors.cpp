// libFuzzer target: the safetensors header parser on arbitrary bytes. Parses from memory, reads
// every tensor's bytes through to_f32 (bounded in size) and the metadata; brisk::Error is the
// only acceptable failure.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace brisk;
  try {
    const auto c = safetensors::Checkpoint::parse(
        MappedFile::from_memory(data, size, "fuzz.safetensors"));
    volatile uint64_t sink = c.metadata().size();
    for (const auto& t : c.tensors()) {
      sink = sink + t.shape.size() + (c.find(t.name) == &t ? 1 : 0);
      // Bytes lie inside the input, so conversion is bounded by the input size.
      const auto v = safetensors::to_f32(t);
      if (!v.empty()) sink = sink + uint64_t(v.front() == v.back());
    }
  } catch (const Error&) {
  }
  return 0;
}
