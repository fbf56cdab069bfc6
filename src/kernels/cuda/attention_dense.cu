// Bidirectional attention over dense F32 q / k / v rows (encoders, AttentionDenseArgs), FP32
// throughout, head_dim <= 256. Grid (ceil(n / 32), n_head, n_seq), 128 threads: a block takes
// 32 query rows of one head of one sequence (n = rows / n_seq positions) and streams that
// sequence's K / V rows of the head's KV head through shared memory in tiles of 32 positions.
// Thread t owns query row t / 4 of the block and, per tile, the scores of positions
// t % 4 + 4 m (m < 8); the row's four threads (adjacent lanes) share the tile's max and sum by
// shuffles (online softmax, expf), write the probabilities to shared memory, then each adds
// p . V into the output columns t % 4 + 4 i it owns. Shared rows of q and k are padded by one
// float, so the lanes of a warp read distinct banks. The query is scaled before the products,
// as the CPU's blocked kernel does; sums run in other orders than the CPU's, so results agree
// to float roundings.
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/launch.cuh"

namespace brisk::cuda {

namespace {

constexpr int kQ = 32;        // query rows a block
constexpr int kJ = 32;        // positions a tile
constexpr int kThreads = 128;  // 4 threads a query row
static_assert(kThreads == 4 * kQ, "four threads per query row");

__device__ __forceinline__ int64_t dense_stride(const Mat& m) { return m.stride ? m.stride : m.cols; }

template <int kMaxHd>
__global__ void __launch_bounds__(kThreads) attention_dense_kernel(AttentionDenseArgs a, int64_t n) {
  BRISK_PDL_ENTER();
  extern __shared__ float sm[];
  const int hd = a.head_dim, ld = hd + 1;
  float* qs = sm;             // [kQ][ld] scaled queries
  float* ks = qs + kQ * ld;   // [kJ][ld]
  float* vs = ks + kJ * ld;   // [kJ][hd]
  float* ps = vs + kJ * hd;   // [kQ][kJ + 1] probabilities of the tile
  const int h = blockIdx.y;
  const int64_t row0 = int64_t(blockIdx.z) * n;  // the sequence's first row
  const int64_t kv_col = int64_t(h / (a.n_head / a.n_head_kv)) * hd;
  const int64_t i0 = int64_t(blockIdx.x) * kQ;
  const int r = threadIdx.x >> 2, sub = threadIdx.x & 3;
  const int64_t qst = dense_stride(a.q), kst = dense_stride(a.k), vst = dense_stride(a.v);

  for (int e = threadIdx.x; e < kQ * hd; e += kThreads) {
    const int rr = e / hd, d = e % hd;
    qs[rr * ld + d] = i0 + rr < n ? a.q.data[(row0 + i0 + rr) * qst + int64_t(h) * hd + d] * a.scale : 0.0f;
  }
  float o[kMaxHd / 4];
#pragma unroll
  for (int i = 0; i < kMaxHd / 4; ++i) o[i] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  const float* qr = qs + r * ld;
  float* pr = ps + r * (kJ + 1);

  for (int64_t j0 = 0; j0 < n; j0 += kJ) {
    __syncthreads();  // the previous tile's readers are done (the first time: qs is written)
    for (int e = threadIdx.x; e < kJ * hd; e += kThreads) {
      const int jj = e / hd, d = e % hd;
      const bool in = j0 + jj < n;
      const int64_t row = row0 + j0 + jj;
      ks[jj * ld + d] = in ? a.k.data[row * kst + kv_col + d] : 0.0f;
      vs[jj * hd + d] = in ? a.v.data[row * vst + kv_col + d] : 0.0f;
    }
    __syncthreads();
    float sc[kJ / 4];
#pragma unroll
    for (int k = 0; k < kJ / 4; ++k) sc[k] = 0.0f;
    for (int d = 0; d < hd; ++d) {
      const float qd = qr[d];
#pragma unroll
      for (int k = 0; k < kJ / 4; ++k) sc[k] += qd * ks[(sub + 4 * k) * ld + d];
    }
    float tmax = -INFINITY;
#pragma unroll
    for (int k = 0; k < kJ / 4; ++k) {
      if (j0 + sub + 4 * k >= n) sc[k] = -INFINITY;
      tmax = fmaxf(tmax, sc[k]);
    }
    tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
    tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 2));
    const float m_new = fmaxf(m, tmax);  // finite: a tile holds at least one position
    const float corr = expf(m - m_new);  // 0 on the first tile
    float psum = 0.0f;
#pragma unroll
    for (int k = 0; k < kJ / 4; ++k) {
      const float p = expf(sc[k] - m_new);
      pr[sub + 4 * k] = p;
      psum += p;
    }
    psum += __shfl_xor_sync(0xffffffffu, psum, 1);
    psum += __shfl_xor_sync(0xffffffffu, psum, 2);
    l = l * corr + psum;
    m = m_new;
    __syncwarp();  // the row's four threads are lanes of this warp
#pragma unroll
    for (int i = 0; i < kMaxHd / 4; ++i) o[i] *= corr;
    for (int jj = 0; jj < kJ; ++jj) {
      const float p = pr[jj];
      const float* vr = vs + jj * hd + sub;
#pragma unroll
      for (int i = 0; i < kMaxHd / 4; ++i)
        if (sub + 4 * i < hd) o[i] += p * vr[4 * i];
    }
  }
  if (i0 + r >= n) return;
  float* out = a.out.data + (row0 + i0 + r) * dense_stride(a.out) + int64_t(h) * hd;
  const float inv = 1.0f / l;
#pragma unroll
  for (int i = 0; i < kMaxHd / 4; ++i)
    if (sub + 4 * i < hd) out[sub + 4 * i] = o[i] * inv;
}

template <int kMaxHd>
cudaError_t launch_dense(const AttentionDenseArgs& a, int64_t n, cudaStream_t stream) {
  const int hd = a.head_dim;
  const size_t smem = sizeof(float) * size_t(kQ * (hd + 1) + kJ * (hd + 1) + kJ * hd + kQ * (kJ + 1));
  if (smem > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(attention_dense_kernel<kMaxHd>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (e != cudaSuccess) return e;
  }
  const dim3 grid(unsigned((n + kQ - 1) / kQ), unsigned(a.n_head), unsigned(a.n_seq));
  return launch_kernel(attention_dense_kernel<kMaxHd>, grid, dim3(kThreads), smem, stream, a, n);
}

}  // namespace

bool attention_dense_supported(const AttentionDenseArgs& a) {
  return a.head_dim > 0 && a.head_dim <= kDenseMaxHeadDim && a.n_head > 0 && a.n_head <= 65535 && a.n_seq > 0 &&
         a.n_seq <= 65535 && a.q.rows % a.n_seq == 0 && (a.q.rows / a.n_seq + kQ - 1) / kQ <= 0x7fffffff;
}

cudaError_t launch_attention_dense(const AttentionDenseArgs& a, cudaStream_t stream) {
  const int64_t n = a.q.rows / a.n_seq;
  if (n == 0) return cudaSuccess;
  if (a.head_dim <= 64) return launch_dense<64>(a, n, stream);
  if (a.head_dim <= 128) return launch_dense<128>(a, n, stream);
  return launch_dense<256>(a, n, stream);
}

}  // namespace brisk::cuda
