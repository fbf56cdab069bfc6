// libFuzzer target: model construction from a Hugging Face folder. Input: config.json text up
// to the first NUL byte, then the model.safetensors bytes; both are written into a private
// folder, which Model::load reads (config keys against the tensors' names, dtypes and shapes);
// a model that loads runs a prompt and a step (model_run.h). brisk::Error is the only
// acceptable failure.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "model_run.h"
#include "scratch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* nul = static_cast<const uint8_t*>(std::memchr(data, 0, size));
  if (!nul) return 0;
  const std::string& dir = brisk::fuzz::scratch_dir("model_st");
  brisk::fuzz::write_file(dir + "/config.json", data, size_t(nul - data));
  brisk::fuzz::write_file(dir + "/model.safetensors", nul + 1, size - size_t(nul - data) - 1);
  brisk::fuzz::load_and_run(dir);
  return 0;
}
