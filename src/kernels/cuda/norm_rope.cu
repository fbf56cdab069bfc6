// RMS norm (per row or per head group) and rotary embedding (normal / NeoX pairing, partial
// rotation of the first n_rot dims of each head).
#include "kernels/cuda/kernels.h"

namespace brisk::cuda {

namespace {

constexpr int kNormThreads = 256;

// One block per (row, group): out = x / sqrt(mean(x^2) + eps) * weight.
__global__ void rms_norm_kernel(float* out, int64_t out_stride, const float* x, int64_t x_stride,
                                const float* weight, int64_t group, int64_t n_groups, float eps) {
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
  rms_norm_kernel<<<unsigned(blocks), kNormThreads, 0, s>>>(a.out.data, a.out.row_stride(), a.x.data,
                                                            a.x.row_stride(), a.weight, group, n_groups, a.eps);
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
