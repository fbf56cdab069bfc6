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
// Launches of the last step a CUDA backend collected for a graph, after fusion (0 for other
// backends, or when no step was collected).
size_t cuda_step_launches(const Backend& be);

// Declares [p, p + bytes) of device memory of `be` as weights that no kernel writes while
// steps run (filled before and left alone, like uploaded weights): decode matmuls on them may
// start reading before the previous kernel has ended. No effect on other backends.
void cuda_mark_constant(Backend& be, const void* p, size_t bytes);

// True when `be` is a CUDA backend that runs matmuls of more than 8 rows (F32 weights
// excepted) as BF16 tensor-core GEMMs (built with cuBLAS, BRISK_NO_CUDA_GEMM unset).
bool cuda_has_gemm(const Backend& be);
// A plain GEMM on such a backend (for the benchmark's tensor-core rate): out [m, n] F32 =
// x [m, k] BF16 . w [n, k]^T BF16, all dense device memory of `be`; queued on its stream.
void cuda_gemm_bf16(Backend& be, const uint16_t* x, const uint16_t* w, float* out, int64_t m, int64_t n, int64_t k);

}  // namespace brisk
