// Rounds matmul activations through the weight format's activation type (quantize, then
// dequantize to float) with the CPU reference quantizers' exact rules, so that CUDA and CPU
// matmuls see the same inputs:
//   Q8_0 (blocks of 32): d = amax / 127, q = roundf(x / d) clamped to [-128, 127], x' = fp16(d) q
//   Q8_K (blocks of 256): mx = the element of largest |x| (first), s = -127 / mx,
//                          q = min(127, rint(s x)), x' = (1 / s) q
//   F16 / BF16: round to nearest even.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/kernels.h"

namespace brisk::cuda {

namespace {

// One warp per 32-element block (Q8_0) or per 256-element block (Q8_K, 8 elements a lane).
template <int kBlock>
__global__ void round_q8_kernel(float* dst, const float* x, int64_t x_stride, int64_t n_in) {
  constexpr int kPer = kBlock / 32;
  const int64_t r = blockIdx.y;
  const int64_t b = int64_t(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
  if (b * kBlock >= n_in) return;
  const int lane = threadIdx.x & 31;
  const float* xb = x + r * x_stride + b * kBlock;
  float* ob = dst + r * n_in + b * kBlock;
  float v[kPer];
  float amax = 0.0f;
  int idx = 1 << 30;
  for (int k = 0; k < kPer; ++k) {
    const int j = k * 32 + lane;
    v[k] = xb[j];
    const float ax = fabsf(v[k]);
    if (ax > amax) { amax = ax; idx = j; }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float oa = __shfl_xor_sync(0xffffffffu, amax, o);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (oa > amax || (oa == amax && oi < idx)) { amax = oa; idx = oi; }
  }
  if (kBlock == 32) {
    const float d = amax / 127.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    const float dh = __half2float(__float2half_rn(d));
    for (int k = 0; k < kPer; ++k) {
      float q = roundf(v[k] * id);
      if (q != q) q = 0.0f;
      q = fminf(fmaxf(q, -128.0f), 127.0f);
      ob[k * 32 + lane] = dh * q;
    }
  } else {
    if (amax == 0.0f) {
      for (int k = 0; k < kPer; ++k) ob[k * 32 + lane] = 0.0f;
      return;
    }
    const float mx = xb[idx];
    const float iscale = -127.f / mx;
    const float d = 1.f / iscale;
    for (int k = 0; k < kPer; ++k) {
      const float q = fminf(127.0f, rintf(iscale * v[k]));
      ob[k * 32 + lane] = d * q;
    }
  }
}

template <bool kBf16>
__global__ void round_half_kernel(float* dst, const float* x, int64_t x_stride, int64_t n_in) {
  const int64_t r = blockIdx.y;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_in) return;
  const float v = x[r * x_stride + i];
  dst[r * n_in + i] = kBf16 ? __bfloat162float(__float2bfloat16_rn(v)) : __half2float(__float2half_rn(v));
}

}  // namespace

ActRound act_round_for(QuantType t) {
  switch (t) {
    case QuantType::F16: return ActRound::f16;
    case QuantType::BF16: return ActRound::bf16;
    case QuantType::Q8_0: return ActRound::q8_0;
    case QuantType::Q8_K: return ActRound::q8_k;
    default: return ActRound::none;
  }
}

cudaError_t launch_round_activations(ActRound kind, float* dst, const Mat& x, cudaStream_t s) {
  if (x.rows == 0 || kind == ActRound::none) return cudaSuccess;
  const int64_t xs = x.row_stride();
  switch (kind) {
    case ActRound::q8_0: {
      const int64_t blocks = x.cols / 32;
      round_q8_kernel<32><<<dim3(unsigned((blocks + 3) / 4), unsigned(x.rows)), 128, 0, s>>>(dst, x.data, xs, x.cols);
      break;
    }
    case ActRound::q8_k: {
      const int64_t blocks = x.cols / 256;
      round_q8_kernel<256><<<dim3(unsigned((blocks + 3) / 4), unsigned(x.rows)), 128, 0, s>>>(dst, x.data, xs, x.cols);
      break;
    }
    case ActRound::f16:
      round_half_kernel<false><<<dim3(unsigned((x.cols + 255) / 256), unsigned(x.rows)), 256, 0, s>>>(dst, x.data, xs, x.cols);
      break;
    case ActRound::bf16:
      round_half_kernel<true><<<dim3(unsigned((x.cols + 255) / 256), unsigned(x.rows)), 256, 0, s>>>(dst, x.data, xs, x.cols);
      break;
    default:
      break;
  }
  return cudaGetLastError();
}

}  // namespace brisk::cuda
