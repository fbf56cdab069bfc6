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

// Spread Q6_K: the lane's 128 six-bit values assembled into bytes once (as q6k_early_row does),
// per token the dots and sums of UnitQ6kSpread::dot.
template <>
struct FewOp<UnitQ6kSpread> {
  using Raw = UnitQ6kSpread::Raw;
  struct Dec {
    uint32_t q[32];  // words 4 (4 h + qq) + k: elements 128 h + 32 qq + 16 p + 4 k .. + 3
    uint4 sc;
    float d;
  };
  struct Act {};
  static __device__ void decode(const Raw& r, int64_t, Dec& o) {
    const uint32_t* L = reinterpret_cast<const uint32_t*>(r.l);
    const uint32_t* H = reinterpret_cast<const uint32_t*>(r.hq);
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int qq = 0; qq < 4; ++qq)
#pragma unroll
        for (int k = 0; k < 4; ++k)
          o.q[4 * (4 * h + qq) + k] = ((L[4 * (2 * h + (qq & 1)) + k] >> (4 * (qq >> 1))) & 0x0f0f0f0fu) |
                                      (((H[4 * h + k] >> (2 * qq)) & 0x03030303u) << 4);
    o.sc = r.sc;
    o.d = r.d;
  }
  static __device__ void act(const XRef&, int, int64_t, Act&) {}
  static __device__ float dot(const Dec& w, const Act&, const XRef& x, int t, int64_t u) {
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
    if (u & 1) return 0.0f;
    const float xd = x.d[t * (x.n_in / 256) + (u >> 1)];
    return __fmul_rn(__fmul_rn(w.d, xd), float(isum));
  }
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
