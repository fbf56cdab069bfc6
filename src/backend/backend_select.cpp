// Backend selection by name, the default (host memory) copy and the error of an op a backend
// does not implement.
#include <cstdlib>
#include <cstring>

#include "backend/backend.h"
#include "backend/devices.h"
#include "core/error.h"
#include "core/log.h"
#ifdef BRISK_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace brisk {

void Backend::copy(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memmove(dst, src, bytes);
}

std::unique_ptr<Backend> make_backend(const std::string& device, int n_threads) {
  if (device.empty() || device == "cpu") return make_cpu_backend(n_threads);
  int index = 0;
  bool want_cuda = false;
  if (device == "cuda") {
    want_cuda = true;
  } else if (device.rfind("cuda:", 0) == 0) {
    const std::string n = device.substr(5);
    char* end = nullptr;
    const long v = std::strtol(n.c_str(), &end, 10);
    BRISK_CHECK(!n.empty() && end && *end == '\0' && v >= 0 && v < 1024, "device '", device,
                "': expected cuda:N with N a device index");
    index = int(v);
    want_cuda = true;
  } else {
    BRISK_CHECK(device == "auto", "unknown device '", device, "' (use auto, cpu, cuda or cuda:N)");
  }
  if (want_cuda) require_cuda_device(device);
#ifdef BRISK_HAVE_CUDA
  if (want_cuda) return make_cuda_backend(index);
  if (auto_device_is_cuda()) return make_cuda_backend(0);
  return make_cpu_backend(n_threads);
#else
  (void)index;
  log_debug("device auto: this build has no CUDA backend; running on the CPU");
  return make_cpu_backend(n_threads);
#endif
}

}  // namespace brisk
