// Bidirectional attention over dense F32 q / k / v rows (encoders, AttentionDenseArgs) on the
// tensor cores: flash attention with mma.sync m16n8k16 BF16 operands and FP32 accumulators,
// head_dim 16, 32, 64 or 128. Each F32 operand x is split into x_hi = bf16(x) and
// x_lo = bf16(x - x_hi), and a product a . b is summed as a_hi b_hi + a_hi b_lo + a_lo b_hi
// (the lo . lo term is below 2^-16 of it), so scores and outputs keep about 16 bits of
// mantissa: within ~1e-5 relative of the FP32 kernel (attention_dense.cu), where one BF16
// product would be ~1e-2. It is three times the tensor-core work of plain BF16, still a small
// part of an encoder layer (at 128 tokens, 16 heads of 64: 4 GFLOP per 8192 tokens against
// ~200 GFLOP of matmuls).
//
// The output may also (or only) go out as the next GEMM's dense BF16 rows (DenseAttentionOut).
//
// Grid (ceil(max_len / (16 W)), n_head, n_seq), W warps per block (4, or 8 for sequences longer
// than 64 without a window: one load and split of each K / V tile serves 128 query rows): a
// block takes 16 W query rows of one head of one packed sequence ([seq_start[s], seq_start[s + 1])
// from device memory, or rows / n_seq rows each), each warp 16 of them (a thread holds the
// fragments of rows g and g + 8, g = lane / 4). Per tile of kTileJ positions the K and V rows of
// the head's KV head are loaded as float4 (or, with STAGE, copied to shared memory by cp.async,
// the next tile's copy in flight while this one is computed), split into hi / lo BF16 planes in
// shared memory; S = (scale q) . K^T, the mask
// (the sequence's end; with a local window, |i - j| <= window), online softmax with expf, then
// O += P . V with P split the same way. Blocks past a shorter sequence's end return at once; a
// window visits only the tiles that meet its rows' windows. The q / k / v biases
// (AttentionDenseArgs::q_bias ...), when given, are added to the rows as they are read: the
// sums the separate bias launches would have stored.
#include <cuda_bf16.h>

#include "core/flags.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/launch.cuh"

