// RMS norm (per row or per head group; over whole rows optionally fused with the quantization
// of its output for the next matmul) and rotary embedding (normal / NeoX pairing, partial
// rotation of the first n_rot dims of each head).
#include "kernels/cuda/act_quant.cuh"
#include "kernels/cuda/kernels.h"

namespace brisk::cuda {

namespace {

constexpr int kNormThreads = 256;

// One block per (row, group): out = x / sqrt(mean(x^2) + eps) * weight. With kQuantBlock > 0
// (whole-row groups only) the block then quantizes its output row for the next matmul, one
// warp per activation block (act_quant.cuh).
template <int kQuantBlock>
__global__ void rms_norm_kernel(float* out, int64_t out_stride, const float* x, int64_t x_stride,
                                const float* weight, int64_t group, int64_t n_groups, float eps, int8_t* q,
                                float* qd) {
  const int64_t r = blockIdx.x / n_groups, g = blockIdx.x % n_groups;
  const float* xr = x + r * x_stride + g * group;
  float* orow = out + r * out_stride + g * group;
  // Double accumulation and uncontracted float products, as the CPU backend computes them.
  double ss = 0.0;
  for (int64_t i = threadIdx.x; i < group; i += blockDim.x) ss += double(xr[i]) * double(xr[i]);
  __shared__ double part[kNormThreads / 32];
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = ss;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < kNormThreads / 32; ++w) total += part[w];
  const float inv = float(1.0 / sqrt(total / double(group) + double(eps)));
  for (int64_t i = threadIdx.x; i < group; i += blockDim.x) {
    const float y = __fmul_rn(xr[i], inv);
    orow[i] = weight ? __fmul_rn(y, weight[i]) : y;
  }
  if constexpr (kQuantBlock > 0) {
    __syncthreads();  // the row is written (global writes of the block are visible after it)
    constexpr int kPer = kQuantBlock / 32;
    const int lane = threadIdx.x & 31;
    for (int64_t b = threadIdx.x >> 5; b * kQuantBlock < group; b += kNormThreads / 32) {
      float v[kPer];
#pragma unroll
      for (int k = 0; k < kPer; ++k) v[k] = orow[b * kQuantBlock + k * 32 + lane];
      quant_block_warp<kQuantBlock>(v, q + r * group + b * kQuantBlock, qd + r * (group / kQuantBlock) + b, nullptr);
    }
  }
}

// One thread per (token, head, rotated pair).
__global__ void rope_kernel(float* x, int64_t stride, int64_t n_tok, int n_head, int head_dim, int n_rot,
                            const int32_t* pos, const float* inv_freq, float attn_factor, bool neox) {
  const int half = n_rot / 2;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n_tok * n_head * half) return;
  const int i = int(idx % half);
  const int64_t h = (idx / half) % n_head, t = idx / (int64_t(half) * n_head);
  float* v = x + t * stride + h * head_dim;
  const int d0 = neox ? i : 2 * i, d1 = neox ? i + half : 2 * i + 1;
  const double theta = double(pos[t]) * double(inv_freq[i]);
  double sd, cd;
  sincos(theta, &sd, &cd);
  const float c = __fmul_rn(float(cd), attn_factor), s = __fmul_rn(float(sd), attn_factor);
  const float a = v[d0], b = v[d1];
  v[d0] = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
  v[d1] = __fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c));
}

}  // namespace

cudaError_t launch_rms_norm(const RmsNormArgs& a, cudaStream_t s) {
  const int64_t group = a.group > 0 ? a.group : a.x.cols;
  const int64_t n_groups = a.x.cols / group;
  const int64_t blocks = a.x.rows * n_groups;
  if (blocks == 0) return cudaSuccess;
  rms_norm_kernel<0><<<unsigned(blocks), kNormThreads, 0, s>>>(a.out.data, a.out.row_stride(), a.x.data,
                                                               a.x.row_stride(), a.weight, group, n_groups, a.eps,
                                                               nullptr, nullptr);
  return cudaGetLastError();
}

cudaError_t launch_rms_norm_quant(const RmsNormArgs& a, ActRound kind, const QuantAct& q, cudaStream_t s) {
  const int64_t cols = a.x.cols;
  if ((a.group > 0 && a.group != cols) || a.x.rows == 0) return a.x.rows == 0 ? cudaSuccess : cudaErrorInvalidValue;
  auto* qq = const_cast<int8_t*>(q.q);
  auto* dd = const_cast<float*>(q.d);
  if (kind == ActRound::q8_0 && cols % 32 == 0)
    rms_norm_kernel<32><<<unsigned(a.x.rows), kNormThreads, 0, s>>>(a.out.data, a.out.row_stride(), a.x.data,
                                                                    a.x.row_stride(), a.weight, cols, 1, a.eps, qq, dd);
  else if (kind == ActRound::q8_k && cols % 256 == 0)
    rms_norm_kernel<256><<<unsigned(a.x.rows), kNormThreads, 0, s>>>(a.out.data, a.out.row_stride(), a.x.data,
                                                                     a.x.row_stride(), a.weight, cols, 1, a.eps, qq, dd);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t launch_rope(const RopeArgs& a, const float* inv_freq, cudaStream_t s) {
  const int half = a.table->n_rot / 2;
  const int64_t n = a.x.rows * a.n_head * half;
  if (n == 0) return cudaSuccess;
  rope_kernel<<<unsigned((n + 255) / 256), 256, 0, s>>>(a.x.data, a.x.row_stride(), a.x.rows, a.n_head, a.head_dim,
                                                        a.table->n_rot, a.pos, inv_freq, a.table->attn_factor,
                                                        a.table->neox);
  return cudaGetLastError();
}

}  // namespace brisk::cuda
