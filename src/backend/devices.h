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
// Why no device was found ("CUDA backend not built", "no NVIDIA driver on this machine", ...);
// "" when found.
std::string devices_unavailable_reason();
// Whether the NVIDIA driver library (libcuda.so.1) can be loaded: without it this machine
// never had a usable GPU.
bool gpu_driver_present();
// `--device auto`: whether a CUDA device is usable. When none is but a driver exists, one
// warning per process says why; without a driver, nothing is said.
bool auto_device_is_cuda();
// `--device cuda[:N]`: throws one line naming the cause when no CUDA device is usable.
void require_cuda_device(const std::string& device);

}  // namespace brisk
