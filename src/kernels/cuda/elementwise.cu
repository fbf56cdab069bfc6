// Element-wise ops: gated activation (optionally fused with the quantization of its output for
// the next matmul), add, soft-capping, scaling, row gather, and the KV cache store (F32 / F16).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/act_quant.cuh"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/kv_elem.cuh"
#include "kernels/cuda/kv_paged.cuh"
#include "kernels/cuda/launch.cuh"

namespace brisk::cuda {

namespace {

struct View2 {  // [rows, cols] with a row stride, as Mat
  float* p;
  int64_t s;
};

// act: int(Activation) (silu, gelu_tanh, gelu_erf).
__device__ __forceinline__ float act_fn(float g, int act) {
  // exp in double rounded to float is the correctly rounded expf the CPU's libm gives.
  if (act == int(Activation::silu)) return __fdiv_rn(g, __fadd_rn(1.0f, float(exp(-double(g)))));
  if (act == int(Activation::gelu_erf)) return float(0.5 * double(g) * (1.0 + erf(double(g) * 0.70710678118654752)));
  return 0.5f * g * (1.0f + tanhf(0.7978845608028654f * (g + 0.044715f * g * g * g)));
}

__global__ void gated_act_kernel(View2 out, View2 gate, View2 up, int64_t rows, int64_t cols, int act) {
  BRISK_PDL_ENTER();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const int64_t r = i / cols, c = i % cols;
  out.p[r * out.s + c] = __fmul_rn(act_fn(gate.p[r * gate.s + c], act), up.p[r * up.s + c]);
}

// The gated activation, also written rounded through F16 / BF16 to rnd ([rows, cols] dense).
template <bool kBf16>
__global__ void gated_act_round_kernel(View2 out, View2 gate, View2 up, int64_t rows, int64_t cols, int act,
                                       float* rnd) {
  BRISK_PDL_ENTER();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const int64_t r = i / cols, c = i % cols;
  const float v = __fmul_rn(act_fn(gate.p[r * gate.s + c], act), up.p[r * up.s + c]);
  out.p[r * out.s + c] = v;
  rnd[i] = kBf16 ? __bfloat162float(__float2bfloat16_rn(v)) : __half2float(__float2half_rn(v));
}

__global__ void add_kernel(View2 out, View2 a, View2 b, int64_t rows, int64_t cols) {
  BRISK_PDL_ENTER();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const int64_t r = i / cols, c = i % cols;
  out.p[r * out.s + c] = a.p[r * a.s + c] + b.p[r * b.s + c];
}

__global__ void softcap_kernel(View2 x, int64_t rows, int64_t cols, float cap) {
  BRISK_PDL_ENTER();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const int64_t r = i / cols, c = i % cols;
  float& v = x.p[r * x.s + c];
  v = cap * tanhf(v / cap);
}

// out = x * scale (out may be x); the CPU's single float multiply.
__global__ void scale_kernel(View2 out, View2 x, int64_t rows, int64_t cols, float scale) {
  BRISK_PDL_ENTER();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const int64_t r = i / cols, c = i % cols;
  out.p[r * out.s + c] = __fmul_rn(x.p[r * x.s + c], scale);
}

__global__ void get_rows_kernel(View2 out, View2 x, const int32_t* rows, int64_t n, int64_t cols) {
  BRISK_PDL_ENTER();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * cols) return;
  const int64_t r = i / cols, c = i % cols;
  out.p[r * out.s + c] = x.p[int64_t(rows[r]) * x.s + c];
}

// One thread per (token, column); the token's pool row comes from the block table (kv_paged.cuh).
template <KvT T>
__global__ void kv_store_kernel(View2 k, View2 v, KvView kview, uint8_t* vc, size_t v_row_bytes, int64_t n_tok,
                                const int32_t* seq, const int32_t* pos) {
  BRISK_PDL_ENTER();
  const int64_t width = kview.width;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_tok * width) return;
  const int64_t t = i / width, c = i % width;
  uint8_t* kc = static_cast<uint8_t*>(kview.data);
  const size_t k_row_bytes = kview.row_bytes;
  const size_t slot = size_t(kv_slot(kview, kv_block_shift(kview), seq[t], pos[t]));
  kv_put<T>(kc + slot * k_row_bytes, c, k.p[t * k.s + c]);
  kv_put<T>(vc + slot * v_row_bytes, c, v.p[t * v.s + c]);
}

