// The few-token decode GEMV (2..kMaxTok tokens: a speculative verify step of k drafts is k + 1
// rows; small batches): out[t, r] = dot(W[r, :], x[t, :]) + bias[r], every weight byte read
// once for all tokens, and every token's sum computed in exactly the order of the one-token
// launch of the same matrix (launch_gemv in gemv_kernel.cuh), so a row of a verify step has the
// bits it would have decoded alone: the speculative output equals plain greedy decoding.
//
// Cost model (per weight byte read; a step of NT tokens reads the same bytes as one token):
//   format  bytes / 256 weights  dp4a per token (values + activation sums)  dp4a / byte / token
//   Q4_K    144                  64 + 64                                  0.89
//   Q5_K    176                  64 + 64                                  0.73
//   Q6_K    210                  64 + 64                                  0.61
//   Q8_0    272                  64                                       0.24
//   BF16    512                  256 FMAs (+ 256 unpacks)                 0.5 FMA
// A 132-multiprocessor H200 issues about 16.7 T dp4a/s (64 per multiprocessor and clock) against
// about 4.3 TB/s of reads: 3.9 dp4a per byte. The generic multi-token kernel (gemv_kernel with
// NT > 1) also re-decodes each unit per token (Q4_K: nibble masks and 6-bit scale unpacking, 20
// more integer ops per token and unit; Q6_K: 64 shifts / masks / ors), so at 5 tokens its Q4_K
// work is about 4.5 dp4a + 4 other ops per byte: bound by issue, not by memory (measured: a verify
// of 5 rows 3.05x a decode step). Here a lane decodes its unit once (Q4_K: q4k_decode, Q6_K: the
// 6-bit values assembled into bytes) and then dots it with each token's activations; over
// spread Q4_K rows a warp takes two rows (kRows = 2) so each token's activation loads and sums
// (half of Q4_K's dp4a) serve both: 0.67 dp4a per byte and token, 3.3 at 5 tokens.
// Registers: kRows x (raw units of a pass + one decoded unit) + kRows x NT accumulators; the
// activations of one (token, unit) are transient.
//
// Same bits as one token: the lane layout (lanes per row, units per pass, spread layouts), the
// split of long rows over warps (the one-token split count, passed at run time; warps add their
// sums in shared memory in warp order), the shuffle tree, the integer sums and the float steps
// are the one-token kernels' (gemv_kernel's split / unsplit rows; q4k_early_kernel and the
// two-row Q6_K kernel are bit-equal to the unsplit spread rows). Only which warp holds a row and
// how many tokens share its loads differ. BRISK_NO_CUDA_GEMV_FEW restores gemv_kernel<NT>.
#pragma once
#include "kernels/cuda/gemv_q4k_early.cuh"
#include "kernels/cuda/gemv_units.cuh"
#include "kernels/cuda/launch.cuh"

namespace brisk::cuda {

// The rows r .. r + kRows - 1 of a part (lanes of a missing row read the last real one and store
// nothing).
template <int kRows>
__device__ __forceinline__ void gemv_row_refs(const GemvPart& P, int64_t r, RowRef (&row)[kRows]) {
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    const int64_t rr = r + j < P.n_out ? r + j : P.n_out - 1;
    row[j] = RowRef{.qs = P.w + size_t(rr) * P.L.qs_row, .sc = P.w + P.L.sc_offset + size_t(rr) * P.L.sc_row};
  }
}

// Each lane's sums added over the kLanes lanes of its row by the shuffle tree.
template <int kLanes, int kRows, int NT>
__device__ __forceinline__ void gemv_lane_sums(float (&acc)[kRows][NT]) {
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      float v = acc[j][t];
      for (int o = kLanes / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      acc[j][t] = v;
    }
  }
}

// Rows split over `split` consecutive warps (a block barrier): the warps' sums added in warp
// order through shared memory into the row's first warp, which gets true; the others are done.
template <int kRows, int NT>
__device__ __forceinline__ bool gemv_split_sums(float (&acc)[kRows][NT], int split, int warp, int lane) {
  __shared__ float part_sums[kMaxWarps][kRows][NT];
  if (lane == 0)
#pragma unroll
    for (int j = 0; j < kRows; ++j)
#pragma unroll
      for (int t = 0; t < NT; ++t) part_sums[warp][j][t] = acc[j][t];
  __syncthreads();
  if (warp % split != 0) return false;
#pragma unroll
  for (int j = 0; j < kRows; ++j)
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      float v = part_sums[warp][j][t];
#pragma unroll
      for (int q = 1; q < split; ++q) v += part_sums[warp + q][j][t];
      acc[j][t] = v;
    }
  return true;
}

