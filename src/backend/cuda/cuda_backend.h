#pragma once
#include <memory>

#include "backend/backend.h"

namespace brisk {

// The CUDA backend on device `device` (an index from brisk inspect --devices). Throws
// brisk::Error when the device is absent or unusable.
std::unique_ptr<Backend> make_cuda_backend(int device);

}  // namespace brisk
