// The units of the decode GEMV kernels (gemv_kernel.cuh, moe_gemv.cu): per weight format, the
// piece of a row one lane loads at once (a Q8_0 / Q4_0 block, a quarter Q4_K / Q5_K block, half
// a Q6_K block, 16 bytes of F32 / F16 / BF16; the spread K-quant layouts), how it is loaded and
// how it is dotted with activations (dp4a integer sums scaled as the CPU's vec_dot, or float
// FMAs); and the launch's view of its parts and activations.
// A quantized unit's value is rounded products (__fmul_rn) that the kernels add to their sums:
// with a plain product the compiler fuses it into the caller's add in some instantiations and
// not in others (gemv_kernel<Q8_0 / Q4_0, NT = 1> fused every token's, NT = 2..8 all but one),
// so a token's sums would depend on how many tokens share the launch.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/kernels.h"

namespace brisk::cuda {

constexpr int kMaxWarps = 8;
constexpr int kMaxTok = 8;

struct RowRef {
  const uint8_t* qs;  // this row's quants
  const uint8_t* sc;  // this row's scales (repacked formats)
};

constexpr int kMaxParts = kMaxMatmulParts;
struct GemvPart {
  float* out;            // row t0 of the part's output
  int64_t out_stride;
  const uint8_t* w;
  DevLayout L;
  int64_t n_out;
  const float* bias;
  unsigned block_end;    // blocks of this part and the ones before it
  const float* res;      // residual row t0 (or null): sum[t, r] = res[t, r] + out[t, r] too
  int64_t res_stride;
  float* sum;
  int64_t sum_stride;
};
struct GemvParts {
  GemvPart p[kMaxParts];
  int n;
};

struct XRef {
  const int8_t* q;   // [NT, n_in] quantized activations
  const float* d;    // [NT, n_in / block] their scales
  const float* f;    // [NT, x_stride] float activations
  int64_t n_in;
  int64_t x_stride;
};

__device__ __forceinline__ uint4 ld_stream(const void* p) { return __ldcs(reinterpret_cast<const uint4*>(p)); }
__device__ __forceinline__ int4 ld_x(const int8_t* p) { return *reinterpret_cast<const int4*>(p); }

__device__ __forceinline__ int dot16(const uint4 w, const int4 x, int s) {
  s = __dp4a(int(w.x), x.x, s);
  s = __dp4a(int(w.y), x.y, s);
  s = __dp4a(int(w.z), x.z, s);
  return __dp4a(int(w.w), x.w, s);
}
__device__ __forceinline__ int sum16(const int4 x, int s) {
  constexpr int kOnes = 0x01010101;
  s = __dp4a(kOnes, x.x, s);
  s = __dp4a(kOnes, x.y, s);
  s = __dp4a(kOnes, x.z, s);
  return __dp4a(kOnes, x.w, s);
}
__device__ __forceinline__ uint4 nib(const uint4 w, int shift) {
  constexpr uint32_t m = 0x0f0f0f0fu;
  return make_uint4((w.x >> shift) & m, (w.y >> shift) & m, (w.z >> shift) & m, (w.w >> shift) & m);
}
__device__ __forceinline__ float half_at(const uint8_t* p, int64_t i) {
  return __half2float(reinterpret_cast<const __half*>(p)[i]);
}

template <DevFormat F>
struct Unit;
// Elements per unit of Unit<F> (host and device).
template <DevFormat F>
constexpr int64_t unit_elems() {
  return F == DevFormat::f32 ? 4 : F == DevFormat::f16 || F == DevFormat::bf16 ? 8
       : F == DevFormat::q4_k || F == DevFormat::q5_k ? 64 : F == DevFormat::q6_k ? 128 : 32;
}

// Q8_0: a unit is one block of 32 (32 bytes of quants, one fp16 scale).
template <>
struct Unit<DevFormat::q8_0> {
  static constexpr int kLanes = 32;
  static constexpr int kUnroll = 4;
  static constexpr bool kInt = true;
  struct Raw { uint4 a, b; float d; };
  static __device__ int64_t count(int64_t n_in) { return n_in / 32; }
  static __device__ void load(const RowRef& w, int64_t u, Raw& r) {
    r.a = ld_stream(w.qs + 32 * u);
    r.b = ld_stream(w.qs + 32 * u + 16);
    r.d = half_at(w.sc, u);
  }
  static __device__ float dot(const Raw& r, const XRef& x, int t, int64_t u) {
    const int8_t* xq = x.q + t * x.n_in + 32 * u;
    int s = dot16(r.a, ld_x(xq), 0);
    s = dot16(r.b, ld_x(xq + 16), s);
    return __fmul_rn(float(s), __fmul_rn(r.d, x.d[t * (x.n_in / 32) + u]));
  }
};

// Q4_0: a unit is one block of 32 (16 bytes of nibbles, one fp16 scale); the offset of 8 is
// taken out of the integer sum: sum((q - 8) x) = sum(q x) - 8 sum(x).
template <>
struct Unit<DevFormat::q4_0> {
  static constexpr int kLanes = 16;
  static constexpr int kUnroll = 8;
  static constexpr bool kInt = true;
  struct Raw { uint4 a; float d; };
  static __device__ int64_t count(int64_t n_in) { return n_in / 32; }
  static __device__ void load(const RowRef& w, int64_t u, Raw& r) {
    r.a = ld_stream(w.qs + 16 * u);
    r.d = half_at(w.sc, u);
  }
  static __device__ float dot(const Raw& r, const XRef& x, int t, int64_t u) {
    const int8_t* xq = x.q + t * x.n_in + 32 * u;
    const int4 x0 = ld_x(xq), x1 = ld_x(xq + 16);
    int s = dot16(nib(r.a, 0), x0, 0);
    s = dot16(nib(r.a, 4), x1, s);
    s -= 8 * sum16(x1, sum16(x0, 0));
    return __fmul_rn(float(s), __fmul_rn(r.d, x.d[t * (x.n_in / 32) + u]));
  }
};

// Q5_0: a unit is one block of 32 (16 bytes of nibbles as Q4_0; qh and the fp16 scale in one
// 8-byte load). The high bits are spread into bit 4 of each element's byte, so the integer sum
// is sum((q - 16) x) = sum(q x) - 16 sum(x) over the same integers as the CPU's vec_dot.
template <>
struct Unit<DevFormat::q5_0> {
  static constexpr int kLanes = 16;
  static constexpr int kUnroll = 8;
  static constexpr bool kInt = true;
  struct Raw { uint4 a; uint32_t h; float d; };
  static __device__ int64_t count(int64_t n_in) { return n_in / 32; }
  static __device__ void load(const RowRef& w, int64_t u, Raw& r) {
    r.a = ld_stream(w.qs + 16 * u);
    const uint2 s = __ldcs(reinterpret_cast<const uint2*>(w.sc) + u);
    r.h = s.x;
    r.d = __half2float(__ushort_as_half(static_cast<unsigned short>(s.y & 0xffffu)));
  }
  // Bits 4i .. 4i + 3 of h as bit 4 of the four bytes of a word.
  static __device__ __forceinline__ uint32_t high4(uint32_t h, int i) {
    const uint32_t b = (h >> (4 * i)) & 0xFu;
    return (b & 1u) << 4 | (b & 2u) << 11 | (b & 4u) << 18 | (b & 8u) << 25;
  }
  static __device__ float dot(const Raw& r, const XRef& x, int t, int64_t u) {
    const int8_t* xq = x.q + t * x.n_in + 32 * u;
    const int4 x0 = ld_x(xq), x1 = ld_x(xq + 16);
    uint4 lo = nib(r.a, 0), hi = nib(r.a, 4);
    lo.x |= high4(r.h, 0);
    lo.y |= high4(r.h, 1);
    lo.z |= high4(r.h, 2);
    lo.w |= high4(r.h, 3);
    hi.x |= high4(r.h, 4);
    hi.y |= high4(r.h, 5);
    hi.z |= high4(r.h, 6);
    hi.w |= high4(r.h, 7);
    int s = dot16(lo, x0, 0);
    s = dot16(hi, x1, s);
    s -= 16 * sum16(x1, sum16(x0, 0));
    return __fmul_rn(float(s), __fmul_rn(r.d, x.d[t * (x.n_in / 32) + u]));
  }
};

// Elements per block of the quantized activations that Unit<F> takes (Q8_0 or Q8_K).
template <DevFormat F>
__host__ __device__ constexpr int64_t act_block() {
  return F == DevFormat::q8_0 || F == DevFormat::q4_0 || F == DevFormat::q5_0 ? 32 : 256;
}

// Q4_K (stored blocks): a unit is a quarter block j (64 elements: 32 bytes of nibbles, low
// nibbles sub-block 2j, high 2j+1) plus the 16-byte block header (d, dmin, scales), which
// the four lanes of a block load alike. Integer sums are combined over the 4 lanes.
template <>
struct Unit<DevFormat::q4_k> {
  // 32 lanes x 2 units (half a 4096-wide row per pass) measured 45% of the copy bandwidth for
  // the Q4_K_M matmuls against 39% with 16 x 4 and 31-41% with 8 x 4/8, 32 x 4, 16 x 8.
  static constexpr int kLanes = 32;
  static constexpr int kUnroll = 2;
  static constexpr bool kInt = true;
  struct Raw { uint4 h, a, b; };
  static __device__ int64_t count(int64_t n_in) { return n_in / 64; }
  static __device__ void load(const RowRef& w, int64_t u, Raw& r) {
    const uint8_t* blk = w.qs + 144 * (u >> 2);
    r.h = ld_stream(blk);
    r.a = ld_stream(blk + 16 + 32 * (u & 3));
    r.b = ld_stream(blk + 32 + 32 * (u & 3));
  }
  static __device__ float dot(const Raw& r, const XRef& x, int t, int64_t u) {
    return dot_quarter(r.h, x, t, u, nib(r.a, 0), nib(r.b, 0), nib(r.a, 4), nib(r.b, 4));
  }
  // Quarter u & 3 of a block from its values (16 bytes each: elements 0..15 and 16..31 of the
  // low sub-block, then of the high one) and header h; Q5_K's units share it.
  static __device__ float dot_quarter(const uint4& h, const XRef& x, int t, int64_t u, uint4 lo_a, uint4 lo_b,
                                      uint4 hi_a, uint4 hi_b) {
    const int j = int(u & 3);
    const int8_t* xq = x.q + t * x.n_in + 64 * u;
    const int4 x0 = ld_x(xq), x1 = ld_x(xq + 16), x2 = ld_x(xq + 32), x3 = ld_x(xq + 48);
    const int s_lo = dot16(lo_b, x1, dot16(lo_a, x0, 0));
    const int s_hi = dot16(hi_b, x3, dot16(hi_a, x2, 0));
    const int b_lo = sum16(x1, sum16(x0, 0)), b_hi = sum16(x3, sum16(x2, 0));
    int sc_lo, m_lo, sc_hi, m_hi;
    scale_min(h, 2 * j, sc_lo, m_lo);
    scale_min(h, 2 * j + 1, sc_hi, m_hi);
    return finish(h, x, t, u, sc_lo * s_lo + sc_hi * s_hi, m_lo * b_lo + m_hi * b_hi);
  }
  // Scale and min of sub-block jj (0..7) from the 6-bit packing of the header's bytes q[0..11],
  // which are words h.y, h.z, h.w (no local array).
  static __device__ void scale_min(const uint4& h, int jj, int& sc, int& m) {
    auto qb = [&](int i) -> int {
      const uint32_t wd = i < 4 ? h.y : i < 8 ? h.z : h.w;
      return int((wd >> (8 * (i & 3))) & 0xffu);
    };
    if (jj < 4) {
      sc = qb(jj) & 63;
      m = qb(jj + 4) & 63;
    } else {
      sc = (qb(jj + 4) & 0xF) | ((qb(jj - 4) >> 6) << 4);
      m = (qb(jj + 4) >> 4) | ((qb(jj) >> 6) << 4);
    }
  }
  // The block's result from each lane's scaled sums: summed over the block's 4 lanes, returned
  // by its lane 0 (0 from the others).
  static __device__ float finish(const uint4& h, const XRef& x, int t, int64_t u, int isum, int msum) {
    isum += __shfl_xor_sync(0xffffffffu, isum, 1);
    msum += __shfl_xor_sync(0xffffffffu, msum, 1);
    isum += __shfl_xor_sync(0xffffffffu, isum, 2);
    msum += __shfl_xor_sync(0xffffffffu, msum, 2);
    if ((u & 3) != 0) return 0.0f;
    const float xd = x.d[t * (x.n_in / 256) + (u >> 2)];
    const float d = half_bits_to_f32(uint16_t(h.x & 0xffffu)), dmin = half_bits_to_f32(uint16_t(h.x >> 16));
    return __fsub_rn(__fmul_rn(__fmul_rn(d, xd), float(isum)), __fmul_rn(__fmul_rn(dmin, xd), float(msum)));
  }
};

// Q5_K (stored blocks of 176 bytes: the Q4_K header, qh[32], then Q4_K's nibbles): a unit is a
// quarter block j as for Q4_K, plus all 32 qh bytes, whose bits 2j and 2j + 1 are the fifth bit
// (16) of its low and high nibbles. The block's integer sums and their scaling are Q4_K's (the
// CPU's vec_dot has the same form for both).
template <>
struct Unit<DevFormat::q5_k> {
  static constexpr int kLanes = 32;
  static constexpr int kUnroll = 2;
  static constexpr bool kInt = true;
  struct Raw { uint4 h, h0, h1, a, b; };
  static __device__ int64_t count(int64_t n_in) { return n_in / 64; }
  static __device__ void load(const RowRef& w, int64_t u, Raw& r) {
    const uint8_t* blk = w.qs + 176 * (u >> 2);
    r.h = ld_stream(blk);
    r.h0 = ld_stream(blk + 16);
    r.h1 = ld_stream(blk + 32);
    r.a = ld_stream(blk + 48 + 32 * (u & 3));
    r.b = ld_stream(blk + 64 + 32 * (u & 3));
  }
  // The 5-bit values of 16 elements: nibbles of w (shift 0 / 4) with bit `bit` of each qh byte.
  static __device__ uint4 q5(const uint4 w, int shift, const uint4 qh, int bit) {
    constexpr uint32_t m = 0x0f0f0f0fu, one = 0x01010101u;
    return make_uint4(((w.x >> shift) & m) | (((qh.x >> bit) & one) << 4), ((w.y >> shift) & m) | (((qh.y >> bit) & one) << 4),
                      ((w.z >> shift) & m) | (((qh.z >> bit) & one) << 4), ((w.w >> shift) & m) | (((qh.w >> bit) & one) << 4));
  }
  static __device__ float dot(const Raw& r, const XRef& x, int t, int64_t u) {
    const int j = int(u & 3);
    return Unit<DevFormat::q4_k>::dot_quarter(r.h, x, t, u, q5(r.a, 0, r.h0, 2 * j), q5(r.b, 0, r.h1, 2 * j),
                                              q5(r.a, 4, r.h0, 2 * j + 1), q5(r.b, 4, r.h1, 2 * j + 1));
  }
};

// Q4_K with the block's bytes spread over its 4 lanes so that each load instruction of a warp
// reads whole 32-byte sectors: lane j takes the 16-byte quant chunks j and j + 4 (chunk c holds
// the low nibbles of elements 32 (c / 2) * 2 + 16 (c % 2) .. + 16 of sub-block 2 (c / 2) and the
// high nibbles of sub-block 2 (c / 2) + 1), where Unit<q4_k> gives lane j chunks 2j and 2j + 1.
// Per warp instruction the activation loads then cover 16 full sectors (512 contiguous bytes of
// 4 lines) instead of 32 half-used sectors of 16 lines, and the quant loads 64 contiguous bytes
// per block. The block's integer sums are the same integers (summed in another order, exactly),
// so results equal Unit<q4_k>'s.
struct UnitQ4kSpread : Unit<DevFormat::q4_k> {
  static __device__ void load(const RowRef& w, int64_t u, Raw& r) {
    const uint8_t* blk = w.qs + 144 * (u >> 2);
    const int j = int(u & 3);
    r.h = ld_stream(blk);
    r.a = ld_stream(blk + 16 + 16 * j);
    r.b = ld_stream(blk + 80 + 16 * j);
  }
  static __device__ float dot(const Raw& r, const XRef& x, int t, int64_t u) {
    return dot_chunks(r.h, x, t, u, nib(r.a, 0), nib(r.a, 4), nib(r.b, 0), nib(r.b, 4));
  }
  // The lane's chunks j and j + 4 from their values (16 bytes each: the low and high sub-block
  // of chunk j, then of chunk j + 4) and header h; Q5_K's spread units share it.
  static __device__ float dot_chunks(const uint4& hd, const XRef& x, int t, int64_t u, uint4 a_lo, uint4 a_hi,
                                     uint4 b_lo, uint4 b_hi) {
    const int j = int(u & 3), jq = j >> 1, h = j & 1;
    const int8_t* xb = x.q + t * x.n_in + 256 * (u >> 2) + 16 * h;
    // Chunk j: sub-blocks 2 jq (low) and 2 jq + 1 (high); chunk j + 4: 2 jq + 4 and 2 jq + 5.
    const int4 xa0 = ld_x(xb + 64 * jq), xa1 = ld_x(xb + 64 * jq + 32);
    const int4 xb0 = ld_x(xb + 64 * jq + 128), xb1 = ld_x(xb + 64 * jq + 160);
    const int sa_lo = dot16(a_lo, xa0, 0), sa_hi = dot16(a_hi, xa1, 0);
    const int sb_lo = dot16(b_lo, xb0, 0), sb_hi = dot16(b_hi, xb1, 0);
    const int ba_lo = sum16(xa0, 0), ba_hi = sum16(xa1, 0), bb_lo = sum16(xb0, 0), bb_hi = sum16(xb1, 0);
    // Sub-blocks 2 jq, 2 jq + 1 (chunk j) and 2 jq + 4, 2 jq + 5 (chunk j + 4).
    int sc_a0, m_a0, sc_a1, m_a1, sc_b0, m_b0, sc_b1, m_b1;
    scale_min(hd, 2 * jq, sc_a0, m_a0);
    scale_min(hd, 2 * jq + 1, sc_a1, m_a1);
    scale_min(hd, 2 * jq + 4, sc_b0, m_b0);
    scale_min(hd, 2 * jq + 5, sc_b1, m_b1);
    return finish(hd, x, t, u, sc_a0 * sa_lo + sc_a1 * sa_hi + sc_b0 * sb_lo + sc_b1 * sb_hi,
                  m_a0 * ba_lo + m_a1 * ba_hi + m_b0 * bb_lo + m_b1 * bb_hi);
  }
};

// Q5_K with the spread lanes of UnitQ4kSpread: lane j takes the quant chunks j and j + 4, whose
// elements all sit at 16 (j % 2) .. + 15 of their sub-blocks, so the lane needs only those 16 qh
// bytes (Unit<q5_k> loads all 32). Same integer sums as Unit<q5_k>: results equal its.
struct UnitQ5kSpread : Unit<DevFormat::q5_k> {
  struct Raw { uint4 h, hq, a, b; };
  static __device__ void load(const RowRef& w, int64_t u, Raw& r) {
    const uint8_t* blk = w.qs + 176 * (u >> 2);
    const int j = int(u & 3);
    r.h = ld_stream(blk);
    r.hq = ld_stream(blk + 16 + 16 * (j & 1));
    r.a = ld_stream(blk + 48 + 16 * j);
    r.b = ld_stream(blk + 112 + 16 * j);
  }
  static __device__ float dot(const Raw& r, const XRef& x, int t, int64_t u) {
    const int jq = int(u & 3) >> 1;
    return UnitQ4kSpread::dot_chunks(r.h, x, t, u, q5(r.a, 0, r.hq, 2 * jq), q5(r.a, 4, r.hq, 2 * jq + 1),
                                     q5(r.b, 0, r.hq, 2 * jq + 4), q5(r.b, 4, r.hq, 2 * jq + 5));
  }
};

// Q6_K (device blocks of 208 bytes + fp16 d): a unit is half a block (128 elements: 64 bytes
// of ql, 32 of qh, 8 scales). Integer sums are combined over the 2 lanes of a block.
template <>
struct Unit<DevFormat::q6_k> {
  // 32 x 1 measured slightly faster than 16 x 2 (and than 8 x 2/4, 32 x 2, 16 x 4).
  static constexpr int kLanes = 32;
  static constexpr int kUnroll = 1;
  static constexpr bool kInt = true;
  struct Raw { uint4 l[4], hq[2]; uint2 sc; float d; };
  static __device__ int64_t count(int64_t n_in) { return n_in / 128; }
  static __device__ void load(const RowRef& w, int64_t u, Raw& r) {
    const uint8_t* blk = w.qs + 208 * (u >> 1);
    const int h = int(u & 1);
#pragma unroll
    for (int k = 0; k < 4; ++k) r.l[k] = ld_stream(blk + 64 * h + 16 * k);
    r.hq[0] = ld_stream(blk + 128 + 32 * h);
    r.hq[1] = ld_stream(blk + 144 + 32 * h);
    r.sc = __ldcs(reinterpret_cast<const uint2*>(blk + 192 + 8 * h));
    r.d = half_at(w.sc, u >> 1);
  }
  static __device__ float dot(const Raw& r, const XRef& x, int t, int64_t u) {
    const int4* xq = reinterpret_cast<const int4*>(x.q + t * x.n_in + 128 * u);
    int4 xv4[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) xv4[k] = xq[k];
    const int* X = reinterpret_cast<const int*>(xv4);               // x words [32]
    const uint32_t* L = reinterpret_cast<const uint32_t*>(r.l);   // ql words [16]
    const uint32_t* H = reinterpret_cast<const uint32_t*>(r.hq);  // qh words [8]
    const int8_t* S = reinterpret_cast<const int8_t*>(&r.sc);     // scales [8]
    int isum = 0;
#pragma unroll
    for (int q = 0; q < 4; ++q) {        // quarter: elements 32q .. 32q + 31 of the half
#pragma unroll
      for (int g = 0; g < 2; ++g) {      // 16-element group with its own scale
        int s = 0, bx = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) {    // 4 elements l = 16g + 4k ..
          const int wi = 4 * g + k;
          const uint32_t lo = (L[8 * (q & 1) + wi] >> (4 * (q >> 1))) & 0x0f0f0f0fu;
          const uint32_t hi = ((H[wi] >> (2 * q)) & 0x03030303u) << 4;
          const int xv = X[8 * q + wi];
          s = __dp4a(int(lo | hi), xv, s);
          bx = __dp4a(0x01010101, xv, bx);
        }
        isum += int(S[g + 2 * q]) * (s - 32 * bx);
      }
    }
    isum += __shfl_xor_sync(0xffffffffu, isum, 1);
    if (u & 1) return 0.0f;
    const float xd = x.d[t * (x.n_in / 256) + (u >> 1)];
    return __fmul_rn(__fmul_rn(r.d, xd), float(isum));
  }
};

