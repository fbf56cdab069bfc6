// Kernel launches with programmatic dependent launch (Hopper): every kernel of kernels/cuda/
// begins with BRISK_PDL_ENTER(), which waits until the kernels before it on the stream have
// completed and their memory is visible (griddepcontrol.wait), then lets the next kernel be
// launched (griddepcontrol.launch_dependents). The next kernel's launch and block scheduling
// then overlap this kernel's run instead of following its end; correctness is unchanged, since
// no kernel reads or writes memory before its wait. Works the same inside CUDA graphs.
#pragma once
#include <cuda_runtime.h>

#include <utility>

#include "core/flags.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define BRISK_PDL_ENTER()                               \
  do {                                                  \
    asm volatile("griddepcontrol.wait;" ::: "memory");  \
    asm volatile("griddepcontrol.launch_dependents;");  \
  } while (0)
#else
#define BRISK_PDL_ENTER() \
  do {                    \
  } while (0)
#endif

namespace brisk::cuda {

// Multiprocessors of the current device (132 when the query fails), read once.
inline int sm_count() {
  static int n = [] {
    int dev = 0, c = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&c, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      c = 132;
    cudaGetLastError();
    return c > 0 ? c : 132;
  }();
  return n;
}

template <typename... KArgs, typename... Args>
cudaError_t launch_kernel(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = flags().no_cuda_pdl ? 0 : 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace brisk::cuda
