#pragma once
#include <cstdint>
#include <memory>

#include "backend/backend.h"

namespace brisk {

// The CUDA backend on device `device` (an index from brisk inspect --devices). Throws
// brisk::Error when the device is absent or unusable. graphs = false (or the
// BRISK_NO_CUDA_GRAPHS flag) runs every step launch by launch instead of as a CUDA graph.
std::unique_ptr<Backend> make_cuda_backend(int device, bool graphs = true);

// Steps a CUDA backend ran by replaying a captured graph (0 for other backends).
uint64_t cuda_graph_replays(const Backend& be);

}  // namespace brisk
