// Launcher of kernels/cuda/attention_prefill.cu: tensor-core attention for a prefill batch of
// one sequence at consecutive positions (the caller checks that on the host: a.seq all equal,
// a.pos[i] = a.pos[0] + i) over an F16 KV cache, head_dim 64 or 128. Pointers are device memory.
#pragma once
#include <cuda_runtime.h>

#include "core/op_args.h"
#include "quant/types.h"

namespace brisk::cuda {

// The shapes and cache formats the kernel takes (F16 caches with 16-byte aligned rows).
bool prefill_attention_supported(const AttentionArgs& a);
cudaError_t launch_prefill_attention(const AttentionArgs& a, cudaStream_t stream);

}  // namespace brisk::cuda
