// Prefill attention on the tensor cores (flash attention, mma.sync m16n8k16, F16 or BF16
// operands as the cache stores them, FP32 accumulation) for a batch of one sequence at
// consecutive positions over an F16 or BF16 KV cache,
// head_dim 64 or 128. Grid (ceil(n_tok / 64), n_head); 4 warps per block, each owning 16 query
// rows of one head. Per tile of kTileJ cache positions (K and V rows of the head's KV head in
// shared memory): S = (scale * q) . K^T in registers, softcap, the causal / sliding-window mask
// from each row's position (device memory), online softmax (accurate expf, as the decode
// kernel), then O += P . V with P rounded to the cache's type. q rounds to it too (after the
// scale), so results differ from the FP32 kernel (attention.cu) by ~1e-3 relative for F16
// and ~1e-2 for BF16 (8 bits of mantissa). The cache is paged
// (kv_paged.cuh): each tile looks its rows' blocks up once into shared memory.
#include <cuda_fp16.h>

#include "kernels/cuda/attention_prefill.h"
#include "kernels/cuda/kv_elem.cuh"
#include "kernels/cuda/kv_paged.cuh"
#include "kernels/cuda/launch.cuh"

namespace brisk::cuda {

namespace {

constexpr int kRowsPerWarp = 16;
constexpr int kWarpsPF = 4;
constexpr int kRowsPerBlock = kRowsPerWarp * kWarpsPF;
constexpr int kTileJ = 64;

// Two floats rounded to the 2-byte type T (one paired conversion), low one first.
template <KvT T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (T == KvT::f16) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __nv_bfloat162 b = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&b);
  }
}