// Q8_0 caches: one warp per (token, block of 32 columns), K and V (kv_put_q8_0_block).
__global__ void kv_store_q8_0_kernel(View2 k, View2 v, KvView kview, uint8_t* vc, size_t v_row_bytes, int64_t n_tok,
                                     const int32_t* seq, const int32_t* pos) {
  BRISK_PDL_ENTER();
  const int64_t n_b = kview.width / 32;
  const int64_t w = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  if (w >= n_tok * n_b) return;  // whole warps leave together
  const int64_t t = w / n_b, b = w % n_b, c = b * 32 + (threadIdx.x & 31);
  const size_t slot = size_t(kv_slot(kview, kv_block_shift(kview), seq[t], pos[t]));
  kv_put_q8_0_block(static_cast<uint8_t*>(kview.data) + slot * kview.row_bytes + b * 34, k.p[t * k.s + c]);
  kv_put_q8_0_block(vc + slot * v_row_bytes + b * 34, v.p[t * v.s + c]);
}

// One warp per activation block of kBlock elements: out = act(gate) * up as gated_act_kernel,
// then the block quantized for the next matmul (act_quant.cuh).
template <int kBlock>
__global__ void gated_act_quant_kernel(View2 out, View2 gate, View2 up, int64_t cols, int act, int8_t* q, float* d) {
  BRISK_PDL_ENTER();
  constexpr int kPer = kBlock / 32;
  const int64_t r = blockIdx.y;
  const int64_t b = int64_t(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
  if (b * kBlock >= cols) return;
  const int lane = threadIdx.x & 31;
  float v[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const int64_t c = b * kBlock + k * 32 + lane;
    v[k] = __fmul_rn(act_fn(gate.p[r * gate.s + c], act), up.p[r * up.s + c]);
    out.p[r * out.s + c] = v[k];
  }
  quant_block_warp<kBlock>(v, q + r * cols + b * kBlock, d + r * (cols / kBlock) + b, nullptr);
}

// Q8_K (blocks of 256): one block of 256 threads per activation block, one element each (a
// warp per block computes eight activations per lane in a row). The block's largest |x| with
// the lowest index among equals, and every q, are exactly quant_block_warp<256>'s.
__global__ void __launch_bounds__(256) gated_act_quant_k_kernel(View2 out, View2 gate, View2 up, int64_t cols,
                                                                int act, int8_t* q, float* d) {
  BRISK_PDL_ENTER();
  const int64_t r = blockIdx.y, b = blockIdx.x;
  const int tid = threadIdx.x;
  const int64_t c = b * 256 + tid;
  const float v = __fmul_rn(act_fn(gate.p[r * gate.s + c], act), up.p[r * up.s + c]);
  out.p[r * out.s + c] = v;
  quant_q8k_block256(v, q + r * cols + b * 256, d + r * (cols / 256) + b);
}

View2 view(const Mat& m) { return View2{m.data, m.row_stride()}; }
unsigned blocks_for(int64_t n) { return unsigned((n + 255) / 256); }

}  // namespace

cudaError_t launch_gated_act(const GatedActArgs& a, cudaStream_t s) {
  const int64_t n = a.gate.rows * a.gate.cols;
  if (n == 0) return cudaSuccess;
  launch_kernel(gated_act_kernel, blocks_for(n), 256, 0, s, view(a.out), view(a.gate), view(a.up), a.gate.rows, a.gate.cols,
                                                 int(a.act));
  return cudaGetLastError();
}