namespace brisk::cuda {

namespace {

constexpr int kRowsPerWarp = 16;
constexpr int kTileJ = 64;

__device__ __forceinline__ int64_t tc_stride(const Mat& m) { return m.stride ? m.stride : m.cols; }

// x = hi + lo (both BF16, returned as their bit patterns).
__device__ __forceinline__ void split_bf16(float x, uint16_t& hi, uint16_t& lo) {
  const __nv_bfloat16 h = __float2bfloat16_rn(x);
  const __nv_bfloat16 l = __float2bfloat16_rn(x - __bfloat162float(h));
  hi = __bfloat16_as_ushort(h);
  lo = __bfloat16_as_ushort(l);
}

// Two floats split into a packed hi pair and a packed lo pair (low element first).
__device__ __forceinline__ void split2(float a, float b, uint32_t& hi, uint32_t& lo) {
  uint16_t ah, al, bh, bl;
  split_bf16(a, ah, al);
  split_bf16(b, bh, bl);
  hi = uint32_t(ah) | (uint32_t(bh) << 16);
  lo = uint32_t(al) | (uint32_t(bl) << 16);
}

// x + bias[0..3], element by element as the bias launch adds them (scalar loads: any alignment).
__device__ __forceinline__ float4 add_bias4(float4 x, const float* bias) {
  return make_float4(x.x + bias[0], x.y + bias[1], x.z + bias[2], x.w + bias[3]);
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// c += a . b with split operands: a_lo b_hi + a_hi b_lo + a_hi b_hi (lo . lo is below 2^-16).
__device__ __forceinline__ void mma_split(float (&c)[4], const uint32_t (&a_hi)[4], const uint32_t (&a_lo)[4],
                                          uint32_t bh0, uint32_t bh1, uint32_t bl0, uint32_t bl1) {
  mma_bf16(c, a_lo, bh0, bh1);
  mma_bf16(c, a_hi, bl0, bl1);
  mma_bf16(c, a_hi, bh0, bh1);
}

// Four 8 x 8 BF16 matrices from shared memory (lane l gives the address of row l % 8 of matrix
// l / 8); register i holds matrix i's fragment: {M[l / 4][2 (l % 4)], M[l / 4][2 (l % 4) + 1]},
// transposed ({M[2 (l % 4)][l / 4], M[2 (l % 4) + 1][l / 4]}) with trans.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const uint16_t* row) {
  const unsigned addr = unsigned(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const uint16_t* row) {
  const unsigned addr = unsigned(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const uint16_t* row) {
  const unsigned addr = unsigned(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// 16-byte copy global -> shared that bypasses registers (cp.async; L1 bypassed).
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  const unsigned d = unsigned(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

// Shared memory: K hi, K lo, V hi, V lo planes of [kTileJ][HD + 8] BF16 (padded rows); with
// STAGE, then the F32 K and V rows of the tile in flight ([kTileJ][HD] each).
template <int HD, bool STAGE>
constexpr size_t tc_smem_bytes() {
  return size_t(4) * kTileJ * (HD + 8) * sizeof(uint16_t) + (STAGE ? size_t(2) * kTileJ * HD * sizeof(float) : 0);
}

template <int HD, int W, bool STAGE>
__global__ void __launch_bounds__(W * 32)
    attention_dense_tc_kernel(AttentionDenseArgs a, int64_t n_fixed, DenseAttentionOut extra) {
  BRISK_PDL_ENTER();
  constexpr int kRowsPerBlock = kRowsPerWarp * W;
  constexpr int kStride = HD + 8;  // BF16 elements per shared row
  constexpr int kKc = HD / 16;     // k-chunks of q . k
  constexpr int kDt = HD / 8;      // n-tiles of the output
  constexpr int kPlane = kTileJ * kStride;
  extern __shared__ __align__(16) uint16_t tc_sm[];
  uint16_t* kh = tc_sm;
  uint16_t* kl = kh + kPlane;
  uint16_t* vh = kl + kPlane;
  uint16_t* vl = vh + kPlane;
  float* raw_k = reinterpret_cast<float*>(vl + kPlane);  // STAGE only
  float* raw_v = raw_k + kTileJ * HD;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, tg = lane & 3;
  const int h = blockIdx.y;
  const int64_t row0 = a.seq_start ? int64_t(a.seq_start[blockIdx.z]) : int64_t(blockIdx.z) * n_fixed;
  const int64_t n = a.seq_start ? int64_t(a.seq_start[blockIdx.z + 1]) - row0 : n_fixed;
  const int64_t i0 = int64_t(blockIdx.x) * kRowsPerBlock;
  if (i0 >= n) return;  // past a shorter sequence's end
  const int64_t kv_col = int64_t(h / (a.n_head / a.n_head_kv)) * HD;
  const int64_t w = a.window;
  const int64_t last = i0 + kRowsPerBlock - 1 < n ? i0 + kRowsPerBlock - 1 : n - 1;
  const int64_t j_lo = w > 0 && i0 - w > 0 ? i0 - w : 0;
  const int64_t j_hi = w > 0 && last + w + 1 < n ? last + w + 1 : n;

  // This thread's rows (within the sequence) and the keys each sees: [lo, hi).
  const int64_t r0 = i0 + warp * kRowsPerWarp + g, r1 = r0 + 8;
  const bool v0 = r0 < n, v1 = r1 < n;
  const int64_t lo0 = w > 0 && r0 - w > 0 ? r0 - w : 0, hi0 = !v0 ? 0 : w > 0 && r0 + w + 1 < n ? r0 + w + 1 : n;
  const int64_t lo1 = w > 0 && r1 - w > 0 ? r1 - w : 0, hi1 = !v1 ? 0 : w > 0 && r1 + w + 1 < n ? r1 + w + 1 : n;

  // q fragments (A, row-major 16 x HD), scaled, split.
  const int64_t qst = tc_stride(a.q);
  const float* q0 = a.q.data + (row0 + r0) * qst + int64_t(h) * HD;
  const float* q1 = a.q.data + (row0 + r1) * qst + int64_t(h) * HD;
  // With the projection's bias: (q + b) * scale, the bias launch's sum then the scaling.
  const float* qb = a.q_bias ? a.q_bias + int64_t(h) * HD : nullptr;
  const float s = a.scale;
  auto qval = [qb, s](bool valid, const float* row, int c) {
    return !valid ? 0.0f : qb ? (row[c] + qb[c]) * s : row[c] * s;
  };
  uint32_t qh[kKc][4], ql[kKc][4];
#pragma unroll
  for (int kc = 0; kc < kKc; ++kc) {
    const int c = kc * 16 + 2 * tg;
    split2(qval(v0, q0, c), qval(v0, q0, c + 1), qh[kc][0], ql[kc][0]);
    split2(qval(v1, q1, c), qval(v1, q1, c + 1), qh[kc][1], ql[kc][1]);
    split2(qval(v0, q0, c + 8), qval(v0, q0, c + 9), qh[kc][2], ql[kc][2]);
    split2(qval(v1, q1, c + 8), qval(v1, q1, c + 9), qh[kc][3], ql[kc][3]);
  }
  const float* kb = a.k_bias ? a.k_bias + kv_col : nullptr;
  const float* vb = a.v_bias ? a.v_bias + kv_col : nullptr;

  float o[kDt][4];
#pragma unroll
  for (int d = 0; d < kDt; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // l: this thread's partial sums
  const int64_t kst = tc_stride(a.k), vst = tc_stride(a.v);
  constexpr int kPieces = HD / 4;  // float4 pieces per row
  constexpr int kLoadUnroll = HD >= 128 ? 1 : 4;  // (head_dim 128 has no registers to spare)
  constexpr int kTilePieces = kTileJ * kPieces / (W * 32);  // float4 pieces per thread per tile
  // STAGE: the tile at j into raw_k / raw_v (rows past j_hi are not copied; the split zeroes them).
  auto stage = [&](int64_t j) {
#pragma unroll
    for (int it = 0; it < kTilePieces; ++it) {
      const int i = threadIdx.x + it * W * 32;
      const int jj = i / kPieces, pc = i % kPieces;
      if (j + jj < j_hi) {
        const int64_t row = row0 + j + jj;
        cp_async16(raw_k + jj * HD + 4 * pc, a.k.data + row * kst + kv_col + 4 * pc);
        cp_async16(raw_v + jj * HD + 4 * pc, a.v.data + row * vst + kv_col + 4 * pc);
      }
    }
    cp_async_commit();
  };
  if constexpr (STAGE) stage(j_lo);

  for (int64_t j0 = j_lo; j0 < j_hi; j0 += kTileJ) {
    if constexpr (STAGE) cp_async_wait_all();  // this thread's copies of the tile have landed
    __syncthreads();  // the previous tile's readers are done (and with STAGE, every copy landed)
    // (A fixed trip count, unrolled: several pieces' loads are issued together.)
#pragma unroll kLoadUnroll
    for (int it = 0; it < kTilePieces; ++it) {
      const int i = threadIdx.x + it * W * 32;
      const int jj = i / kPieces, pc = i % kPieces;
      float4 kx = make_float4(0.0f, 0.0f, 0.0f, 0.0f), vx = kx;
      if (j0 + jj < j_hi) {
        if constexpr (STAGE) {
          kx = *reinterpret_cast<const float4*>(raw_k + jj * HD + 4 * pc);
          vx = *reinterpret_cast<const float4*>(raw_v + jj * HD + 4 * pc);
        } else {
          const int64_t row = row0 + j0 + jj;
          kx = *reinterpret_cast<const float4*>(a.k.data + row * kst + kv_col + 4 * pc);
          vx = *reinterpret_cast<const float4*>(a.v.data + row * vst + kv_col + 4 * pc);
        }
        if (kb) kx = add_bias4(kx, kb + 4 * pc);
        if (vb) vx = add_bias4(vx, vb + 4 * pc);
      }
      uint32_t h01, l01, h23, l23;
      split2(kx.x, kx.y, h01, l01);
      split2(kx.z, kx.w, h23, l23);
      *reinterpret_cast<uint2*>(kh + jj * kStride + 4 * pc) = make_uint2(h01, h23);
      *reinterpret_cast<uint2*>(kl + jj * kStride + 4 * pc) = make_uint2(l01, l23);
      split2(vx.x, vx.y, h01, l01);
      split2(vx.z, vx.w, h23, l23);
      *reinterpret_cast<uint2*>(vh + jj * kStride + 4 * pc) = make_uint2(h01, h23);
      *reinterpret_cast<uint2*>(vl + jj * kStride + 4 * pc) = make_uint2(l01, l23);
    }
    __syncthreads();
    // Every thread has split the staged tile: the next one's copy may overwrite it.
    if constexpr (STAGE) {
      if (j0 + kTileJ < j_hi) stage(j0 + kTileJ);
    }

    // S = q . K^T over 8-position n-tiles: hi.hi + hi.lo + lo.hi.
    float sc[kTileJ / 8][4];
#pragma unroll
    for (int nt = 0; nt < kTileJ / 8; ++nt) {
      sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.0f;
      // B fragments of K rows nt * 8 .. + 7 (b0: columns kc * 16 + 2 tg, + 1 of row g; b1: + 8)
      // by ldmatrix: lane l addresses row l % 8 at column 8 (l / 8) of a pair of k-chunks.
      const int lrow = (nt * 8 + (lane & 7)) * kStride + 8 * (lane >> 3);
      if constexpr (HD >= 128) {
        // (Scalar loads: head_dim 128 has no registers to spare for ldmatrix's.)
        const int off = (nt * 8 + g) * kStride + 2 * tg;
#pragma unroll
        for (int kc = 0; kc < kKc; ++kc) {
          const uint32_t bh0 = *reinterpret_cast<const uint32_t*>(kh + off + kc * 16);
          const uint32_t bh1 = *reinterpret_cast<const uint32_t*>(kh + off + kc * 16 + 8);
          const uint32_t bl0 = *reinterpret_cast<const uint32_t*>(kl + off + kc * 16);
          const uint32_t bl1 = *reinterpret_cast<const uint32_t*>(kl + off + kc * 16 + 8);
          mma_split(sc[nt], qh[kc], ql[kc], bh0, bh1, bl0, bl1);
        }
      } else if constexpr (kKc == 1) {
        uint32_t bh[2], bl[2];
        ldmatrix_x2(bh, kh + lrow);
        ldmatrix_x2(bl, kl + lrow);
        mma_split(sc[nt], qh[0], ql[0], bh[0], bh[1], bl[0], bl[1]);
      } else {
#pragma unroll
        for (int kc = 0; kc < kKc; kc += 2) {
          uint32_t bh[4], bl[4];
          ldmatrix_x4(bh, kh + lrow + kc * 16);
          ldmatrix_x4(bl, kl + lrow + kc * 16);
#pragma unroll
          for (int u = 0; u < 2; ++u)
            mma_split(sc[nt], qh[kc + u], ql[kc + u], bh[2 * u], bh[2 * u + 1], bl[2 * u], bl[2 * u + 1]);
        }
      }
    }
    // Mask and the tile maxima of rows g (elements 0, 1) and g + 8 (2, 3).
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kTileJ / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t j = j0 + nt * 8 + 2 * tg + (e & 1);
        const bool ok = e < 2 ? (j >= lo0 && j < hi0) : (j >= lo1 && j < hi1);
        const float x = ok ? sc[nt][e] : -INFINITY;
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
      uint32_t ph[4], pl[4];
      split2(sc[2 * kc][0], sc[2 * kc][1], ph[0], pl[0]);
      split2(sc[2 * kc][2], sc[2 * kc][3], ph[1], pl[1]);
      split2(sc[2 * kc + 1][0], sc[2 * kc + 1][1], ph[2], pl[2]);
      split2(sc[2 * kc + 1][2], sc[2 * kc + 1][3], ph[3], pl[3]);
      // B fragments of V (b0: rows kc * 16 + 2 tg, + 1 of column d * 8 + g; b1: rows + 8) by
      // transposing ldmatrix: lane l addresses row kc * 16 + 8 ((l / 8) % 2) + l % 8 at column
      // 8 (d + l / 16) of a pair of d-tiles.
      const int vrow = (kc * 16 + 8 * ((lane >> 3) & 1) + (lane & 7)) * kStride + 8 * (lane >> 4);
      if constexpr (HD >= 128) {
        // (Scalar loads: head_dim 128 has no registers to spare for ldmatrix's.)
        const int base = (kc * 16 + 2 * tg) * kStride + g;
#pragma unroll
        for (int d = 0; d < kDt; ++d) {
          const int c = base + d * 8;
          const uint32_t bh0 = uint32_t(vh[c]) | (uint32_t(vh[c + kStride]) << 16);
          const uint32_t bh1 = uint32_t(vh[c + 8 * kStride]) | (uint32_t(vh[c + 9 * kStride]) << 16);
          const uint32_t bl0 = uint32_t(vl[c]) | (uint32_t(vl[c + kStride]) << 16);
          const uint32_t bl1 = uint32_t(vl[c + 8 * kStride]) | (uint32_t(vl[c + 9 * kStride]) << 16);
          mma_split(o[d], ph, pl, bh0, bh1, bl0, bl1);
        }
      } else {
#pragma unroll
        for (int d = 0; d < kDt; d += 2) {
          uint32_t bh[4], bl[4];
          ldmatrix_x4_trans(bh, vh + vrow + d * 8);
          ldmatrix_x4_trans(bl, vl + vrow + d * 8);
#pragma unroll
          for (int u = 0; u < 2; ++u) mma_split(o[d + u], ph, pl, bh[2 * u], bh[2 * u + 1], bl[2 * u], bl[2 * u + 1]);
        }
      }
    }
  }

#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, off);
    l1 += __shfl_xor_sync(0xffffffffu, l1, off);
  }
  const int64_t ost = tc_stride(a.out), xbw = int64_t(a.n_head) * HD;
  const float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
  __nv_bfloat16* xb = reinterpret_cast<__nv_bfloat16*>(extra.xb);
#pragma unroll
  for (int d = 0; d < kDt; ++d) {
    const int64_t c = int64_t(h) * HD + d * 8 + 2 * tg;
    const float2 y0 = make_float2(o[d][0] * inv0, o[d][1] * inv0), y1 = make_float2(o[d][2] * inv1, o[d][3] * inv1);
    if (extra.write_out) {
      if (v0) *reinterpret_cast<float2*>(a.out.data + (row0 + r0) * ost + c) = y0;
      if (v1) *reinterpret_cast<float2*>(a.out.data + (row0 + r1) * ost + c) = y1;
    }
    // The next GEMM's BF16 input, as act_to_bf16 would round the stored rows.
    if (xb && v0) *reinterpret_cast<__nv_bfloat162*>(xb + (row0 + r0) * xbw + c) = __floats2bfloat162_rn(y0.x, y0.y);
    if (xb && v1) *reinterpret_cast<__nv_bfloat162*>(xb + (row0 + r1) * xbw + c) = __floats2bfloat162_rn(y1.x, y1.y);
  }
}

template <int HD, int W, bool STAGE>
cudaError_t launch_tc_as(const AttentionDenseArgs& a, int64_t n, int64_t max_len, const DenseAttentionOut& extra,
                         cudaStream_t stream) {
  constexpr size_t smem = tc_smem_bytes<HD, STAGE>();
  if constexpr (smem > 48 * 1024) {
    static const cudaError_t attr = cudaFuncSetAttribute(attention_dense_tc_kernel<HD, W, STAGE>,
                                                         cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (attr != cudaSuccess) return attr;
  }
  constexpr int kRowsPerBlock = kRowsPerWarp * W;
  const dim3 grid(unsigned((max_len + kRowsPerBlock - 1) / kRowsPerBlock), unsigned(a.n_head), unsigned(a.n_seq));
  return launch_kernel(attention_dense_tc_kernel<HD, W, STAGE>, grid, dim3(W * 32), smem, stream, a, n, extra);
}

// 8 warps for sequences longer than 64 without a window (a window's rows see few tiles each);
// the staged copies for head_dim up to 64 (128's planes and staging would halve the blocks per SM).
template <int HD>
cudaError_t launch_tc(const AttentionDenseArgs& a, int64_t n, int64_t max_len, const DenseAttentionOut& extra,
                      cudaStream_t stream) {
  const bool wide = max_len > 64 && a.window == 0 && !flags().no_cuda_attention_wide;
  if constexpr (HD <= 64) {
    if (!flags().no_cuda_attention_stage) return wide ? launch_tc_as<HD, 8, true>(a, n, max_len, extra, stream)
                            : launch_tc_as<HD, 4, true>(a, n, max_len, extra, stream);
  }
  return wide ? launch_tc_as<HD, 8, false>(a, n, max_len, extra, stream)
              : launch_tc_as<HD, 4, false>(a, n, max_len, extra, stream);
}

bool aligned16(const Mat& m) {
  return reinterpret_cast<uintptr_t>(m.data) % 16 == 0 && m.row_stride() % 4 == 0;
}

}  // namespace

bool attention_dense_tc_supported(const AttentionDenseArgs& a) {
  return (a.head_dim == 16 || a.head_dim == 32 || a.head_dim == 64 || a.head_dim == 128) && attention_dense_supported(a) &&
         aligned16(a.k) && aligned16(a.v) && reinterpret_cast<uintptr_t>(a.out.data) % 8 == 0 &&
         a.out.row_stride() % 2 == 0;
}

cudaError_t launch_attention_dense_tc(const AttentionDenseArgs& a, int64_t max_len, cudaStream_t stream,
                                      const DenseAttentionOut& extra) {
  if (!attention_dense_tc_supported(a) || (!extra.write_out && !extra.xb)) return cudaErrorInvalidValue;
  const int64_t n = a.seq_start ? 0 : a.q.rows / a.n_seq;  // rows of every sequence, without seq_start
  if (max_len == 0) return cudaSuccess;
  if (a.head_dim == 16) return launch_tc<16>(a, n, max_len, extra, stream);
  if (a.head_dim == 32) return launch_tc<32>(a, n, max_len, extra, stream);
  if (a.head_dim == 64) return launch_tc<64>(a, n, max_len, extra, stream);
  return launch_tc<128>(a, n, max_len, extra, stream);
}

}  // namespace brisk::cuda
