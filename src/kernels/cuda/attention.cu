// Attention over the KV cache for decode and prefill: one block per (token, head). Positions
// [lo, pos] of the token's sequence (lo = pos - window + 1 with a sliding window, else 0) are
// visited in tiles of kTile: each thread scores one position (q . k * scale, optional tanh
// softcap), then the tile is folded into a running max / sum / output (online softmax), each
// thread owning head dims tid, tid + kTile, ... of the output. GQA: head h reads KV head
// h / (n_head / n_head_kv). Cache rows are F32 or F16.
#include <cuda_fp16.h>

#include "kernels/cuda/kernels.h"

namespace brisk::cuda {

namespace {

constexpr int kTile = 128;
constexpr int kMaxHeadDim = 512;
constexpr int kMaxDimsPerThread = kMaxHeadDim / kTile;

template <bool F16>
__device__ __forceinline__ float kv_at(const uint8_t* row, int64_t i) {
  if (F16) return __half2float(reinterpret_cast<const __half*>(row)[i]);
  return reinterpret_cast<const float*>(row)[i];
}

__device__ float block_reduce(float v, bool is_max, float* red) {
  for (int o = 16; o > 0; o >>= 1) {
    const float u = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, u) : v + u;
  }
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < kTile / 32; ++w) r = is_max ? fmaxf(r, red[w]) : r + red[w];
  return r;
}

template <bool F16>
__global__ void attention_kernel(AttentionArgs a) {
  const int64_t t = blockIdx.x / a.n_head;
  const int h = int(blockIdx.x % a.n_head);
  const int hd = a.head_dim, group = a.n_head / a.n_head_kv, kvh = h / group;
  const int64_t s = a.seq[t], p = a.pos[t];
  const int64_t lo = a.window > 0 && p - a.window + 1 > 0 ? p - a.window + 1 : 0;

  __shared__ float q[kMaxHeadDim];
  __shared__ float prob[kTile];
  __shared__ float red[kTile / 32];
  const float* qrow = a.q.data + t * (a.q.stride ? a.q.stride : a.q.cols) + int64_t(h) * hd;
  for (int i = threadIdx.x; i < hd; i += kTile) q[i] = qrow[i];
  __syncthreads();

  const uint8_t* kbase = static_cast<const uint8_t*>(a.k_cache.data) + size_t(s) * size_t(a.k_cache.capacity) * a.k_cache.row_bytes;
  const uint8_t* vbase = static_cast<const uint8_t*>(a.v_cache.data) + size_t(s) * size_t(a.v_cache.capacity) * a.v_cache.row_bytes;
  float acc[kMaxDimsPerThread] = {};
  float m = -INFINITY, l = 0.0f;
  for (int64_t j0 = lo; j0 <= p; j0 += kTile) {
    const int64_t j = j0 + threadIdx.x;
    float sc = -INFINITY;
    if (j <= p) {
      const uint8_t* krow = kbase + size_t(j) * a.k_cache.row_bytes;
      const int64_t off = int64_t(kvh) * hd;
      float dot = 0.0f;
      for (int i = 0; i < hd; ++i) dot = fmaf(q[i], kv_at<F16>(krow, off + i), dot);
      sc = dot * a.scale;
      if (a.softcap > 0.0f) sc = a.softcap * tanhf(sc / a.softcap);
    }
    const float m_new = fmaxf(m, block_reduce(sc, true, red));
    const float e = j <= p ? __expf(sc - m_new) : 0.0f;
    const float alpha = __expf(m - m_new);  // 0 on the first tile (m = -inf)
    l = l * alpha + block_reduce(e, false, red);
    m = m_new;
    prob[threadIdx.x] = e;
    __syncthreads();
    const int n_j = int(p - j0 + 1 < kTile ? p - j0 + 1 : kTile);
    for (int k = 0; k < kMaxDimsPerThread; ++k) {
      const int d = threadIdx.x + k * kTile;
      if (d >= hd) break;
      float v = acc[k] * alpha;
      for (int jj = 0; jj < n_j; ++jj)
        v = fmaf(prob[jj], kv_at<F16>(vbase + size_t(j0 + jj) * a.v_cache.row_bytes, int64_t(kvh) * hd + d), v);
      acc[k] = v;
    }
    __syncthreads();
  }
  float* orow = a.out.data + t * (a.out.stride ? a.out.stride : a.out.cols) + int64_t(h) * hd;
  for (int k = 0; k < kMaxDimsPerThread; ++k) {
    const int d = threadIdx.x + k * kTile;
    if (d >= hd) break;
    orow[d] = acc[k] / l;
  }
}

}  // namespace

cudaError_t launch_attention(const AttentionArgs& a, cudaStream_t s) {
  if (a.head_dim > kMaxHeadDim) return cudaErrorInvalidValue;
  const int64_t blocks = a.q.rows * a.n_head;
  if (blocks == 0) return cudaSuccess;
  if (a.k_cache.type == QuantType::F16)
    attention_kernel<true><<<unsigned(blocks), kTile, 0, s>>>(a);
  else
    attention_kernel<false><<<unsigned(blocks), kTile, 0, s>>>(a);
  return cudaGetLastError();
}

}  // namespace brisk::cuda
