// Accelerator discovery. Returns an empty list when the CUDA backend is not built or no GPU
// (or no driver) is present; never throws for a missing GPU.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace brisk {

struct DeviceInfo {
  std::string backend;  // "cuda"
  int index = 0;
  std::string name;
  int compute_major = 0, compute_minor = 0;
  uint64_t total_memory = 0, free_memory = 0;
};

std::vector<DeviceInfo> list_devices();
// Why no device was found ("CUDA backend not built", "no CUDA driver", ...); "" when found.
std::string devices_unavailable_reason();

}  // namespace brisk