// Q6_K with each block's bytes spread over its 2 lanes so that each load instruction of a warp
// reads whole 32-byte sectors: lane p takes elements 16 p .. 16 p + 15 of every 32-element
// quarter of both halves (the ql bytes 32 k + 16 p .. + 15 for k = 0..3 and the qh bytes
// 128 + 32 m + 16 p .. + 15 for m = 0, 1; all 16 scale bytes), where Unit<q6_k> gives lane h the
// half h (ql bytes 64 h + 16 k, each load instruction then half of 32 sectors). The activation
// loads cover 16 full sectors per instruction too. The block's integer sum is the same integer
// (the same terms, grouped by lane differently), so results equal Unit<q6_k>'s.
struct UnitQ6kSpread : Unit<DevFormat::q6_k> {
  struct Raw { uint4 l[4], hq[2], sc; float d; };
  static __device__ void load(const RowRef& w, int64_t u, Raw& r) {
    const uint8_t* blk = w.qs + 208 * (u >> 1);
    const int p = int(u & 1);
#pragma unroll
    for (int k = 0; k < 4; ++k) r.l[k] = ld_stream(blk + 32 * k + 16 * p);
    r.hq[0] = ld_stream(blk + 128 + 16 * p);
    r.hq[1] = ld_stream(blk + 160 + 16 * p);
    r.sc = ld_stream(blk + 192);
    r.d = half_at(w.sc, u >> 1);
  }
  static __device__ float dot(const Raw& r, const XRef& x, int t, int64_t u) {
    const int p = int(u & 1);
    const int4* xq = reinterpret_cast<const int4*>(x.q + t * x.n_in + 256 * (u >> 1) + 16 * p);
    const uint32_t* L = reinterpret_cast<const uint32_t*>(r.l);   // ql words [16]: chunk 2 h + (q & 1)
    const uint32_t* H = reinterpret_cast<const uint32_t*>(r.hq);  // qh words [8]: chunk h
    const uint32_t* S = reinterpret_cast<const uint32_t*>(&r.sc);  // scale words [4]
    int isum = 0;
#pragma unroll
    for (int h = 0; h < 2; ++h) {        // half: elements 128 h ..
#pragma unroll
      for (int q = 0; q < 4; ++q) {      // quarter: elements 128 h + 32 q + 16 p .. + 15
        const int4 xv = xq[(128 * h + 32 * q) / 16];
        const int X[4] = {xv.x, xv.y, xv.z, xv.w};
        int s = 0, bx = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const uint32_t lo = (L[4 * (2 * h + (q & 1)) + k] >> (4 * (q >> 1))) & 0x0f0f0f0fu;
          const uint32_t hi = ((H[4 * h + k] >> (2 * q)) & 0x03030303u) << 4;
          s = __dp4a(int(lo | hi), X[k], s);
          bx = __dp4a(0x01010101, X[k], bx);
        }
        const int sb = 8 * h + 2 * q + p;  // scale byte: group p of quarter q of half h
        const int scale = int(int8_t(uint8_t(S[sb >> 2] >> (8 * (sb & 3)))));
        isum += scale * (s - 32 * bx);
      }
    }
    isum += __shfl_xor_sync(0xffffffffu, isum, 1);
    if (u & 1) return 0.0f;
    const float xd = x.d[t * (x.n_in / 256) + (u >> 1)];
    return __fmul_rn(__fmul_rn(r.d, xd), float(isum));
  }
};

