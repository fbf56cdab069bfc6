// The one-token Q4_K (and mixed Q4_K / Q6_K) GEMV kernels that decode their weights before the
// dependent-launch wait: q4k_early_kernel (one row per warp) and q4k_pair_kernel (two rows per
// warp); bit-equal to gemv_kernel's spread rows (gemv_kernel.cuh). Launched by launch_gemv and
// launch_kquant_mixed (matmul_kquant.cu).
#pragma once
#include "kernels/cuda/gemv_units.cuh"
#include "kernels/cuda/launch.cuh"

namespace brisk::cuda {

// One-token Q4_K rows with the weight-only work done before the dependent-launch wait
// (q4k_early_kernel). Same lanes, units, integer sums, lane order and shuffle tree as
// gemv_kernel's unsplit spread Q4_K rows (bit-equal), but while the previous kernel still runs
// a lane loads its two units, masks their nibbles (the low ones, and the high ones in place:
// dp4a_us of w & 0xf0 against signed activations is 16 times the sum, shifted back exactly) and
// packs the four scales and mins of its sub-blocks into bytes. After the wait only the
// activation loads, the dots, the sums of 16 and the reductions remain: the launches that fit in
// one wave (q / k, v, o) find their weights decoded when their input lands (Llama-3.1-8B Q4_K_M
// 465.5 / 466.0 -> 477.9 / 478.7 tok/s with one-pass rows). One warp per row: rows of several
// passes (down projections) take them in turn, the first decoded early, as the unsplit spread
// kernel does (same bits; kPasses, a separate build so that one-pass rows keep their registers).
// kMixed: parts whose bit is set in q6k_parts are Q6_K rows (q6k_early_row; one pass, one row
// per warp).
__device__ __forceinline__ int dp4a_us(uint32_t a, int b, int c) {
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
__device__ __forceinline__ int dp4a_us4(const uint4 w, const int4 x) {
  return dp4a_us(w.w, x.w, dp4a_us(w.z, x.z, dp4a_us(w.y, x.y, dp4a_us(w.x, x.x, 0))));
}

// A lane's spread Q4_K unit, decoded: chunk j's and chunk j + 4's quant words masked to their
// low / high nibbles, and the scales / mins of sub-blocks 2 jq, 2 jq + 1, 2 jq + 4, 2 jq + 5
// (jq = j / 2) as bytes 0..3 of sc / mn.
struct Q4kDecoded {
  uint4 alo, ahi, blo, bhi;
  uint32_t sc, mn;
  float d, dmin;
};
__device__ __forceinline__ void q4k_decode(const UnitQ4kSpread::Raw& r, int jq, Q4kDecoded& o) {
  constexpr uint32_t lo = 0x0f0f0f0fu, hi = 0xf0f0f0f0u;
  o.alo = make_uint4(r.a.x & lo, r.a.y & lo, r.a.z & lo, r.a.w & lo);
  o.ahi = make_uint4(r.a.x & hi, r.a.y & hi, r.a.z & hi, r.a.w & hi);
  o.blo = make_uint4(r.b.x & lo, r.b.y & lo, r.b.z & lo, r.b.w & lo);
  o.bhi = make_uint4(r.b.x & hi, r.b.y & hi, r.b.z & hi, r.b.w & hi);
  // Header bytes 2 jq, 2 jq + 1 of words y (scales 0..3 and top bits of 4..7), z (mins
  // likewise) and w (low / high nibbles: scales / mins 4..7); see Unit<q4_k>::scale_min.
  const int sh = 16 * jq;
  const uint32_t Y = r.h.y >> sh, Z = r.h.z >> sh, W = r.h.w >> sh;
  const uint32_t sc_a = Y & 0x3f3fu, m_a = Z & 0x3f3fu;
  const uint32_t sc_b = (W & 0x0f0fu) | ((Y >> 2) & 0x3030u);
  const uint32_t m_b = ((W >> 4) & 0x0f0fu) | ((Z >> 2) & 0x3030u);
  o.sc = sc_a | (sc_b << 16);
  o.mn = m_a | (m_b << 16);
  o.d = half_bits_to_f32(uint16_t(r.h.x & 0xffffu));
  o.dmin = half_bits_to_f32(uint16_t(r.h.x >> 16));
}

// The end of a one-row-per-warp GEMV: the lanes' sums added by the shuffle tree, then lane 0
// stores the row (plus its bias, and the residual sum where the part has one).
__device__ __forceinline__ void finish_row(const GemvPart& P, int64_t r, float acc, int lane) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (lane == 0) {
    const float o = acc + (P.bias ? P.bias[r] : 0.0f);
    P.out[r] = o;
    if (P.res) P.sum[r] = P.res[r] + o;
  }
}

// A one-pass Q6_K row (n_in <= 4096: one spread unit per lane) of a q4k_early_kernel launch that
// also holds Q4_K parts (q / k with a Q6_K v): the lane's 128 six-bit values are assembled into
// bytes before the wait, the dots and sums after it. Same integers, float steps and shuffle tree
// as gemv_kernel's spread Q6_K rows (bit-equal).
__device__ __forceinline__ void q6k_early_row(const GemvPart& P, int64_t r, const XRef& x, int lane, bool early) {
  if (r >= P.n_out) {
    BRISK_PDL_ENTER();
    return;
  }
  const int64_t n_units = x.n_in / 128;
  const bool ok = lane < n_units;  // a block's 2 lanes alike (n_units is even)
  const int p = lane & 1;
  const RowRef row{.qs = P.w + size_t(r) * P.L.qs_row, .sc = P.w + P.L.sc_offset + size_t(r) * P.L.sc_row};
  uint32_t q[32];  // 6-bit values: words 4 (4 h + qq) + k hold elements 128 h + 32 qq + 16 p + 4 k ..
  uint4 scw;
  float d = 0.0f;
  auto load_decode = [&] {
    UnitQ6kSpread::Raw raw;
    if (ok) {
      UnitQ6kSpread::load(row, lane, raw);
    } else {
      raw.l[0] = raw.l[1] = raw.l[2] = raw.l[3] = raw.hq[0] = raw.hq[1] = raw.sc = make_uint4(0, 0, 0, 0);
      raw.d = 0.0f;
    }
    const uint32_t* L = reinterpret_cast<const uint32_t*>(raw.l);
    const uint32_t* H = reinterpret_cast<const uint32_t*>(raw.hq);
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int qq = 0; qq < 4; ++qq)
#pragma unroll
        for (int k = 0; k < 4; ++k)
          q[4 * (4 * h + qq) + k] = ((L[4 * (2 * h + (qq & 1)) + k] >> (4 * (qq >> 1))) & 0x0f0f0f0fu) |
                                    (((H[4 * h + k] >> (2 * qq)) & 0x03030303u) << 4);
    scw = raw.sc;
    d = raw.d;
  };
  if (early) load_decode();
  BRISK_PDL_ENTER();
  if (!early) load_decode();
  const int64_t u = ok ? lane : 0;  // lanes without a unit read unit 0's activations, drop the result
  const int4* xq = reinterpret_cast<const int4*>(x.q + 256 * (u >> 1) + 16 * p);
  const uint32_t* S = reinterpret_cast<const uint32_t*>(&scw);
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
        sd = __dp4a(int(q[4 * (4 * h + qq) + k]), X[k], sd);
        bx = __dp4a(0x01010101, X[k], bx);
      }
      const int sb = 8 * h + 2 * qq + p;
      const int scale = int(int8_t(uint8_t(S[sb >> 2] >> (8 * (sb & 3)))));
      isum += scale * (sd - 32 * bx);
    }
  }
  isum += __shfl_xor_sync(0xffffffffu, isum, 1);
  float acc = 0.0f;
  if (ok && p == 0) acc += __fmul_rn(__fmul_rn(d, x.d[u >> 1]), float(isum));
  finish_row(P, r, acc, lane);
}

