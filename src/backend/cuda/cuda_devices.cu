// CUDA device enumeration (runtime API). Absent driver or GPU -> empty list, not an error.
#include <cuda_runtime.h>

#include "backend/cuda/cuda_devices.h"

namespace brisk::cuda {

std::vector<DeviceInfo> enumerate_devices(std::string* reason) {
  std::vector<DeviceInfo> out;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (reason) *reason = std::string("no usable CUDA device: ") + cudaGetErrorString(err);
    cudaGetLastError();
    return out;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    DeviceInfo d;
    d.backend = "cuda";
    d.index = i;
    d.name = prop.name;
    d.compute_major = prop.major;
    d.compute_minor = prop.minor;
    d.total_memory = prop.totalGlobalMem;
    size_t free_b = 0, total_b = 0;
    if (cudaSetDevice(i) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
      d.free_memory = free_b;
    out.push_back(d);
  }
  if (out.empty() && reason) *reason = "no CUDA device found";
  return out;
}

}  // namespace brisk::cuda
