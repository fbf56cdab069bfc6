// Matmul for decode-sized batches: out[t, r] = dot(W[r, :], x[t, :]) + bias[r].
// One warp per weight row; lanes walk the row in groups of 8 elements (Fmt<F>::load8), four
// groups per lane in flight, so a weight row is read once, coalesced, for up to kMaxTok
// tokens accumulated in registers.
// Larger batches run as several launches of kMaxTok tokens (weights re-read per launch).
#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/kernels.h"

namespace brisk::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kMaxTok = 8;
constexpr int kUnroll = 4;

template <DevFormat F, int NT>
__global__ void gemv_kernel(float* out, int64_t out_stride, const float* x, int64_t x_stride,
                            const uint8_t* w, size_t row_bytes, int64_t n_in, int64_t n_out,
                            const float* bias) {
  const int lane = threadIdx.x & 31;
  const int64_t r = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (r >= n_out) return;
  const uint8_t* row = w + size_t(r) * row_bytes;
  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
  const int64_t n_chunks = n_in / 8;
  // Four groups in flight per lane (all loads issued before the math) keep enough bytes
  // moving per SM to approach the memory bandwidth; the tail goes one group at a time.
  int64_t c = lane;
  for (; c + 32 * (kUnroll - 1) < n_chunks; c += 32 * kUnroll) {
    float wv[kUnroll][8];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) Fmt<F>::load8(row, c + 32 * u, wv[u]);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const float* xp = x + t * x_stride + 8 * (c + 32 * u);
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < 8; ++k) s = fmaf(wv[u][k], xp[k], s);
        acc[t] += s;
      }
    }
  }
  for (; c < n_chunks; c += 32) {
    float wv[8];
    Fmt<F>::load8(row, c, wv);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const float* xp = x + t * x_stride + 8 * c;
      float s = 0.0f;
#pragma unroll
      for (int k = 0; k < 8; ++k) s = fmaf(wv[k], xp[k], s);
      acc[t] += s;
    }
  }
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    float v = acc[t];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    acc[t] = v;
  }
  if (lane == 0) {
    const float b = bias ? bias[r] : 0.0f;
#pragma unroll
    for (int t = 0; t < NT; ++t) out[t * out_stride + r] = acc[t] + b;
  }
}

template <DevFormat F>
void launch_gemv(const MatmulArgs& a, int64_t t0, int nt, cudaStream_t s) {
  const dim3 grid(unsigned((a.w.n_out + kWarps - 1) / kWarps)), block(32 * kWarps);
  float* out = a.out.row(t0);
  const float* x = a.x.row(t0);
  const int64_t os = a.out.row_stride(), xs = a.x.row_stride();
  const auto* w = static_cast<const uint8_t*>(a.w.data);
#define BRISK_GEMV_CASE(N) \
  case N: gemv_kernel<F, N><<<grid, block, 0, s>>>(out, os, x, xs, w, a.w.row_bytes, a.w.n_in, a.w.n_out, a.bias); break;
  switch (nt) {
    BRISK_GEMV_CASE(1) BRISK_GEMV_CASE(2) BRISK_GEMV_CASE(3) BRISK_GEMV_CASE(4)
    BRISK_GEMV_CASE(5) BRISK_GEMV_CASE(6) BRISK_GEMV_CASE(7) BRISK_GEMV_CASE(8)
    default: break;
  }
#undef BRISK_GEMV_CASE
}

template <DevFormat F>
cudaError_t matmul_fmt(const MatmulArgs& a, cudaStream_t s) {
  for (int64_t t0 = 0; t0 < a.x.rows; t0 += kMaxTok) {
    const int nt = int(a.x.rows - t0 < kMaxTok ? a.x.rows - t0 : kMaxTok);
    launch_gemv<F>(a, t0, nt, s);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

// Embedding: out[t, :] = table[ids[t], :] * scale; one thread per group of 8 elements.
template <DevFormat F>
__global__ void embedding_kernel(float* out, int64_t out_stride, const uint8_t* table, size_t row_bytes,
                                 int64_t n_in, const int32_t* ids, float scale) {
  const int64_t t = blockIdx.y;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n_in / 8) return;
  float v[8];
  Fmt<F>::load8(table + size_t(ids[t]) * row_bytes, c, v);
  float* o = out + t * out_stride + 8 * c;
#pragma unroll
  for (int k = 0; k < 8; ++k) o[k] = v[k] * scale;
}

template <DevFormat F>
cudaError_t embedding_fmt(const EmbeddingArgs& a, cudaStream_t s) {
  if (a.out.rows == 0) return cudaSuccess;
  const int64_t chunks = a.table.n_in / 8;
  const dim3 grid(unsigned((chunks + 127) / 128), unsigned(a.out.rows));
  embedding_kernel<F><<<grid, 128, 0, s>>>(a.out.data, a.out.row_stride(), static_cast<const uint8_t*>(a.table.data),
                                           a.table.row_bytes, a.table.n_in, a.ids, a.scale);
  return cudaGetLastError();
}

}  // namespace

bool weight_format_on_device(QuantType t) {
  switch (t) {
    case QuantType::F32: case QuantType::F16: case QuantType::BF16: case QuantType::Q8_0:
    case QuantType::Q4_0: case QuantType::Q4_K: case QuantType::Q6_K:
      return true;
    default:
      return false;
  }
}

#define BRISK_FMT_DISPATCH(fn, a, s)                                   \
  switch ((a).TYPE_FIELD.type) {                                       \
    case QuantType::F32: return fn<DevFormat::f32>(a, s);             \
    case QuantType::F16: return fn<DevFormat::f16>(a, s);             \
    case QuantType::BF16: return fn<DevFormat::bf16>(a, s);           \
    case QuantType::Q8_0: return fn<DevFormat::q8_0>(a, s);           \
    case QuantType::Q4_0: return fn<DevFormat::q4_0>(a, s);           \
    case QuantType::Q4_K: return fn<DevFormat::q4_k>(a, s);           \
    case QuantType::Q6_K: return fn<DevFormat::q6_k>(a, s);           \
    default: return cudaErrorInvalidValue;                             \
  }

cudaError_t launch_matmul(const MatmulArgs& a, cudaStream_t s) {
#define TYPE_FIELD w
  BRISK_FMT_DISPATCH(matmul_fmt, a, s)
#undef TYPE_FIELD
}

cudaError_t launch_embedding(const EmbeddingArgs& a, cudaStream_t s) {
#define TYPE_FIELD table
  BRISK_FMT_DISPATCH(embedding_fmt, a, s)
#undef TYPE_FIELD
}

}  // namespace brisk::cuda