// The part of a launch that this block works on, and the block's index within that part.
__device__ __forceinline__ int block_part(const GemvParts& parts, unsigned& b_local) {
  int m = 0;
#pragma unroll
  for (int i = 0; i + 1 < kMaxParts; ++i)
    if (i + 1 < parts.n && blockIdx.x >= parts.p[i].block_end) m = i + 1;
  b_local = blockIdx.x - (m > 0 ? parts.p[m - 1].block_end : 0u);
  return m;
}

// One pass of a lane over a spread Q4_K row (units 64 pass + 32 k + lane, k = 0, 1): the raw
// loads, their decoding, and the dots added to acc (lanes without a unit read unit j's
// activations, always present, and drop the result; every lane takes part in the shuffles).
__device__ __forceinline__ bool q4k_load_unit(const RowRef& row, int64_t n_units, int64_t u, UnitQ4kSpread::Raw& raw) {
  const bool ok = u < n_units;  // a block's 4 lanes alike
  if (ok) {
    UnitQ4kSpread::load(row, u, raw);
  } else {
    raw.h = raw.a = raw.b = make_uint4(0, 0, 0, 0);
  }
  return ok;
}
__device__ __forceinline__ void q4k_load_pass(const RowRef& row, int64_t n_units, int64_t pass, int lane, bool ok[2],
                                              UnitQ4kSpread::Raw raw[2]) {
#pragma unroll
  for (int k = 0; k < 2; ++k) ok[k] = q4k_load_unit(row, n_units, pass * 64 + 32 * k + lane, raw[k]);
}
// Loads and decodes unit by unit (the order q4k_early_kernel's registers are fitted to).
__device__ __forceinline__ void q4k_load_decode_pass(const RowRef& row, int64_t n_units, int64_t pass, int lane, bool ok[2],
                                                     Q4kDecoded dec[2]) {
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    UnitQ4kSpread::Raw raw;
    ok[k] = q4k_load_unit(row, n_units, pass * 64 + 32 * k + lane, raw);
    q4k_decode(raw, (lane & 3) >> 1, dec[k]);
  }
}
__device__ __forceinline__ void q4k_decode_pass(const UnitQ4kSpread::Raw raw[2], int lane, Q4kDecoded dec[2]) {
#pragma unroll
  for (int k = 0; k < 2; ++k) q4k_decode(raw[k], (lane & 3) >> 1, dec[k]);
}
__device__ __forceinline__ float q4k_dot_pass(const Q4kDecoded dec[2], const bool ok[2], const XRef& x, int64_t pass,
                                              int lane, float acc) {
  const int j = lane & 3, jq = j >> 1, hh = j & 1;
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int64_t u = ok[k] ? pass * 64 + 32 * k + lane : j;
    const int8_t* xb = x.q + 256 * (u >> 2) + 16 * hh + 64 * jq;
    const int4 xa0 = ld_x(xb), xa1 = ld_x(xb + 32), xb0 = ld_x(xb + 128), xb1 = ld_x(xb + 160);
    const float xd = x.d[u >> 2];
    const Q4kDecoded& w = dec[k];
    const int sa_lo = dp4a_us4(w.alo, xa0), sa_hi = dp4a_us4(w.ahi, xa1) >> 4;
    const int sb_lo = dp4a_us4(w.blo, xb0), sb_hi = dp4a_us4(w.bhi, xb1) >> 4;
    const int ba_lo = sum16(xa0, 0), ba_hi = sum16(xa1, 0), bb_lo = sum16(xb0, 0), bb_hi = sum16(xb1, 0);
    int isum = int(w.sc & 0xffu) * sa_lo + int((w.sc >> 8) & 0xffu) * sa_hi + int((w.sc >> 16) & 0xffu) * sb_lo +
               int(w.sc >> 24) * sb_hi;
    int msum = int(w.mn & 0xffu) * ba_lo + int((w.mn >> 8) & 0xffu) * ba_hi + int((w.mn >> 16) & 0xffu) * bb_lo +
               int(w.mn >> 24) * bb_hi;
    isum += __shfl_xor_sync(0xffffffffu, isum, 1);
    msum += __shfl_xor_sync(0xffffffffu, msum, 1);
    isum += __shfl_xor_sync(0xffffffffu, isum, 2);
    msum += __shfl_xor_sync(0xffffffffu, msum, 2);
    if (ok[k] && j == 0)
      acc += __fsub_rn(__fmul_rn(__fmul_rn(w.d, xd), float(isum)), __fmul_rn(__fmul_rn(w.dmin, xd), float(msum)));
  }
  return acc;
}