// The epilogue: lane 0 of each row (sl == 0) stores out[t, r + j] = acc + bias, and with a
// residual sum[t, r + j] = res[t, r + j] + out.
template <int kRows, int NT>
__device__ __forceinline__ void gemv_store_rows(const GemvPart& P, int64_t r, int sl, const float (&acc)[kRows][NT]) {
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    if (sl == 0 && r + j < P.n_out) {
      const float b = P.bias ? P.bias[r + j] : 0.0f;
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const float o = acc[j][t] + b;
        P.out[t * P.out_stride + r + j] = o;
        if (P.res) P.sum[t * P.sum_stride + r + j] = P.res[t * P.res_stride + r + j] + o;
      }
    }
  }
}

// Token t's activations of spread Q4_K unit u (the lane's chunks j and j + 4 of block u / 4):
// four 16-byte pieces, their sums and the block's scale.
struct Q4kAct {
  int4 xa0, xa1, xb0, xb1;
  int ba_lo, ba_hi, bb_lo, bb_hi;
  float xd;
};
__device__ __forceinline__ void q4k_act(const XRef& x, int t, int64_t u, Q4kAct& a) {
  const int j = int(u & 3), jq = j >> 1, hh = j & 1;
  const int8_t* xb = x.q + t * x.n_in + 256 * (u >> 2) + 16 * hh + 64 * jq;
  a.xa0 = ld_x(xb);
  a.xa1 = ld_x(xb + 32);
  a.xb0 = ld_x(xb + 128);
  a.xb1 = ld_x(xb + 160);
  a.ba_lo = sum16(a.xa0, 0);
  a.ba_hi = sum16(a.xa1, 0);
  a.bb_lo = sum16(a.xb0, 0);
  a.bb_hi = sum16(a.xb1, 0);
  a.xd = x.d[t * (x.n_in / 256) + (u >> 2)];
}
// A decoded unit dotted with a token's activations: the block's integer sums over its 4 lanes
// (UnitQ4kSpread's integers), scaled as Unit<q4_k>::finish scales them; lane 0 of the block
// (j == 0) returns the result, the others 0.
__device__ __forceinline__ float q4k_dot_unit(const Q4kDecoded& w, const Q4kAct& a, int j) {
  const int sa_lo = dp4a_us4(w.alo, a.xa0), sa_hi = dp4a_us4(w.ahi, a.xa1) >> 4;
  const int sb_lo = dp4a_us4(w.blo, a.xb0), sb_hi = dp4a_us4(w.bhi, a.xb1) >> 4;
  int isum = int(w.sc & 0xffu) * sa_lo + int((w.sc >> 8) & 0xffu) * sa_hi + int((w.sc >> 16) & 0xffu) * sb_lo +
             int(w.sc >> 24) * sb_hi;
  int msum = int(w.mn & 0xffu) * a.ba_lo + int((w.mn >> 8) & 0xffu) * a.ba_hi + int((w.mn >> 16) & 0xffu) * a.bb_lo +
             int(w.mn >> 24) * a.bb_hi;
  isum += __shfl_xor_sync(0xffffffffu, isum, 1);
  msum += __shfl_xor_sync(0xffffffffu, msum, 1);
  isum += __shfl_xor_sync(0xffffffffu, isum, 2);
  msum += __shfl_xor_sync(0xffffffffu, msum, 2);
  if (j != 0) return 0.0f;
  return __fsub_rn(__fmul_rn(__fmul_rn(w.d, a.xd), float(isum)), __fmul_rn(__fmul_rn(w.dmin, a.xd), float(msum)));
}
// A lane's spread Q6_K unit decoded: its 128 six-bit values as bytes (word 4 (4 h + qq) + k
// holds elements 128 h + 32 qq + 16 p + 4 k .. + 3), the block's scale bytes and d.
struct Q6kDecoded {
  uint32_t q[32];
  uint4 sc;
  float d;
};
__device__ __forceinline__ void q6k_decode(const UnitQ6kSpread::Raw& raw, Q6kDecoded& o) {
  const uint32_t* L = reinterpret_cast<const uint32_t*>(raw.l);
  const uint32_t* H = reinterpret_cast<const uint32_t*>(raw.hq);
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int qq = 0; qq < 4; ++qq)
#pragma unroll
      for (int k = 0; k < 4; ++k)
        o.q[4 * (4 * h + qq) + k] = ((L[4 * (2 * h + (qq & 1)) + k] >> (4 * (qq >> 1))) & 0x0f0f0f0fu) |
                                    (((H[4 * h + k] >> (2 * qq)) & 0x03030303u) << 4);
  o.sc = raw.sc;
  o.d = raw.d;
}
// Unit u of a decoded row dotted with token t's activations: UnitQ6kSpread::dot's integers (the
// block's sum over its 2 lanes) and float steps; lane p = 1 of the block returns 0.
__device__ __forceinline__ float q6k_dot_unit(const Q6kDecoded& w, const XRef& x, int t, int64_t u) {
  const int p = int(u & 1);
  const int4* xq = reinterpret_cast<const int4*>(x.q + t * x.n_in + 256 * (u >> 1) + 16 * p);
  const uint32_t* S = reinterpret_cast<const uint32_t*>(&w.sc);
  int isum = 0;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
#pragma unroll
    for (int qq = 0; qq < 4; ++qq) {
      const int4 xv = xq[(128 * h + 32 * qq) / 16];
      const int X[4] = {xv.x, xv.y, xv.z, xv.w};
      int sd = 0, bx = 0;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        sd = __dp4a(int(w.q[4 * (4 * h + qq) + k]), X[k], sd);
        bx = __dp4a(0x01010101, X[k], bx);
      }
      const int sb = 8 * h + 2 * qq + p;
      const int scale = int(int8_t(uint8_t(S[sb >> 2] >> (8 * (sb & 3)))));
      isum += scale * (sd - 32 * bx);
    }
  }
  isum += __shfl_xor_sync(0xffffffffu, isum, 1);
  if (p != 0) return 0.0f;
  return __fmul_rn(__fmul_rn(w.d, x.d[t * (x.n_in / 256) + (u >> 1)]), float(isum));
}

