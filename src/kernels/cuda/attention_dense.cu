// Bidirectional attention over dense F32 q / k / v rows (encoders, AttentionDenseArgs), FP32
// throughout, head_dim <= 256. Grid (ceil(max_len / 32), n_head, n_seq), 128 threads: a block
// takes 32 query rows of one head of one sequence (rows / n_seq positions each, or the packed
// sequence [seq_start[s], seq_start[s + 1]) read from device memory; blocks past a shorter
// sequence's end return at once) and streams that sequence's K / V rows of the head's KV head
// through shared memory in tiles of 32 positions: all of them, or with a local window only the
// tiles that meet the 32 rows' windows, scores outside a row's window masked to -inf (a tile
// where a row sees nothing leaves its running max, sum and output unchanged).
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
__global__ void __launch_bounds__(kThreads) attention_dense_kernel(AttentionDenseArgs a, int64_t n_fixed) {
  BRISK_PDL_ENTER();
  extern __shared__ float sm[];
  const int hd = a.head_dim, ld = hd + 1;
  float* qs = sm;             // [kQ][ld] scaled queries
  float* ks = qs + kQ * ld;   // [kJ][ld]
  float* vs = ks + kJ * ld;   // [kJ][hd]
  float* ps = vs + kJ * hd;   // [kQ][kJ + 1] probabilities of the tile
  const int h = blockIdx.y;
  // The sequence's first row and length.
  const int64_t row0 = a.seq_start ? int64_t(a.seq_start[blockIdx.z]) : int64_t(blockIdx.z) * n_fixed;
  const int64_t n = a.seq_start ? int64_t(a.seq_start[blockIdx.z + 1]) - row0 : n_fixed;
  const int64_t kv_col = int64_t(h / (a.n_head / a.n_head_kv)) * hd;
  const int64_t i0 = int64_t(blockIdx.x) * kQ;
  if (i0 >= n) return;  // the whole block: past a shorter sequence's end
  const int r = threadIdx.x >> 2, sub = threadIdx.x & 3;
  // This thread's row sees keys [lo, hi); the block visits [j_lo, j_hi). Rows past the end keep
  // the whole span (their scores stay finite; nothing is written for them).
  const int64_t w = a.window, last = i0 + kQ - 1 < n ? i0 + kQ - 1 : n - 1;
  const bool row_in = i0 + r < n;
  const int64_t lo = w > 0 && row_in && i0 + r - w > 0 ? i0 + r - w : 0;
  const int64_t hi = w > 0 && row_in && i0 + r + w + 1 < n ? i0 + r + w + 1 : n;
  const int64_t j_lo = w > 0 && i0 - w > 0 ? i0 - w : 0;
  const int64_t j_hi = w > 0 && last + w + 1 < n ? last + w + 1 : n;
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

  for (int64_t j0 = j_lo; j0 < j_hi; j0 += kJ) {
    __syncthreads();  // the previous tile's readers are done (the first time: qs is written)
    for (int e = threadIdx.x; e < kJ * hd; e += kThreads) {
      const int jj = e / hd, d = e % hd;
      const bool in = j0 + jj < j_hi;
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
      const int64_t j = j0 + sub + 4 * k;
      if (j < lo || j >= hi) sc[k] = -INFINITY;
      tmax = fmaxf(tmax, sc[k]);
    }
    tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
    tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 2));
    // -inf while the row's window has not begun: nothing added, nothing rescaled.
    const float m_new = fmaxf(m, tmax);
    const bool none = m_new == -INFINITY;
    const float corr = none ? 1.0f : expf(m - m_new);  // 0 on the row's first tile
    float psum = 0.0f;
#pragma unroll
    for (int k = 0; k < kJ / 4; ++k) {
      const float p = none ? 0.0f : expf(sc[k] - m_new);
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
cudaError_t launch_dense(const AttentionDenseArgs& a, int64_t n, int64_t max_len, cudaStream_t stream) {
  const int hd = a.head_dim;
  const size_t smem = sizeof(float) * size_t(kQ * (hd + 1) + kJ * (hd + 1) + kJ * hd + kQ * (kJ + 1));
  if (smem > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(attention_dense_kernel<kMaxHd>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (e != cudaSuccess) return e;
  }
  const dim3 grid(unsigned((max_len + kQ - 1) / kQ), unsigned(a.n_head), unsigned(a.n_seq));
  return launch_kernel(attention_dense_kernel<kMaxHd>, grid, dim3(kThreads), smem, stream, a, n);
}

}  // namespace

bool attention_dense_supported(const AttentionDenseArgs& a) {
  return a.head_dim > 0 && a.head_dim <= kDenseMaxHeadDim && a.n_head > 0 && a.n_head <= 65535 && a.n_seq > 0 &&
         a.n_seq <= 65535 && (a.seq_start || a.q.rows % a.n_seq == 0) && (a.q.rows + kQ - 1) / kQ <= 0x7fffffff;
}

cudaError_t launch_attention_dense(const AttentionDenseArgs& a, int64_t max_len, cudaStream_t stream) {
  const int64_t n = a.seq_start ? 0 : a.q.rows / a.n_seq;  // rows of every sequence, without seq_start
  if (a.q_bias || a.k_bias || a.v_bias) return cudaErrorInvalidValue;  // the tensor-core kernel's
  if (max_len == 0) return cudaSuccess;
  if (a.head_dim <= 64) return launch_dense<64>(a, n, max_len, stream);
  if (a.head_dim <= 128) return launch_dense<128>(a, n, max_len, stream);
  return launch_dense<256>(a, n, max_len, stream);
}

}  // namespace brisk::cuda