template <bool kMixed = false, bool kPasses = false>
__global__ void __launch_bounds__(32 * kMaxWarps, 4) q4k_early_kernel(GemvParts parts, XRef x, unsigned q6k_parts, bool early) {
  unsigned b_local;
  const int m = block_part(parts, b_local);
  const GemvPart& P = parts.p[m];
  const int lane = threadIdx.x & 31;
  const int64_t r = int64_t(b_local) * (blockDim.x / 32) + (threadIdx.x >> 5);
  if (kMixed && ((q6k_parts >> m) & 1u)) {  // block-uniform
    q6k_early_row(P, r, x, lane, early);
    return;
  }
  if (r >= P.n_out) {  // whole warps leave together
    BRISK_PDL_ENTER();
    return;
  }
  const int64_t n_units = x.n_in / 64;
  const RowRef row{.qs = P.w + size_t(r) * P.L.qs_row, .sc = nullptr};
  bool ok[2];
  Q4kDecoded dec[2];
  if (early) q4k_load_decode_pass(row, n_units, 0, lane, ok, dec);
  BRISK_PDL_ENTER();
  if (!early) q4k_load_decode_pass(row, n_units, 0, lane, ok, dec);
  float acc = q4k_dot_pass(dec, ok, x, 0, lane, 0.0f);
  // kPasses: the row's further passes in turn, adding to the same sums in the same lane order
  // as the spread kernel's unsplit rows.
  if constexpr (kPasses) {
    for (int64_t pass = 1; pass * 64 < n_units; ++pass) {
      q4k_load_decode_pass(row, n_units, pass, lane, ok, dec);
      acc = q4k_dot_pass(dec, ok, x, pass, lane, acc);
    }
  }
  finish_row(P, r, acc, lane);
}

