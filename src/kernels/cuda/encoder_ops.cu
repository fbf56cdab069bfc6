// Encoder ops (speech and embedding encoders), F32 in and out, any row width:
//   encoder_norm_kernel       LayerNorm, one block per row: the mean, then the centred (biased)
//                             variance, each a block-wide sum; out = (x - mean) * rstd * weight
//                             + bias; optionally of a residual add (+ the matmul's bias) and
//                             with a BF16 copy of out for the next matmul (the GEMM epilogues)
//   bias_act_kernel           GELU (erf or tanh form) or tanh, one thread per element; optionally
//                             after a matmul's bias and with a BF16 copy of out
//   im2col_kernel             one thread per output element of the unfolded 1-D conv input
//   mean_rows_kernel          a thread per (packed sequence, column): its rows' mean (pooling)
//   attention_weights_kernel  one block per token: scores of one query head against the paged
//                             K cache rows [0, pos], softmax, zeros up to out.cols
// The CPU's references (kernels/cpu/encoder_ops.cpp) sum in double; these sum in float in
// other orders, so results agree to float roundings of the sums.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/flags.h"
#include "kernels/cuda/encoder_act.cuh"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/kv_elem.cuh"
#include "kernels/cuda/kv_paged.cuh"
#include "kernels/cuda/launch.cuh"