// A format's few-token unit: Dec, the weights of one unit decoded once (generic: the raw
// loads); Act, one token's activations of a unit (generic: none, the unit's dot reads them);
// dot, the unit's contribution for one token (the value the one-token kernel adds).
template <class U>
struct FewOp {
  using Raw = typename U::Raw;
  using Dec = Raw;
  struct Act {};
  static __device__ void decode(const Raw& r, int64_t, Dec& d) { d = r; }
  static __device__ void act(const XRef&, int, int64_t, Act&) {}
  static __device__ float dot(const Dec& d, const Act&, const XRef& x, int t, int64_t u) { return U::dot(d, x, t, u); }
};

// Spread Q4_K: q4k_decode once per unit; per token the four 16-byte activation pieces and their
// sums (q4k_act), then q4k_dot_unit (the one-token early kernel's integer sums and float steps).
template <>
struct FewOp<UnitQ4kSpread> {
  using Raw = UnitQ4kSpread::Raw;
  using Dec = Q4kDecoded;
  using Act = Q4kAct;
  static __device__ void decode(const Raw& r, int64_t u, Dec& d) { q4k_decode(r, int(u & 3) >> 1, d); }
  static __device__ void act(const XRef& x, int t, int64_t u, Act& a) { q4k_act(x, t, u, a); }
  static __device__ float dot(const Dec& w, const Act& a, const XRef&, int, int64_t u) { return q4k_dot_unit(w, a, int(u & 3)); }
};

// Spread Q6_K: the lane's 128 six-bit values assembled into bytes once (q6k_decode, as the
// one-token q6k_early_row does), per token q6k_dot_unit (UnitQ6kSpread::dot's integers).
template <>
struct FewOp<UnitQ6kSpread> {
  using Raw = UnitQ6kSpread::Raw;
  using Dec = Q6kDecoded;
  struct Act {};
  static __device__ void decode(const Raw& r, int64_t, Dec& o) { q6k_decode(r, o); }
  static __device__ void act(const XRef&, int, int64_t, Act&) {}
  static __device__ float dot(const Dec& w, const Act&, const XRef& x, int t, int64_t u) { return q6k_dot_unit(w, x, t, u); }
};

