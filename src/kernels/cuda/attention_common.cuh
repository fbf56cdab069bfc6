// What the attention files share (attention.cu: the launchers; attention_split.cu: the kernel
// split over KV positions and its combine; attention_cluster.cu: the one-token cluster kernel):
// limits, warp reductions, asynchronous copies into shared memory, the launch flags and the
// split geometry.
#pragma once
#include <cuda_runtime.h>

#include "kernels/cuda/kernels.h"

namespace brisk::cuda {

constexpr int kMaxG = 8;
constexpr int kMaxHeadDim = 512;

// The first position token t attends to, when p is the last: AttentionArgs::first in a
// bidirectional forward (the token's sequence or window), else the sliding window's start.
__device__ __forceinline__ int64_t attn_first_pos(const AttentionArgs& a, int64_t t, int64_t p) {
  if (a.first) return a.first[t];
  return a.window > 0 && p - a.window + 1 > 0 ? p - a.window + 1 : 0;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ void cp_async16(void* smem, const void* g) {
  const unsigned sa = unsigned(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sa), "l"(g));
}
__device__ __forceinline__ void cp_async8(void* smem, const void* g) {
  const unsigned sa = unsigned(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(sa), "l"(g));
}
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.commit_group;" ::: "memory");
  asm volatile("cp.async.wait_group 0;" ::: "memory");
}

struct AttentionFlags {
  bool prefetch;  // before the dependent-launch wait: the chunk's earlier K / V rows (see below)
  bool stage;     // shared memory of kStageBytes is there for staged chunks
  bool stream;    // and twice that: chunks of more than kStageRows rows stream through two buffers
  bool one_token; // the launch holds one token, so only its own position was written by the step
  bool rope;        // AttentionRope given (one head group per KV head; several tokens: the cluster kernel)
  bool merge_heads; // combine_heads' heads_at_once
};

struct Geometry {
  int n_split;
  int n_hg;  // head groups of up to kMaxG query heads per KV head
};

// The split kernel's geometry for `a` and its launch, rope / quant as in launch_attention_rope
// once the cluster kernel declined (attention_split.cu).
Geometry attention_geometry(const AttentionArgs& a);
cudaError_t launch_attention_split(const AttentionArgs& a, const AttentionRope* rope, float* scratch, int* counters,
                                   cudaStream_t s, const AttentionQuant* quant);
// Blocks per cluster of the cluster kernel for `a` (0 where it does not apply), and its launch
// (attention_cluster.cu).
int cluster_splits(const AttentionArgs& a);
// Tokens a cluster launch takes (a cluster per KV head and token): steps of up to 8 tokens
// (speculative verify groups, small batches) compute each token as its launch alone does.
constexpr int64_t kClusterMaxTokens = 8;
// Steps of up to this many tokens take their rope and KV store inside the cluster attention.
constexpr int64_t kVerifyRopeMaxTokens = 3;
cudaError_t launch_attention_cluster(const AttentionArgs& a, int n, const AttentionFlags& fl, const AttentionRope& rp,
                                     const AttentionQuant& aq, cudaStream_t s);

}  // namespace brisk::cuda
