// The shared Llama Q8_0 fixture for tests that run a model on the GPU: loaded when a CUDA device
// and the file are there, else nullptr with the reason to skip.
#pragma once
#include <filesystem>
#include <memory>
#include <string>

#include "backend/cuda/cuda_devices.h"
#include "runtime/engine_api.h"

namespace brisk {

inline std::shared_ptr<Model> load_shared_llama_on_cuda(std::string* skip_reason) {
  std::string reason;
  if (cuda::enumerate_devices(&reason).empty()) {
    *skip_reason = "no CUDA device: " + reason;
    return nullptr;
  }
  const std::string path = std::string(BRISK_SHARED_DATA) + "/models/llama/model-q8_0.gguf";
  if (!std::filesystem::exists(path)) {
    *skip_reason = "shared model fixture " + path + " is missing";
    return nullptr;
  }
  return Model::load({.path = path});
}

}  // namespace brisk
