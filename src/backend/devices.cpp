#include "backend/devices.h"

#ifdef BRISK_HAVE_CUDA
#include "backend/cuda/cuda_devices.h"
#endif

namespace brisk {

std::vector<DeviceInfo> list_devices() {
#ifdef BRISK_HAVE_CUDA
  return cuda::enumerate_devices(nullptr);
#else
  return {};
#endif
}

std::string devices_unavailable_reason() {
#ifdef BRISK_HAVE_CUDA
  std::string reason;
  auto d = cuda::enumerate_devices(&reason);
  return d.empty() ? reason : "";
#else
  return "CUDA backend not built (configure with nvcc available or -DBRISK_CUDA=ON)";
#endif
}

}  // namespace brisk