// Float formats with rows of any length (FloatAnyUnit): a unit is one element, loaded alone
// (4 or 2 bytes) and dotted with its activation, so rows and activations need only element
// alignment. Chosen by shape where the 16-byte units do not fit: rows whose length is not a
// multiple of the unit's elements, rows or activations not 16-byte aligned (e.g. experts of 20
// F16 columns, or 22 F32 ones). A warp's loads still cover consecutive elements.
template <DevFormat F>
struct FloatAnyUnit {
  static constexpr int kLanes = 32;
  static constexpr int kUnroll = 8;
  static constexpr bool kInt = false;
  struct Raw { float w; };
  static __device__ int64_t count(int64_t n_in) { return n_in; }
  static __device__ void load(const RowRef& w, int64_t u, Raw& r) {
    if constexpr (F == DevFormat::f32) {
      r.w = __ldcs(reinterpret_cast<const float*>(w.qs) + u);
    } else {
      const unsigned short b = __ldcs(reinterpret_cast<const unsigned short*>(w.qs) + u);
      r.w = F == DevFormat::bf16 ? __uint_as_float(uint32_t(b) << 16) : __half2float(__ushort_as_half(b));
    }
  }
  static __device__ float dot(const Raw& r, const XRef& x, int t, int64_t u) { return r.w * x.f[t * x.x_stride + u]; }
};