// One-token one-pass K-quant rows two per warp (rows 2 w and 2 w + 1 of a part), for launches
// whose rows at one per warp take more than one wave of q4k_early_kernel (64 registers, 8 blocks
// of 4 warps per multiprocessor) and whose pairs fit in one wave of this kernel (80 registers, 6
// blocks): Llama-3.1-8B's q / k / v, 6144 rows of 4096, are 1536 blocks, 1.45 waves of the one
// and 768 blocks, one wave, of the other, so no warp waits for a slot that a warp of the first
// wave frees. Before the dependent-launch wait a lane loads its units of both rows (raw: the
// registers of two decoded rows do not fit); after it, each row is decoded and dotted as
// q4k_early_kernel / q6k_early_row compute it (same integers, float steps and shuffle tree:
// the same bits). kMixed: parts whose bit is set in q6k_parts are Q6_K rows (a Q4_K_M layer's
// Q6_K v with its Q4_K q / k).
__device__ __forceinline__ void q4k_pair_rows(const GemvPart& P, int64_t r, const XRef& x, int lane, bool early) {
  if (r >= P.n_out) {  // whole warps leave together
    BRISK_PDL_ENTER();
    return;
  }
  const bool has_b = r + 1 < P.n_out;  // warp-uniform; without a second row, the first is read twice
  const int64_t n_units = x.n_in / 64;
  const RowRef row_a{.qs = P.w + size_t(r) * P.L.qs_row, .sc = nullptr};
  const RowRef row_b{.qs = has_b ? row_a.qs + P.L.qs_row : row_a.qs, .sc = nullptr};
  bool ok[2];
  UnitQ4kSpread::Raw raw_a[2], raw_b[2];
  if (early) {
    q4k_load_pass(row_a, n_units, 0, lane, ok, raw_a);
    q4k_load_pass(row_b, n_units, 0, lane, ok, raw_b);
  }
  BRISK_PDL_ENTER();
  if (!early) {
    q4k_load_pass(row_a, n_units, 0, lane, ok, raw_a);
    q4k_load_pass(row_b, n_units, 0, lane, ok, raw_b);
  }
  Q4kDecoded dec[2];
  q4k_decode_pass(raw_a, lane, dec);
  finish_row(P, r, q4k_dot_pass(dec, ok, x, 0, lane, 0.0f), lane);
  q4k_decode_pass(raw_b, lane, dec);
  const float acc_b = q4k_dot_pass(dec, ok, x, 0, lane, 0.0f);
  if (has_b) finish_row(P, r + 1, acc_b, lane);
}
__device__ __forceinline__ void q6k_pair_rows(const GemvPart& P, int64_t r, const XRef& x, int lane, bool early) {
  if (r >= P.n_out) {
    BRISK_PDL_ENTER();
    return;
  }
  const bool has_b = r + 1 < P.n_out;
  const int64_t n_units = x.n_in / 128;
  const bool ok = lane < n_units;  // a block's 2 lanes alike (n_units is even)
  const RowRef row_a{.qs = P.w + size_t(r) * P.L.qs_row, .sc = P.w + P.L.sc_offset + size_t(r) * P.L.sc_row};
  const RowRef row_b = has_b ? RowRef{.qs = row_a.qs + P.L.qs_row, .sc = row_a.sc + P.L.sc_row} : row_a;
  UnitQ6kSpread::Raw raw_a, raw_b;
  auto load = [&] {
    if (ok) {
      UnitQ6kSpread::load(row_a, lane, raw_a);
      UnitQ6kSpread::load(row_b, lane, raw_b);
    } else {
      raw_a.l[0] = raw_a.l[1] = raw_a.l[2] = raw_a.l[3] = raw_a.hq[0] = raw_a.hq[1] = raw_a.sc = make_uint4(0, 0, 0, 0);
      raw_a.d = 0.0f;
      raw_b = raw_a;
    }
  };
  if (early) load();
  BRISK_PDL_ENTER();
  if (!early) load();
  const int64_t u = ok ? lane : 0;  // lanes without a unit read unit 0's activations, drop the result
  const float va = UnitQ6kSpread::dot(raw_a, x, 0, u);
  finish_row(P, r, ok ? 0.0f + va : 0.0f, lane);
  const float vb = UnitQ6kSpread::dot(raw_b, x, 0, u);
  if (has_b) finish_row(P, r + 1, ok ? 0.0f + vb : 0.0f, lane);
}

template <bool kMixed = false>
__global__ void __launch_bounds__(32 * 4, 6) q4k_pair_kernel(GemvParts parts, XRef x, unsigned q6k_parts, bool early) {
  unsigned b_local;
  const int m = block_part(parts, b_local);
  const GemvPart& P = parts.p[m];
  const int lane = threadIdx.x & 31;
  const int64_t r = (int64_t(b_local) * (blockDim.x / 32) + (threadIdx.x >> 5)) * 2;
  if (kMixed && ((q6k_parts >> m) & 1u))  // block-uniform
    q6k_pair_rows(P, r, x, lane, early);
  else
    q4k_pair_rows(P, r, x, lane, early);
}

}  // namespace brisk::cuda