namespace brisk::cuda {

namespace {

constexpr int kRowThreads = 256;

__device__ __forceinline__ int64_t stride_of(const Mat& m) { return m.stride ? m.stride : m.cols; }

// Sum of v over the block (kRowThreads threads); every thread gets it. `red` holds 32 floats.
__device__ float block_sum(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();  // red is free (an earlier call's readers are done)
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < int(blockDim.x >> 5) ? red[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ float block_max(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < int(blockDim.x >> 5) ? red[lane] : -INFINITY;
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// out = LN(x) over whole rows; x = a + (b + b_bias) when has_add (a residual add of a matmul's
// output and its bias, fused), written to `sum` when it has data (b + b_bias to b with
// write_b); xb: a BF16 copy of out for the next matmul. The sums and roundings are those of the separate launches (add_bias, add,
// layer_norm, act_to_bf16).
__global__ void __launch_bounds__(kRowThreads) encoder_norm_kernel(EncoderNormArgs a) {
  BRISK_PDL_ENTER();
  __shared__ float red[32];
  const LayerNormArgs& ln = a.ln;
  const int64_t r = blockIdx.x, n = ln.x.cols;
  const float* x = ln.x.data + r * stride_of(ln.x);
  const float* xa = a.has_add ? a.a.data + r * stride_of(a.a) : nullptr;
  float* xb = a.has_add ? a.b.data + r * stride_of(a.b) : nullptr;
  float* sum = a.sum.data ? a.sum.data + r * stride_of(a.sum) : nullptr;
  float* o = ln.out.data + r * stride_of(ln.out);
  // b + bias, written back to b (the matmul's output, as its own bias launch leaves it) when
  // write_b; later passes then read it as it is.
  const bool add_bias_later = a.b_bias && !a.write_b;
  // Element i of the row to norm: x, the stored sum once written, else from the add's inputs.
  auto in = [&](int64_t i) -> float {
    if (!a.has_add) return x[i];
    if (sum) return sum[i];
    const float t = add_bias_later ? xb[i] + a.b_bias[i] : xb[i];
    return xa[i] + t;
  };
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float v;
    if (a.has_add) {
      const float t = a.b_bias ? xb[i] + a.b_bias[i] : xb[i];
      if (a.write_b) xb[i] = t;
      v = xa[i] + t;
      if (sum) sum[i] = v;
    } else {
      v = x[i];
    }
    s += v;
  }
  const float mean = block_sum(s, red) / float(n);
  float v = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float d = in(i) - mean;
    v += d * d;
  }
  const float rstd = rsqrtf(block_sum(v, red) / float(n) + ln.eps);
  // Every read of x is done (block_sum's barriers), so out may alias x; a thread rewrites only
  // the elements it reads.
  __nv_bfloat16* ob = a.xb ? reinterpret_cast<__nv_bfloat16*>(a.xb) + r * n : nullptr;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float y = (in(i) - mean) * rstd;
    if (ln.weight) y *= ln.weight[i];
    if (ln.bias) y += ln.bias[i];
    o[i] = y;
    if (ob) ob[i] = __float2bfloat16_rn(y);
  }
}

// out = act(x + bias) (bias and act optional); xb: a BF16 copy of out for the next matmul.
// Grid (column blocks of kActThreads, row blocks): a thread per (row, column), rows strided by
// gridDim.y (no division per element: the 64-bit index split cost more than the memory).
constexpr int kActThreads = 256;
__global__ void __launch_bounds__(kActThreads) bias_act_kernel(BiasActArgs a) {
  BRISK_PDL_ENTER();
  const int64_t c = int64_t(blockIdx.x) * kActThreads + threadIdx.x;
  if (c >= a.x.cols) return;
  const float bias = a.bias ? a.bias[c] : 0.0f;
  const int64_t xs = stride_of(a.x), os = stride_of(a.out);
  for (int64_t r = blockIdx.y; r < a.x.rows; r += gridDim.y) {
    float y = a.x.data[r * xs + c];
    if (a.bias) y += bias;
    if (a.act) y = unary_apply(a.op, y);
    if (a.write_out) a.out.data[r * os + c] = y;
    if (a.xb) reinterpret_cast<__nv_bfloat16*>(a.xb)[r * a.x.cols + c] = __float2bfloat16_rn(y);
  }
}

// The same per element, four adjacent columns per thread (float4 loads and stores, the BF16 copy
// as two bf16x2): for rows of a multiple of 4 columns, 16-byte aligned (bias_act_vec4_ok). The
// scalar kernel's one element per thread left the erf GELU of a wide MLP bound by issue rather
// than by its traffic.
__global__ void __launch_bounds__(kActThreads) bias_act_vec4_kernel(BiasActArgs a) {
  BRISK_PDL_ENTER();
  const int64_t c = 4 * (int64_t(blockIdx.x) * kActThreads + threadIdx.x);
  if (c >= a.x.cols) return;
  const float4 bias = a.bias ? *reinterpret_cast<const float4*>(a.bias + c) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const int64_t xs = stride_of(a.x), os = stride_of(a.out);
  for (int64_t r = blockIdx.y; r < a.x.rows; r += gridDim.y) {
    float4 y = *reinterpret_cast<const float4*>(a.x.data + r * xs + c);
    if (a.bias) y.x += bias.x, y.y += bias.y, y.z += bias.z, y.w += bias.w;
    if (a.act) {
      y.x = unary_apply(a.op, y.x);
      y.y = unary_apply(a.op, y.y);
      y.z = unary_apply(a.op, y.z);
      y.w = unary_apply(a.op, y.w);
    }
    if (a.write_out) *reinterpret_cast<float4*>(a.out.data + r * os + c) = y;
    if (a.xb) {
      __nv_bfloat162* ob = reinterpret_cast<__nv_bfloat162*>(reinterpret_cast<__nv_bfloat16*>(a.xb) + r * a.x.cols + c);
      ob[0] = __floats2bfloat162_rn(y.x, y.y);
      ob[1] = __floats2bfloat162_rn(y.z, y.w);
    }
  }
}

bool aligned_rows4(const Mat& m) {
  return reinterpret_cast<uintptr_t>(m.data) % 16 == 0 && (m.stride ? m.stride : m.cols) % 4 == 0;
}

// Four columns per thread need whole float4 pieces in x, out, bias and the BF16 rows.
bool bias_act_vec4_ok(const BiasActArgs& a) {
  return a.x.cols % 4 == 0 && aligned_rows4(a.x) && (!a.write_out || aligned_rows4(a.out)) &&
         (!a.bias || reinterpret_cast<uintptr_t>(a.bias) % 16 == 0) &&
         (!a.xb || reinterpret_cast<uintptr_t>(a.xb) % 8 == 0) && !flags().no_cuda_vec4_act;
}

__global__ void im2col_kernel(Im2colArgs a, int64_t frames_out) {
  BRISK_PDL_ENTER();
  const int64_t width = a.x.cols * a.kernel;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= a.out.rows * width) return;
  const int64_t r = i / width, col = i % width;
  const int64_t s = r / frames_out, t = r % frames_out;
  const int64_t c = col / a.kernel, k = col % a.kernel;
  const int64_t f = t * a.stride + k - a.pad;
  a.out.data[r * stride_of(a.out) + col] =
      f >= 0 && f < a.frames_in ? a.x.data[(s * a.frames_in + f) * stride_of(a.x) + c] : 0.0f;
}

// Dynamic shared memory: the query head (head_dim floats).
template <KvT T>
__global__ void __launch_bounds__(kRowThreads) attention_weights_kernel(AttentionWeightsArgs a) {
  BRISK_PDL_ENTER();
  extern __shared__ float qs[];
  __shared__ float red[32];
  const int64_t t = blockIdx.x;
  const int hd = a.head_dim;
  const int group = a.n_head / a.n_head_kv;
  const int64_t col0 = int64_t(a.head / group) * hd;
  const float* q = a.q.data + t * stride_of(a.q) + int64_t(a.head) * hd;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) qs[d] = q[d];
  __syncthreads();
  const int64_t n = int64_t(a.pos[t]) + 1, seq = a.seq[t];
  float* o = a.out.data + t * stride_of(a.out);
  const int sh = kv_block_shift(a.k_cache);
  const uint8_t* base = static_cast<const uint8_t*>(a.k_cache.data);
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const uint8_t* row = base + size_t(kv_slot(a.k_cache, sh, seq, j)) * a.k_cache.row_bytes;
    float s = 0.0f;
    for (int d = 0; d < hd; ++d) s += qs[d] * kv_get<T>(row, col0 + d);
    s *= a.scale;
    o[j] = s;
    mx = fmaxf(mx, s);
  }
  mx = block_max(mx, red);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const float e = expf(o[j] - mx);
    o[j] = e;
    sum += e;
  }
  const float inv = 1.0f / block_sum(sum, red);
  for (int64_t j = threadIdx.x; j < a.out.cols; j += blockDim.x) o[j] = j < n ? o[j] * inv : 0.0f;
}