// The few-token GEMV: NT tokens, kRows rows per warp (formats of 32 lanes per row; a warp's
// rows share each token's Act), `split` warps per row (1, 2, 4 or 8: the one-token launch's
// split; its warps take passes part, part + split, ... and add their sums in warp order).
template <DevFormat F, int NT, bool kSpread, int kRows>
__global__ void __launch_bounds__(32 * kMaxWarps) gemv_few_kernel(GemvParts parts, XRef x, int split, bool early) {
  using U = std::conditional_t<kSpread, SpreadUnit<F>, Unit<F>>;
  using Op = FewOp<U>;
  constexpr int kUnroll = U::kUnroll;
  constexpr int kLanes = U::kLanes;
  static_assert(kRows == 1 || kLanes == 32, "several rows per warp: one row across the warp");
  constexpr int kRowsPerWarp = 32 / kLanes * kRows;
  unsigned b_local;
  const int m = block_part(parts, b_local);
  const GemvPart& P = parts.p[m];
  const int lane = threadIdx.x & 31, sl = lane % kLanes;
  const int warp = int(threadIdx.x >> 5), part = warp % split;
  const int64_t r0 = (int64_t(b_local) * (blockDim.x / 32 / split) + warp / split) * kRowsPerWarp;
  if (split == 1 && r0 >= P.n_out) {  // whole warps leave together (split: all reach the barrier)
    BRISK_PDL_ENTER();
    return;
  }
  const int64_t r = r0 + lane / kLanes;
  RowRef row[kRows];
  gemv_row_refs(P, r, row);
  const int64_t n_units = U::count(x.n_in);
  constexpr int64_t kStep = int64_t(kLanes) * kUnroll;
  typename U::Raw raw[kRows][kUnroll];
  auto load_pass = [&](int64_t base) {
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const int64_t u = base + kLanes * k + sl;
#pragma unroll
      for (int j = 0; j < kRows; ++j)
        if (u < n_units) U::load(row[j], u, raw[j][k]);
    }
  };
  const int64_t first = r0 < P.n_out ? int64_t(part) * kStep : n_units;  // past the end: no passes
  if (early && first < n_units) load_pass(first);
  BRISK_PDL_ENTER();
  if (!early && first < n_units) load_pass(first);
  float acc[kRows][NT];
#pragma unroll
  for (int j = 0; j < kRows; ++j)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[j][t] = 0.0f;
  for (int64_t base = first; base < n_units; base += kStep * split) {
    if (base > first) load_pass(base);
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const int64_t u0 = base + kLanes * k;
      if (u0 >= n_units) break;  // uniform
      const int64_t u = u0 + sl;
      const bool ok = u < n_units;
      const int64_t ux = ok ? u : u0;  // lanes past the end read unit u0's activations, drop the result
      typename Op::Dec dec[kRows];
#pragma unroll
      for (int j = 0; j < kRows; ++j) Op::decode(raw[j][k], ux, dec[j]);
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        typename Op::Act xa;
        if constexpr (U::kInt) Op::act(x, t, ux, xa);
#pragma unroll
        for (int j = 0; j < kRows; ++j) {
          if constexpr (U::kInt) {
            const float v = Op::dot(dec[j], xa, x, t, ux);
            if (ok) acc[j][t] += v;
          } else {
            if (ok) acc[j][t] += Op::dot(dec[j], xa, x, t, u);
          }
        }
      }
    }
  }
  gemv_lane_sums<kLanes>(acc);
  if (split > 1 && !gemv_split_sums(acc, split, warp, lane)) return;  // block-uniform split
  gemv_store_rows(P, r, sl, acc);
}

// Launches the few-token kernel of nt tokens (2..kMaxTok) over `parts` (block_end set for
// rows_per_warp x warps / split rows per block), two rows per warp where `two_rows`.
template <DevFormat F, bool kSpread, int kRows>
void launch_gemv_few_rows(const GemvParts& parts, const XRef& x, int nt, int split, dim3 grid, dim3 block, bool early,
                          cudaStream_t s) {
#define BRISK_FEW_CASE(N) \
  case N: launch_kernel(gemv_few_kernel<F, N, kSpread, kRows>, grid, block, 0, s, parts, x, split, early); return;
  switch (nt) {
    BRISK_FEW_CASE(2) BRISK_FEW_CASE(3) BRISK_FEW_CASE(4) BRISK_FEW_CASE(5)
    BRISK_FEW_CASE(6) BRISK_FEW_CASE(7) BRISK_FEW_CASE(8)
    default: return;
  }
#undef BRISK_FEW_CASE
}
template <DevFormat F, bool kSpread>
void launch_gemv_few(const GemvParts& parts, const XRef& x, int nt, int split, bool two_rows, dim3 grid, dim3 block,
                     bool early, cudaStream_t s) {
  if constexpr (kSpread && F == DevFormat::q4_k) {
    if (two_rows) return launch_gemv_few_rows<F, kSpread, 2>(parts, x, nt, split, grid, block, early, s);
  }
  launch_gemv_few_rows<F, kSpread, 1>(parts, x, nt, split, grid, block, early, s);
}

}  // namespace brisk::cuda
