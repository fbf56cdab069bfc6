// libFuzzer target: model construction from GGUF bytes. The input is written as a .gguf file
// and loaded with Model::load (config from the metadata, tensors by name and shape, tokenizer);
// a model that loads runs a prompt and a step (model_run.h). brisk::Error is the only
// acceptable failure.
#include <cstddef>
#include <cstdint>

#include "model_run.h"
#include "scratch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = brisk::fuzz::scratch_dir("model_gguf") + "/model.gguf";
  brisk::fuzz::write_file(path, data, size);
  brisk::fuzz::load_and_run(path);
  return 0;
}