// out[s, c] = the mean of column c over sequence s's rows: a thread per (sequence, column)
// adds the rows in order in double, as the host's pooling does.
__global__ void mean_rows_kernel(MeanRowsArgs a) {
  BRISK_PDL_ENTER();
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, s = blockIdx.y;
  if (c >= a.x.cols) return;
  const int64_t b = a.seq_start[s], e = a.seq_start[s + 1];
  double acc = 0.0;
  for (int64_t r = b; r < e; ++r) acc += a.x.data[r * stride_of(a.x) + c];
  a.out.data[s * stride_of(a.out) + c] = float(acc / double(e - b));
}

}  // namespace

cudaError_t launch_mean_rows(const MeanRowsArgs& a, cudaStream_t stream) {
  if (a.n_seq == 0 || a.x.cols == 0) return cudaSuccess;
  const dim3 grid(unsigned((a.x.cols + 127) / 128), unsigned(a.n_seq));
  return launch_kernel(mean_rows_kernel, grid, dim3(128), 0, stream, a);
}

cudaError_t launch_layer_norm(const LayerNormArgs& a, cudaStream_t stream) {
  return launch_encoder_norm(EncoderNormArgs{.ln = a}, stream);
}

cudaError_t launch_encoder_norm(const EncoderNormArgs& a, cudaStream_t stream) {
  if (a.ln.x.rows == 0) return cudaSuccess;
  return launch_kernel(encoder_norm_kernel, dim3(unsigned(a.ln.x.rows)), dim3(kRowThreads), 0, stream, a);
}

cudaError_t launch_unary(const UnaryArgs& a, cudaStream_t stream) {
  const int64_t n = a.x.rows * a.x.cols;
  if (n == 0) return cudaSuccess;
  return launch_bias_act(BiasActArgs{.out = a.out, .x = a.x, .op = a.op}, stream);
}

cudaError_t launch_bias_act(const BiasActArgs& a, cudaStream_t stream) {
  if (a.x.rows == 0 || a.x.cols == 0) return cudaSuccess;
  const unsigned row_blocks = unsigned(a.x.rows < 65535 ? a.x.rows : 65535);
  if (bias_act_vec4_ok(a)) {
    const int64_t quads = a.x.cols / 4;
    const dim3 grid(unsigned((quads + kActThreads - 1) / kActThreads), row_blocks);
    return launch_kernel(bias_act_vec4_kernel, grid, dim3(kActThreads), 0, stream, a);
  }
  const dim3 grid(unsigned((a.x.cols + kActThreads - 1) / kActThreads), row_blocks);
  return launch_kernel(bias_act_kernel, grid, dim3(kActThreads), 0, stream, a);
}

cudaError_t launch_im2col(const Im2colArgs& a, int64_t frames_out, cudaStream_t stream) {
  const int64_t n = a.out.rows * a.x.cols * a.kernel;
  if (n == 0) return cudaSuccess;
  return launch_kernel(im2col_kernel, dim3(unsigned((n + 255) / 256)), dim3(256), 0, stream, a, frames_out);
}

cudaError_t launch_attention_weights(const AttentionWeightsArgs& a, cudaStream_t stream) {
  if (a.q.rows == 0) return cudaSuccess;
  const dim3 grid(unsigned(a.q.rows)), block(kRowThreads);
  const size_t smem = sizeof(float) * size_t(a.head_dim);
  switch (a.k_cache.type) {
    case QuantType::F32: return launch_kernel(attention_weights_kernel<KvT::f32>, grid, block, smem, stream, a);
    case QuantType::F16: return launch_kernel(attention_weights_kernel<KvT::f16>, grid, block, smem, stream, a);
    case QuantType::BF16: return launch_kernel(attention_weights_kernel<KvT::bf16>, grid, block, smem, stream, a);
    case QuantType::Q8_0: return launch_kernel(attention_weights_kernel<KvT::q8_0>, grid, block, smem, stream, a);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace brisk::cuda