template <KvT T>
__device__ __forceinline__ void mma16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                      uint32_t b1) {
  if constexpr (T == KvT::f16)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

template <int HD, KvT T>
__global__ void __launch_bounds__(kWarpsPF * 32) prefill_attention_kernel(AttentionArgs a) {
  BRISK_PDL_ENTER();
  constexpr int kStride = HD + 8;  // halves per shared row (padding against bank conflicts)
  constexpr int kKc = HD / 16;     // k-chunks of the q . k product
  constexpr int kDt = HD / 8;      // n-tiles of the output
  __shared__ __align__(16) uint16_t ks[kTileJ * kStride];  // 2-byte elements of type T
  __shared__ __align__(16) uint16_t vs[kTileJ * kStride];
  __shared__ int64_t slot_s[kTileJ];  // pool rows of the tile's positions

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, tg = lane & 3;
  const int h = blockIdx.y;
  const int kvh = h / (a.n_head / a.n_head_kv);
  const int64_t n_tok = a.q.rows;
  const int64_t t_first = int64_t(blockIdx.x) * kRowsPerBlock;
  const int64_t t_last = t_first + kRowsPerBlock - 1 < n_tok - 1 ? t_first + kRowsPerBlock - 1 : n_tok - 1;
  const int64_t s = a.seq[t_first];
  const int64_t p_first = a.pos[t_first], p_last = a.pos[t_last];
  const int64_t lo_block = a.window > 0 && p_first - a.window + 1 > 0 ? p_first - a.window + 1 : 0;

  // This thread's two query rows (g, g + 8 of the warp's 16) and their position ranges.
  const int64_t r0 = t_first + warp * kRowsPerWarp + g, r1 = r0 + 8;
  const bool v0 = r0 < n_tok, v1 = r1 < n_tok;
  const int64_t p0 = v0 ? a.pos[r0] : -1, p1 = v1 ? a.pos[r1] : -1;
  const int64_t lo0 = a.window > 0 && p0 - a.window + 1 > 0 ? p0 - a.window + 1 : 0;
  const int64_t lo1 = a.window > 0 && p1 - a.window + 1 > 0 ? p1 - a.window + 1 : 0;

  // q fragments (A, row-major 16 x HD), scaled, rounded to T.
  const int64_t q_stride = a.q.stride ? a.q.stride : a.q.cols;
  const float* q0 = a.q.data + r0 * q_stride + int64_t(h) * HD;
  const float* q1 = a.q.data + r1 * q_stride + int64_t(h) * HD;
  uint32_t qa[kKc][4];
#pragma unroll
  for (int kc = 0; kc < kKc; ++kc) {
    const int c = kc * 16 + 2 * tg;
    qa[kc][0] = v0 ? pack2<T>(q0[c] * a.scale, q0[c + 1] * a.scale) : 0u;
    qa[kc][1] = v1 ? pack2<T>(q1[c] * a.scale, q1[c + 1] * a.scale) : 0u;
    qa[kc][2] = v0 ? pack2<T>(q0[c + 8] * a.scale, q0[c + 9] * a.scale) : 0u;
    qa[kc][3] = v1 ? pack2<T>(q1[c + 8] * a.scale, q1[c + 9] * a.scale) : 0u;
  }

  float o[kDt][4];
#pragma unroll
  for (int d = 0; d < kDt; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // l: this thread's partial sums

  const uint8_t* kbase = static_cast<const uint8_t*>(a.k_cache.data);
  const uint8_t* vbase = static_cast<const uint8_t*>(a.v_cache.data);
  const int sh = kv_block_shift(a.k_cache);
  constexpr int kPieces = HD / 8;  // 16-byte pieces per row
  static_assert(kTileJ <= kWarpsPF * 32, "one thread per position looks its block up");

  for (int64_t j0 = lo_block; j0 <= p_last; j0 += kTileJ) {
    // slot_s is free: the previous tile's loads finished before its second barrier.
    if (threadIdx.x < kTileJ && j0 + threadIdx.x <= p_last) slot_s[threadIdx.x] = kv_slot(a.k_cache, sh, s, j0 + threadIdx.x);
    __syncthreads();  // the previous tile's readers are done
    for (int i = threadIdx.x; i < kTileJ * kPieces; i += kWarpsPF * 32) {
      const int jj = i / kPieces, pc = i % kPieces;
      uint4 kq = make_uint4(0, 0, 0, 0), vq = kq;
      if (j0 + jj <= p_last) {
        const size_t slot = size_t(slot_s[jj]);
        kq = *reinterpret_cast<const uint4*>(kbase + slot * a.k_cache.row_bytes + (size_t(kvh) * HD + 8 * pc) * 2);
        vq = *reinterpret_cast<const uint4*>(vbase + slot * a.v_cache.row_bytes + (size_t(kvh) * HD + 8 * pc) * 2);
      }
      *reinterpret_cast<uint4*>(ks + jj * kStride + 8 * pc) = kq;
      *reinterpret_cast<uint4*>(vs + jj * kStride + 8 * pc) = vq;
    }
    __syncthreads();

    // S = q . K^T: 8 n-tiles of 8 positions.
    float sc[kTileJ / 8][4];
#pragma unroll
    for (int nt = 0; nt < kTileJ / 8; ++nt) {
      sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.0f;
      const uint16_t* krow = ks + (nt * 8 + g) * kStride + 2 * tg;
#pragma unroll
      for (int kc = 0; kc < kKc; ++kc) {
        const uint32_t b0 = *reinterpret_cast<const uint32_t*>(krow + kc * 16);
        const uint32_t b1 = *reinterpret_cast<const uint32_t*>(krow + kc * 16 + 8);
        mma16<T>(sc[nt], qa[kc][0], qa[kc][1], qa[kc][2], qa[kc][3], b0, b1);
      }
    }
    // Softcap, mask, tile maxima of rows g (elements 0, 1) and g + 8 (2, 3).
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kTileJ / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t j = j0 + nt * 8 + 2 * tg + (e & 1);
        float x = sc[nt][e];
        if (a.softcap > 0.0f) x = a.softcap * tanhf(x / a.softcap);
        const bool ok = e < 2 ? (j >= lo0 && j <= p0) : (j >= lo1 && j <= p1);
        x = ok ? x : -INFINITY;
        sc[nt][e] = x;
        if (e < 2) mx0 = fmaxf(mx0, x);
        else mx1 = fmaxf(mx1, x);
      }
    }
#pragma unroll
    for (int off = 1; off <= 2; off <<= 1) {
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
    }
    const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
    // Rows with nothing unmasked yet keep p = 0 (exponent base 0 instead of -inf).
    const float base0 = mn0 == -INFINITY ? 0.0f : mn0, base1 = mn1 == -INFINITY ? 0.0f : mn1;
    const float al0 = expf(m0 - base0), al1 = expf(m1 - base1);  // 0 while m = -inf
    m0 = mn0;
    m1 = mn1;
    l0 *= al0;
    l1 *= al1;
#pragma unroll
    for (int d = 0; d < kDt; ++d) {
      o[d][0] *= al0;
      o[d][1] *= al0;
      o[d][2] *= al1;
      o[d][3] *= al1;
    }
#pragma unroll
    for (int nt = 0; nt < kTileJ / 8; ++nt) {
      sc[nt][0] = expf(sc[nt][0] - base0);
      sc[nt][1] = expf(sc[nt][1] - base0);
      sc[nt][2] = expf(sc[nt][2] - base1);
      sc[nt][3] = expf(sc[nt][3] - base1);
      l0 += sc[nt][0] + sc[nt][1];
      l1 += sc[nt][2] + sc[nt][3];
    }
    // O += P . V: P's accumulators become the A fragments of 16-position k-chunks.
#pragma unroll
    for (int kc = 0; kc < kTileJ / 16; ++kc) {
      const uint32_t pa0 = pack2<T>(sc[2 * kc][0], sc[2 * kc][1]);
      const uint32_t pa1 = pack2<T>(sc[2 * kc][2], sc[2 * kc][3]);
      const uint32_t pa2 = pack2<T>(sc[2 * kc + 1][0], sc[2 * kc + 1][1]);
      const uint32_t pa3 = pack2<T>(sc[2 * kc + 1][2], sc[2 * kc + 1][3]);
      const uint16_t* va = vs + (kc * 16 + 2 * tg) * kStride + g;
#pragma unroll
      for (int d = 0; d < kDt; ++d) {
        const uint16_t* vcol = va + d * 8;
        const uint32_t b0 = uint32_t(vcol[0]) | (uint32_t(vcol[kStride]) << 16);
        const uint32_t b1 = uint32_t(vcol[8 * kStride]) | (uint32_t(vcol[9 * kStride]) << 16);
        mma16<T>(o[d], pa0, pa1, pa2, pa3, b0, b1);
      }
    }
  }

#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, off);
    l1 += __shfl_xor_sync(0xffffffffu, l1, off);
  }
  const int64_t out_stride = a.out.stride ? a.out.stride : a.out.cols;
  const float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
