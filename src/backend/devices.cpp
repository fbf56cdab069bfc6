// Accelerator discovery, and what `--device auto` and `--device cuda` say when no GPU is
// usable: nothing on a machine without an NVIDIA driver library (there never was a GPU), one
// warning per process where a driver exists but no device can be used, and for an explicit
// `cuda` one error line naming the cause.
#include "backend/devices.h"

#include <dlfcn.h>

#include <mutex>

#include "core/error.h"
#include "core/log.h"

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
  if (!d.empty()) return "";
  return gpu_driver_present() ? reason : "no NVIDIA driver on this machine (libcuda.so.1 not found)";
#else
  return "CUDA backend not built (configure with nvcc available or -DBRISK_CUDA=ON)";
#endif
}

bool gpu_driver_present() {
  static const bool present = [] {
    void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (h) dlclose(h);
    return h != nullptr;
  }();
  return present;
}

bool auto_device_is_cuda() {
#ifdef BRISK_HAVE_CUDA
  std::string reason;
  if (!cuda::enumerate_devices(&reason).empty()) return true;
  if (gpu_driver_present()) {
    static std::once_flag once;
    std::call_once(once, [&] { log_warn("device auto: ", reason, "; running on the CPU"); });
  }
#endif
  return false;
}

void require_cuda_device(const std::string& device) {
#ifdef BRISK_HAVE_CUDA
  BRISK_CHECK(!list_devices().empty(), "--device ", device, ": ", devices_unavailable_reason());
#else
  fail("--device ", device, ": this build has no CUDA backend");
#endif
}

}  // namespace brisk