// The spread lane layout of a K-quant format; for the float formats, one element per unit
// (FloatAnyUnit: rows of any length).
template <DevFormat F>
using SpreadUnit = std::conditional_t<
    F == DevFormat::f32 || F == DevFormat::f16 || F == DevFormat::bf16, FloatAnyUnit<F>,
    std::conditional_t<F == DevFormat::q6_k, UnitQ6kSpread,
                       std::conditional_t<F == DevFormat::q5_k, UnitQ5kSpread, UnitQ4kSpread>>>;

// Float formats: a unit is 16 bytes of weights (8 F16/BF16 or 4 F32 elements).
template <DevFormat F>
struct FloatUnit {
  static constexpr int kLanes = 32;
  static constexpr int kUnroll = 8;
  static constexpr bool kInt = false;
  static constexpr int kElems = F == DevFormat::f32 ? 4 : 8;
  struct Raw { uint4 a; };
  static __device__ int64_t count(int64_t n_in) { return n_in / kElems; }
  static __device__ void load(const RowRef& w, int64_t u, Raw& r) { r.a = ld_stream(w.qs + 16 * u); }
  static __device__ float dot(const Raw& r, const XRef& x, int t, int64_t u) {
    const float* xp = x.f + t * x.x_stride + kElems * u;
    const float4 x0 = *reinterpret_cast<const float4*>(xp);
    if constexpr (F == DevFormat::f32) {
      float s = __uint_as_float(r.a.x) * x0.x;
      s = fmaf(__uint_as_float(r.a.y), x0.y, s);
      s = fmaf(__uint_as_float(r.a.z), x0.z, s);
      return fmaf(__uint_as_float(r.a.w), x0.w, s);
    } else {
      const float4 x1 = *reinterpret_cast<const float4*>(xp + 4);
      const uint32_t w[4] = {r.a.x, r.a.y, r.a.z, r.a.w};
      const float xs[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
      float s = 0.0f;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        float lo, hi;
        if constexpr (F == DevFormat::bf16) {
          lo = __uint_as_float(w[k] << 16);
          hi = __uint_as_float(w[k] & 0xffff0000u);
        } else {
          const __half2 h = *reinterpret_cast<const __half2*>(&w[k]);
          const float2 f = __half22float2(h);
          lo = f.x;
          hi = f.y;
        }
        s = fmaf(lo, xs[2 * k], s);
        s = fmaf(hi, xs[2 * k + 1], s);
      }
      return s;
    }
  }
};
template <> struct Unit<DevFormat::f32> : FloatUnit<DevFormat::f32> {};
template <> struct Unit<DevFormat::f16> : FloatUnit<DevFormat::f16> {};
template <> struct Unit<DevFormat::bf16> : FloatUnit<DevFormat::bf16> {};

}  // namespace brisk::cuda
