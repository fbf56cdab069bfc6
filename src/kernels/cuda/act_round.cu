// Rounds matmul activations through the weight format's activation type (quantize, then
// dequantize to float) with the CPU reference quantizers' exact rules (act_quant.cuh), so
// that CUDA and CPU matmuls see the same inputs; F16 / BF16: round to nearest even.
// launch_quantize_activations keeps the Q8_0 / Q8_K result as int8 quants [rows, n_in] and
// float scales [rows, n_in / block] (fp16(d) for Q8_0, 1 / s for Q8_K) for the dp4a GEMV.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/act_quant.cuh"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/launch.cuh"

namespace brisk::cuda {

namespace {

// One warp per 32-element block (Q8_0) or per 256-element block (Q8_K, 8 elements a lane).
// With qdst: the quants and scales; else the rounded floats to dst.
template <int kBlock>
__global__ void round_q8_kernel(float* dst, int8_t* qdst, float* ddst, const float* x, int64_t x_stride,
                                int64_t n_in) {
  BRISK_PDL_ENTER();
  constexpr int kPer = kBlock / 32;
  const int64_t r = blockIdx.y;
  const int64_t b = int64_t(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
  if (b * kBlock >= n_in) return;
  const int lane = threadIdx.x & 31;
  const float* xb = x + r * x_stride + b * kBlock;
  float v[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k) v[k] = xb[k * 32 + lane];
  if (qdst)
    quant_block_warp<kBlock>(v, qdst + r * n_in + b * kBlock, ddst + r * (n_in / kBlock) + b, nullptr);
  else
    quant_block_warp<kBlock>(v, nullptr, nullptr, dst + r * n_in + b * kBlock);
}

template <bool kBf16>
__global__ void round_half_kernel(float* dst, const float* x, int64_t x_stride, int64_t n_in) {
  BRISK_PDL_ENTER();
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
      launch_kernel(round_q8_kernel<32>, dim3(unsigned((blocks + 3) / 4), unsigned(x.rows)), 128, 0, s, dst, nullptr, nullptr, x.data, xs, x.cols);
      break;
    }
    case ActRound::q8_k: {
      const int64_t blocks = x.cols / 256;
      launch_kernel(round_q8_kernel<256>, dim3(unsigned((blocks + 3) / 4), unsigned(x.rows)), 128, 0, s, dst, nullptr, nullptr, x.data, xs, x.cols);
      break;
    }
    case ActRound::f16:
      launch_kernel(round_half_kernel<false>, dim3(unsigned((x.cols + 255) / 256), unsigned(x.rows)), 256, 0, s, dst, x.data, xs, x.cols);
      break;
    case ActRound::bf16:
      launch_kernel(round_half_kernel<true>, dim3(unsigned((x.cols + 255) / 256), unsigned(x.rows)), 256, 0, s, dst, x.data, xs, x.cols);
      break;
    default:
      break;
  }
  return cudaGetLastError();
}

cudaError_t launch_quantize_activations(ActRound kind, const QuantAct& dst, const Mat& x, cudaStream_t s) {
  if (x.rows == 0) return cudaSuccess;
  const int64_t xs = x.row_stride();
  auto* q = const_cast<int8_t*>(dst.q);
  auto* d = const_cast<float*>(dst.d);
  if (kind == ActRound::q8_0) {
    const int64_t blocks = x.cols / 32;
    launch_kernel(round_q8_kernel<32>, dim3(unsigned((blocks + 3) / 4), unsigned(x.rows)), 128, 0, s, nullptr, q, d, x.data, xs, x.cols);
  } else if (kind == ActRound::q8_k) {
    const int64_t blocks = x.cols / 256;
    launch_kernel(round_q8_kernel<256>, dim3(unsigned((blocks + 3) / 4), unsigned(x.rows)), 128, 0, s, nullptr, q, d, x.data, xs, x.cols);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace brisk::cuda
