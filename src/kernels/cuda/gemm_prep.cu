// Operand preparation for the tensor-core prefill GEMM (backend/cuda/cuda_blas.h) and the
// device-side greedy pick:
//   - weight_to_bf16: rows [r0, r1) of a weight in the device layout (dequant.cuh) decoded to
//     dense BF16 [r1 - r0, n_in], one thread per 8 elements (one 16-byte store);
//   - act_to_bf16: float activations [rows, cols] (strided) to dense BF16, round to nearest even;
//   - add_bias: out[t, r] += bias[r];
//   - argmax_rows: per row, the first index of the largest value, NaN counting as -inf (the
//     host sampler's greedy rule); -1 when every value is -inf or NaN.
#include <cuda_bf16.h>

#include <cfloat>

#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/gemm_prep.h"
#include "kernels/cuda/launch.cuh"

namespace brisk::cuda {

namespace {

template <DevFormat F>
__global__ void weight_to_bf16_kernel(const uint8_t* w, DevLayout L, int64_t n_in, int64_t r0, uint16_t* dst) {
  BRISK_PDL_ENTER();
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n_in / 8) return;
  const size_t r = size_t(r0) + blockIdx.y;
  float v[8];
  Dev<F>::load8(w + r * L.qs_row, w + L.sc_offset + r * L.sc_row, c, v);
  alignas(16) __nv_bfloat162 o[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) o[k] = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
  *reinterpret_cast<uint4*>(dst + size_t(blockIdx.y) * size_t(n_in) + 8 * size_t(c)) = *reinterpret_cast<const uint4*>(o);
}

template <DevFormat F>
cudaError_t weight_to_bf16_fmt(const Weight& w, int64_t r0, int64_t r1, uint16_t* dst, cudaStream_t s) {
  const int64_t chunks = w.n_in / 8;
  const dim3 grid(unsigned((chunks + 127) / 128), unsigned(r1 - r0));
  launch_kernel(weight_to_bf16_kernel<F>, grid, 128, 0, s, static_cast<const uint8_t*>(w.data),
                dev_layout(F, w.n_in, w.n_out), w.n_in, r0, dst);
  return cudaGetLastError();
}

__global__ void act_to_bf16_kernel(const float* x, int64_t stride, int64_t cols, __nv_bfloat16* dst) {
  BRISK_PDL_ENTER();
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  dst[size_t(blockIdx.y) * size_t(cols) + size_t(c)] = __float2bfloat16_rn(x[size_t(blockIdx.y) * size_t(stride) + size_t(c)]);
}

__global__ void add_bias_kernel(float* out, int64_t stride, int64_t cols, const float* bias) {
  BRISK_PDL_ENTER();
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  out[size_t(blockIdx.y) * size_t(stride) + size_t(c)] += bias[c];
}

// One block per row; each thread keeps its best (value, first index), then a shared-memory
// tree keeps the larger value and, on equal values, the smaller index.
constexpr int kArgmaxThreads = 1024;
__global__ void argmax_kernel(const float* x, int64_t stride, int64_t cols, int32_t* ids) {
  BRISK_PDL_ENTER();
  __shared__ float sv[kArgmaxThreads];
  __shared__ int32_t si[kArgmaxThreads];
  const float* row = x + size_t(blockIdx.x) * size_t(stride);
  float best = -FLT_MAX;
  int32_t best_i = -1;
  bool any = false;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = row[c];
    if (isnan(v) || v == -INFINITY) continue;
    if (!any || v > best) {
      best = v;
      best_i = int32_t(c);
      any = true;
    }
  }
  sv[threadIdx.x] = best;
  si[threadIdx.x] = best_i;
  __syncthreads();
  for (int h = blockDim.x / 2; h > 0; h /= 2) {
    if (int(threadIdx.x) < h) {
      const float ov = sv[threadIdx.x + h];
      const int32_t oi = si[threadIdx.x + h];
      const int32_t mi = si[threadIdx.x];
      if (oi >= 0 && (mi < 0 || ov > sv[threadIdx.x] || (ov == sv[threadIdx.x] && oi < mi))) {
        sv[threadIdx.x] = ov;
        si[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) ids[blockIdx.x] = si[0];
}

}  // namespace

cudaError_t launch_weight_to_bf16(const Weight& w, int64_t r0, int64_t r1, uint16_t* dst, cudaStream_t s) {
  if (r0 < 0 || r1 > w.n_out || r0 >= r1 || w.n_in % 8 != 0 || r1 - r0 > 65535) return cudaErrorInvalidValue;
  switch (w.type) {
    case QuantType::F32: return weight_to_bf16_fmt<DevFormat::f32>(w, r0, r1, dst, s);
    case QuantType::F16: return weight_to_bf16_fmt<DevFormat::f16>(w, r0, r1, dst, s);
    case QuantType::BF16: return weight_to_bf16_fmt<DevFormat::bf16>(w, r0, r1, dst, s);
    case QuantType::Q8_0: return weight_to_bf16_fmt<DevFormat::q8_0>(w, r0, r1, dst, s);
    case QuantType::Q4_0: return weight_to_bf16_fmt<DevFormat::q4_0>(w, r0, r1, dst, s);
    case QuantType::Q5_0: return weight_to_bf16_fmt<DevFormat::q5_0>(w, r0, r1, dst, s);
    case QuantType::Q4_K: return weight_to_bf16_fmt<DevFormat::q4_k>(w, r0, r1, dst, s);
    case QuantType::Q6_K: return weight_to_bf16_fmt<DevFormat::q6_k>(w, r0, r1, dst, s);
    case QuantType::Q5_K: return weight_to_bf16_fmt<DevFormat::q5_k>(w, r0, r1, dst, s);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t launch_act_to_bf16(const Mat& x, uint16_t* dst, cudaStream_t s) {
  if (x.rows == 0) return cudaSuccess;
  if (x.rows > 65535) return cudaErrorInvalidValue;
  const dim3 grid(unsigned((x.cols + 255) / 256), unsigned(x.rows));
  launch_kernel(act_to_bf16_kernel, grid, 256, 0, s, static_cast<const float*>(x.data), x.row_stride(), x.cols,
                reinterpret_cast<__nv_bfloat16*>(dst));
  return cudaGetLastError();
}

cudaError_t launch_add_bias(const Mat& out, const float* bias, cudaStream_t s) {
  if (out.rows == 0) return cudaSuccess;
  if (out.rows > 65535) return cudaErrorInvalidValue;
  const dim3 grid(unsigned((out.cols + 255) / 256), unsigned(out.rows));
  launch_kernel(add_bias_kernel, grid, 256, 0, s, out.data, out.row_stride(), out.cols, bias);
  return cudaGetLastError();
}

cudaError_t launch_argmax_rows(const Mat& x, int32_t* ids, cudaStream_t s) {
  if (x.rows == 0) return cudaSuccess;
  launch_kernel(argmax_kernel, dim3(unsigned(x.rows)), dim3(kArgmaxThreads), 0, s, static_cast<const float*>(x.data),
                x.row_stride(), x.cols, ids);
  return cudaGetLastError();
}

}  // namespace brisk::cuda