cudaError_t launch_gated_act_quant(const GatedActArgs& a, ActRound kind, const QuantAct& q, cudaStream_t s) {
  const int64_t cols = a.gate.cols;
  if (a.gate.rows == 0) return cudaSuccess;
  auto* qq = const_cast<int8_t*>(q.q);
  auto* dd = const_cast<float*>(q.d);
  const int act = int(a.act);
  if (kind == ActRound::f16 || kind == ActRound::bf16) {
    const int64_t n = a.gate.rows * cols;
    launch_kernel(kind == ActRound::bf16 ? gated_act_round_kernel<true> : gated_act_round_kernel<false>, blocks_for(n),
                  256, 0, s, view(a.out), view(a.gate), view(a.up), a.gate.rows, cols, act, dd);
  } else if (kind == ActRound::q8_0 && cols % 32 == 0) {
    launch_kernel(gated_act_quant_kernel<32>, dim3(unsigned((cols / 32 + 3) / 4), unsigned(a.gate.rows)), 128, 0, s, 
        view(a.out), view(a.gate), view(a.up), cols, act, qq, dd);
  } else if (kind == ActRound::q8_k && cols % 256 == 0) {
    launch_kernel(gated_act_quant_k_kernel, dim3(unsigned(cols / 256), unsigned(a.gate.rows)), 256, 0, s, view(a.out),
                  view(a.gate), view(a.up), cols, act, qq, dd);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t launch_add(const AddArgs& a, cudaStream_t s) {
  const int64_t n = a.a.rows * a.a.cols;
  if (n == 0) return cudaSuccess;
  launch_kernel(add_kernel, blocks_for(n), 256, 0, s, view(a.out), view(a.a), view(a.b), a.a.rows, a.a.cols);
  return cudaGetLastError();
}

cudaError_t launch_softcap(const SoftcapArgs& a, cudaStream_t s) {
  const int64_t n = a.x.rows * a.x.cols;
  if (n == 0) return cudaSuccess;
  launch_kernel(softcap_kernel, blocks_for(n), 256, 0, s, view(a.x), a.x.rows, a.x.cols, a.cap);
  return cudaGetLastError();
}

cudaError_t launch_scale(const ScaleArgs& a, cudaStream_t s) {
  const int64_t n = a.x.rows * a.x.cols;
  if (n == 0) return cudaSuccess;
  launch_kernel(scale_kernel, blocks_for(n), 256, 0, s, view(a.out), view(a.x), a.x.rows, a.x.cols, a.scale);
  return cudaGetLastError();
}

cudaError_t launch_get_rows(const GetRowsArgs& a, cudaStream_t s) {
  const int64_t n = a.out.rows * a.x.cols;
  if (n == 0) return cudaSuccess;
  launch_kernel(get_rows_kernel, blocks_for(n), 256, 0, s, view(a.out), view(a.x), a.rows, a.out.rows, a.x.cols);
  return cudaGetLastError();
}

cudaError_t launch_kv_store(const KvStoreArgs& a, cudaStream_t s) {
  const int64_t n = a.k.rows * a.k_cache.width;
  if (n == 0) return cudaSuccess;
  auto* vc = static_cast<uint8_t*>(a.v_cache.data);
  if (a.k_cache.type == QuantType::Q8_0) {
    if (a.k_cache.width % 32 != 0) return cudaErrorInvalidValue;
    launch_kernel(kv_store_q8_0_kernel, blocks_for(n), 256, 0, s, view(a.k), view(a.v), a.k_cache, vc,
                  a.v_cache.row_bytes, a.k.rows, a.seq, a.pos);
    return cudaGetLastError();
  }
  auto kernel = a.k_cache.type == QuantType::F16    ? kv_store_kernel<KvT::f16>
                : a.k_cache.type == QuantType::BF16 ? kv_store_kernel<KvT::bf16>
                                                    : kv_store_kernel<KvT::f32>;
  launch_kernel(kernel, blocks_for(n), 256, 0, s, view(a.k), view(a.v), a.k_cache, vc, a.v_cache.row_bytes, a.k.rows,
                a.seq, a.pos);
  return cudaGetLastError();
}

}  // namespace brisk::cuda