#pragma unroll
  for (int d = 0; d < kDt; ++d) {
    const int c = int(h) * HD + d * 8 + 2 * tg;
    if (v0) {
      float* w = a.out.data + r0 * out_stride + c;
      w[0] = o[d][0] * inv0;
      w[1] = o[d][1] * inv0;
    }
    if (v1) {
      float* w = a.out.data + r1 * out_stride + c;
      w[0] = o[d][2] * inv1;
      w[1] = o[d][3] * inv1;
    }
  }
}

}  // namespace

bool prefill_attention_supported(const AttentionArgs& a) {
  const auto aligned = [](const KvView& v) {
    return (v.type == QuantType::F16 || v.type == QuantType::BF16) && v.row_bytes % 16 == 0 &&
           reinterpret_cast<uintptr_t>(v.data) % 16 == 0;
  };
  return (a.head_dim == 64 || a.head_dim == 128) && aligned(a.k_cache) && aligned(a.v_cache) &&
         a.k_cache.type == a.v_cache.type && a.q.rows > 0 &&
         (a.q.rows + kRowsPerBlock - 1) / kRowsPerBlock <= 65535 && a.n_head <= 65535;
}

cudaError_t launch_prefill_attention(const AttentionArgs& a, cudaStream_t s) {
  if (!prefill_attention_supported(a)) return cudaErrorInvalidValue;
  const dim3 grid(unsigned((a.q.rows + kRowsPerBlock - 1) / kRowsPerBlock), unsigned(a.n_head));
  const bool bf16 = a.k_cache.type == QuantType::BF16;
  if (a.head_dim == 64)
    launch_kernel(bf16 ? prefill_attention_kernel<64, KvT::bf16> : prefill_attention_kernel<64, KvT::f16>, grid,
                  kWarpsPF * 32, 0, s, a);
  else
    launch_kernel(bf16 ? prefill_attention_kernel<128, KvT::bf16> : prefill_attention_kernel<128, KvT::f16>, grid,
                  kWarpsPF * 32, 0, s, a);
  return cudaGetLastError();
}

}  // namespace brisk::cuda
