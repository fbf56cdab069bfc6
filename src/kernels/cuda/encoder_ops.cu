// Encoder ops (speech and embedding encoders), F32 in and out, any row width:
//   encoder_norm_kernel       LayerNorm, one block per row: the mean, then the centred (biased)
//                             variance, each a block-wide sum; out = (x - mean) * rstd * weight
//                             + bias; optionally of a residual add (+ the matmul's bias) and
//                             with a BF16 copy of out for the next matmul (the GEMM epilogues)
//   encoder_norm_regs_kernel  the same with the row in registers: each thread loads its float4
//                             pieces once (T threads, K pieces each: rows of up to 4 T K
//                             columns, a multiple of 4), so the residual add's inputs are read
//                             once and the mean, variance and output come from registers
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

__device__ __forceinline__ float4 ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ void st4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
__device__ __forceinline__ float4 add4(float4 a, float4 b) { return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }

// encoder_norm_kernel's LayerNorm with the row in registers: thread t holds float4 pieces
// t, t + T, ... (K of them; coalesced loads). The values are the same as the three-pass kernel's
// (a + (b + b_bias), elementwise); the mean and variance sum them in another order.
template <int T, int K>
__global__ void __launch_bounds__(T) encoder_norm_regs_kernel(EncoderNormArgs a) {
  BRISK_PDL_ENTER();
  __shared__ float red[32];
  const LayerNormArgs& ln = a.ln;
  const int64_t r = blockIdx.x;
  const int n = int(ln.x.cols), nq = n / 4;
  const float* x = ln.x.data + r * stride_of(ln.x);
  const float* xa = a.has_add ? a.a.data + r * stride_of(a.a) : nullptr;
  float* xb = a.has_add ? a.b.data + r * stride_of(a.b) : nullptr;
  float* sum = a.sum.data ? a.sum.data + r * stride_of(a.sum) : nullptr;
  float* o = ln.out.data + r * stride_of(ln.out);
  float4 v[K];
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int q = threadIdx.x + k * T;
    v[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (q >= nq) continue;
    if (a.has_add) {
      float4 t = ld4(xb + 4 * q);
      if (a.b_bias) t = add4(t, ld4(a.b_bias + 4 * q));
      if (a.write_b) st4(xb + 4 * q, t);
      v[k] = add4(ld4(xa + 4 * q), t);
      if (sum) st4(sum + 4 * q, v[k]);
    } else {
      v[k] = ld4(x + 4 * q);
    }
    s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
  }
  const float mean = block_sum(s, red) / float(n);
  float var = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (int(threadIdx.x) + k * T >= nq) continue;
    const float dx = v[k].x - mean, dy = v[k].y - mean, dz = v[k].z - mean, dw = v[k].w - mean;
    var += (dx * dx + dy * dy) + (dz * dz + dw * dw);
  }
  const float rstd = rsqrtf(block_sum(var, red) / float(n) + ln.eps);
  // Every read of the row is done (block_sum's barriers): out may alias x.
  __nv_bfloat16* ob = a.xb ? reinterpret_cast<__nv_bfloat16*>(a.xb) + r * n : nullptr;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int q = threadIdx.x + k * T;
    if (q >= nq) continue;
    float4 y = make_float4((v[k].x - mean) * rstd, (v[k].y - mean) * rstd, (v[k].z - mean) * rstd, (v[k].w - mean) * rstd);
    if (ln.weight) {
      const float4 w = ld4(ln.weight + 4 * q);
      y = make_float4(y.x * w.x, y.y * w.y, y.z * w.z, y.w * w.w);
    }
    if (ln.bias) y = add4(y, ld4(ln.bias + 4 * q));
    st4(o + 4 * q, y);
    if (ob) {
      __nv_bfloat162* ob2 = reinterpret_cast<__nv_bfloat162*>(ob + 4 * q);
      ob2[0] = __floats2bfloat162_rn(y.x, y.y);
      ob2[1] = __floats2bfloat162_rn(y.z, y.w);
    }
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
// R rows per thread (row group blockIdx.y, strided by gridDim.y groups): their loads are issued
// together, so more of the launch's reads are in flight.
template <int R>
__global__ void __launch_bounds__(kActThreads) bias_act_vec4_kernel(BiasActArgs a) {
  BRISK_PDL_ENTER();
  const int64_t c = 4 * (int64_t(blockIdx.x) * kActThreads + threadIdx.x);
  if (c >= a.x.cols) return;
  const float4 bias = a.bias ? *reinterpret_cast<const float4*>(a.bias + c) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const int64_t xs = stride_of(a.x), os = stride_of(a.out);
  for (int64_t r0 = int64_t(blockIdx.y) * R; r0 < a.x.rows; r0 += int64_t(gridDim.y) * R) {
    float4 in[R];
#pragma unroll
    for (int u = 0; u < R; ++u)
      if (r0 + u < a.x.rows) in[u] = *reinterpret_cast<const float4*>(a.x.data + (r0 + u) * xs + c);
#pragma unroll
    for (int u = 0; u < R; ++u) {
      const int64_t r = r0 + u;
      if (r >= a.x.rows) break;
      float4 y = in[u];
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

// The row in registers: up to 8192 columns in whole float4 pieces, every row and vector 16-byte
// aligned (the BF16 copy's rows 8-byte aligned).
bool encoder_norm_regs_ok(const EncoderNormArgs& a) {
  const int64_t n = a.ln.x.cols;
  auto vec_ok = [](const float* p) { return !p || reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool rows_ok = a.has_add ? aligned_rows4(a.a) && aligned_rows4(a.b) : aligned_rows4(a.ln.x);
  return n % 4 == 0 && n <= 8192 && rows_ok && aligned_rows4(a.ln.out) && (!a.sum.data || aligned_rows4(a.sum)) &&
         vec_ok(a.ln.weight) && vec_ok(a.ln.bias) && vec_ok(a.b_bias) &&
         (!a.xb || reinterpret_cast<uintptr_t>(a.xb) % 8 == 0) && !flags().no_cuda_encoder_norm_regs;
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
  const dim3 grid(unsigned(a.ln.x.rows));
  if (encoder_norm_regs_ok(a)) {
    const int64_t n = a.ln.x.cols;
    if (n <= 512) return launch_kernel(encoder_norm_regs_kernel<128, 1>, grid, dim3(128), 0, stream, a);
    if (n <= 1024) return launch_kernel(encoder_norm_regs_kernel<256, 1>, grid, dim3(256), 0, stream, a);
    if (n <= 2048) return launch_kernel(encoder_norm_regs_kernel<256, 2>, grid, dim3(256), 0, stream, a);
    if (n <= 4096) return launch_kernel(encoder_norm_regs_kernel<256, 4>, grid, dim3(256), 0, stream, a);
    return launch_kernel(encoder_norm_regs_kernel<256, 8>, grid, dim3(256), 0, stream, a);
  }
  return launch_kernel(encoder_norm_kernel, grid, dim3(kRowThreads), 0, stream, a);
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
    const unsigned col_blocks = unsigned((quads + kActThreads - 1) / kActThreads);
    if (flags().no_cuda_act_rows4)
      return launch_kernel(bias_act_vec4_kernel<1>, dim3(col_blocks, row_blocks), dim3(kActThreads), 0, stream, a);
    const int64_t groups = (a.x.rows + 3) / 4;
    const dim3 grid(col_blocks, unsigned(groups < 65535 ? groups : 65535));
    return launch_kernel(bias_act_vec4_kernel<4>, grid, dim3(kActThreads), 0, stream, a);
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
