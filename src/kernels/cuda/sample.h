// Launcher of kernels/cuda/sample.cu: the host sampler's chain (runtime/sampler.h) on the
// device, one block per logits row, so that only the token id is copied back.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/op_args.h"
#include "quant/types.h"

namespace brisk::cuda {

// Per row r: specs[r] (device memory) with its edits at edits + specs[r].edit_offset; work
// [x.rows, x.cols] floats of scratch; ids[r] = the drawn token (-1 when every token is banned).
// specs[r].top_k must be in [1, kDeviceSampleMaxTopK] unless the row is greedy.
cudaError_t launch_sample_rows(const Mat& x, const DeviceSampleSpec* specs, const DeviceSampleEdit* edits,
                               float* work, int32_t* ids, cudaStream_t stream);

}  // namespace brisk::cuda
