// Matmul for decode-sized batches: out[t, r] = dot(W[r, :], x[t, :]) + bias[r], on weights in
// the device layout (dequant.cuh).
//   - kLanes lanes per weight row (32 for Q8_0 / Q4_K / Q6_K / 16-bit formats, 16 for the shorter
//     rows of Q4_0, so each lane has enough loads in flight), up to kMaxWarps warps per
//     block; one-token Q6_K warps take two rows and read each activation unit once for both. A lane owns whole "units" of the row (a Q8_0 / Q4_0 block, a quarter Q4_K block, half a Q6_K block, or 16 bytes of
//     F32/F16/BF16) and issues the 128-bit loads of kUnroll units before any math, so each
//     weight byte is read once, coalesced, and enough bytes are in flight to reach the memory
//     bandwidth; the up to kMaxTok tokens of the launch are accumulated in registers.
//   - Quantized weights meet activations already quantized to the format's vec_dot_type
//     (Q8_0 blocks of 32 or Q8_K blocks of 256, int8 + float scale, act_round.cu): the
//     products are __dp4a integer sums per block, then scaled exactly as the CPU's vec_dot
//     does (float(isum) * (d_w * d_x)); lanes that share a K-quant block add their integer
//     partials with warp shuffles first, so each block's integer sum is the CPU's.
//   - F32 / F16 / BF16 weights take float activations (already rounded through F16 / BF16)
//     and float FMAs.
// The per-lane partial sums are reduced with warp shuffles. Larger batches run as several
// launches of kMaxTok tokens (weights re-read per launch).
// One-token Q8_0 / float / spread Q4_K rows of several passes (down projections: 4096 rows of
// 14336) are split over up to 8 warps of a block that take the row's passes in turn (kSplit):
// a launch with one warp per row is one wave of warps that each wait on 4-7 dependent passes,
// and its tail leaves the memory idle; split, the warps are short and come in several waves
// (Llama-3.1-8B decode: BF16 211 -> 228 tok/s, Q8_0 372 -> 382, Q4_K_M 435 -> 450).
// Q4_K blocks are spread over their lanes so that every warp load reads whole sectors
// (UnitQ4kSpread: Llama-3.1-8B Q4_K_M matmuls at 64% of the copy bandwidth against 58% with
// adjacent chunks), Q6_K blocks likewise (UnitQ6kSpread: the Q6_K output GEMV 157 -> 125 us),
// and a launch can add a residual to its output in the epilogue (launch_matmul_add). One-token
// Q4_K rows load and decode their weights before the dependent-launch wait (q4k_early_kernel),
// two rows per warp where that makes a launch one wave (q4k_pair_kernel).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <type_traits>

#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/launch.cuh"

namespace brisk::cuda {

namespace {

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
    return float(s) * __fmul_rn(r.d, x.d[t * (x.n_in / 32) + u]);
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
    return float(s) * __fmul_rn(r.d, x.d[t * (x.n_in / 32) + u]);
  }
};

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

// The spread lane layout of a K-quant format.
template <DevFormat F>
using SpreadUnit = std::conditional_t<F == DevFormat::q6_k, UnitQ6kSpread,
                                      std::conditional_t<F == DevFormat::q5_k, UnitQ5kSpread, UnitQ4kSpread>>;

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

// With `early` (weights no kernel of the step writes), the first pass's weight loads are
// issued before the dependent-launch wait, so they stream while the previous kernel (the
// producer of x) still runs; x and the bias are read after it.
//
// One launch can serve up to kMaxParts matrices of the same format and row length on the same
// activations (q / k / v, gate / up): blocks [end[i-1], end[i]) take matrix i, every row as in
// a launch of its own (same lanes, same order: identical results), one launch boundary instead
// of several.
//
// kWide = 2 doubles the units a lane loads per pass (long rows of one token: half the dependent
// passes, twice the bytes in flight); a lane still adds its units in the same order.
//
// With a residual (part.res), each output is also added to it, as launch_add would: the residual
// add after the o-projection / down projection costs no launch of its own, and the RMS norm
// that follows reads one finished row (no block barrier for a norm written in place).
//
// kRows > 1 (formats of 32 lanes per row) gives a warp kRows consecutive rows: a lane takes the
// same units of each, so the activations of a unit are read once for kRows rows (the L1 traffic
// of the K-quant dots is mostly activations); each row is summed as with kRows = 1.
// kSpread (Q4_K / Q6_K): the spread lane layout (UnitQ4kSpread, UnitQ6kSpread).
// kSplit > 1 (one row per warp): kSplit consecutive warps share a row (below). Split kernels are
// built for kMinB resident blocks per multiprocessor where given (Q8_0: 3), else 4; the others
// for kMinB, 0 (unset) unless the launcher asks: a minimum of 1 lets ptxas spend more registers
// (Q8_0 64 -> 80, Q4_K 64 -> 84), which cuts the resident blocks (Llama-3.1-8B Q4_K_M 433 -> 369
// tok/s with 1 for all).
template <DevFormat F, int NT, int kWide = 1, int kRows = 1, bool kSpread = false, int kSplit = 1, int kMinB = 0>
__global__ void __launch_bounds__(32 * kMaxWarps, kSplit > 1 ? (kMinB ? kMinB : 4) : kMinB)
    gemv_kernel(GemvParts parts, XRef x, bool early) {
  static_assert(!kSpread || F == DevFormat::q4_k || F == DevFormat::q5_k || F == DevFormat::q6_k,
                "the spread layouts are Q4_K's, Q5_K's and Q6_K's");

  using U = std::conditional_t<kSpread, SpreadUnit<F>, Unit<F>>;
  constexpr int kUnroll = U::kUnroll * kWide;
  constexpr int kLanes = U::kLanes;         // lanes per row
  static_assert(kRows == 1 || kLanes == 32, "several rows per warp: one row across the warp");
  constexpr int kRowsPerWarp = 32 / kLanes * kRows;
  int m = 0;
#pragma unroll
  for (int i = 0; i + 1 < kMaxParts; ++i)
    if (i + 1 < parts.n && blockIdx.x >= parts.p[i].block_end) m = i + 1;
  const unsigned b_local = blockIdx.x - (m > 0 ? parts.p[m > 0 ? m - 1 : 0].block_end : 0u);
  float* const out = parts.p[m].out;
  const int64_t out_stride = parts.p[m].out_stride;
  const uint8_t* const w = parts.p[m].w;
  const DevLayout L = parts.p[m].L;
  const int64_t n_out = parts.p[m].n_out;
  const float* const bias = parts.p[m].bias;
  const float* const res = parts.p[m].res;
  static_assert(kSplit == 1 || kLanes == 32, "split rows: one row across each warp");
  const int lane = threadIdx.x & 31, sl = lane % kLanes;
  const int warp = int(threadIdx.x >> 5), part = warp % kSplit;  // part: which passes of the row
  const int64_t r0 = (int64_t(b_local) * (blockDim.x / 32 / kSplit) + warp / kSplit) * kRowsPerWarp;
  if (kSplit == 1 && r0 >= n_out) {  // whole warps leave together
    BRISK_PDL_ENTER();
    return;
  }
  const int64_t r = r0 + lane / kLanes;  // the first row (kRows > 1: r .. r + kRows - 1)
  RowRef row[kRows];
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    const int64_t rr = r + j < n_out ? r + j : n_out - 1;  // lanes of a missing row read a real one, store nothing
    row[j] = RowRef{.qs = w + size_t(rr) * L.qs_row, .sc = w + L.sc_offset + size_t(rr) * L.sc_row};
  }
  const int64_t n_units = U::count(x.n_in);
  // Warp-uniform trip count: lanes past the end load nothing and add nothing, but still take
  // part in the shuffles of the K-quant dots.
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
  // kSplit > 1: the kSplit warps of a row take its passes in turn (warp part takes passes part,
  // part + kSplit, ...), and add their sums through shared memory in warp order.
  // (kSplit == 1: warps past the end have left, and the first pass is 0 at compile time.)
  const int64_t first = kSplit == 1 ? 0 : r0 < n_out ? int64_t(part) * kStep : n_units;  // past the end: no passes
  if (early && (kSplit == 1 || first < n_units)) load_pass(first);
  BRISK_PDL_ENTER();
  if (!early && (kSplit == 1 || first < n_units)) load_pass(first);
  float acc[kRows][NT];
#pragma unroll
  for (int j = 0; j < kRows; ++j)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[j][t] = 0.0f;
  for (int64_t base = first; base < n_units; base += kStep * kSplit) {
    if (base > first) load_pass(base);
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const int64_t u0 = base + kLanes * k;
      if (u0 >= n_units) break;  // uniform
      const int64_t u = u0 + sl;
      const bool ok = u < n_units;
#pragma unroll
      for (int t = 0; t < NT; ++t) {
#pragma unroll
        for (int j = 0; j < kRows; ++j) {
          if constexpr (U::kInt) {
            // Every lane calls dot (shuffles; a block's lanes are all in range or all out), lanes
            // past the end read the activations of unit u0 and drop the result.
            const float v = U::dot(raw[j][k], x, t, ok ? u : u0);
            if (ok) acc[j][t] += v;
          } else {
            if (ok) acc[j][t] += U::dot(raw[j][k], x, t, u);
          }
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      float v = acc[j][t];
      for (int o = kLanes / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      acc[j][t] = v;
    }
  }
  if constexpr (kSplit > 1) {
    __shared__ float part_sums[kMaxWarps][kRows][NT];
    if (lane == 0)
#pragma unroll
      for (int j = 0; j < kRows; ++j)
#pragma unroll
        for (int t = 0; t < NT; ++t) part_sums[warp][j][t] = acc[j][t];
    __syncthreads();
    if (part != 0) return;
#pragma unroll
    for (int j = 0; j < kRows; ++j)
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        float v = part_sums[warp][j][t];
#pragma unroll
        for (int q = 1; q < kSplit; ++q) v += part_sums[warp + q][j][t];
        acc[j][t] = v;
      }
  }
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    if (sl == 0 && r + j < n_out) {
      const float b = bias ? bias[r + j] : 0.0f;
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const float o = acc[j][t] + b;
        out[t * out_stride + r + j] = o;
        if (res) parts.p[m].sum[t * parts.p[m].sum_stride + r + j] = res[t * parts.p[m].res_stride + r + j] + o;
      }
    }
  }
}

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

int sm_count() {
  static int n = [] {
    int dev = 0, c = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&c, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      c = 132;
    cudaGetLastError();
    return c > 0 ? c : 132;
  }();
  return n;
}

DevFormat dev_format(QuantType t) {
  switch (t) {
    case QuantType::F16: return DevFormat::f16;
    case QuantType::BF16: return DevFormat::bf16;
    case QuantType::Q8_0: return DevFormat::q8_0;
    case QuantType::Q4_0: return DevFormat::q4_0;
    case QuantType::Q4_K: return DevFormat::q4_k;
    case QuantType::Q6_K: return DevFormat::q6_k;
    case QuantType::Q5_K: return DevFormat::q5_k;
    default: return DevFormat::f32;
  }
}

// Blocks of `warps` warps of Kernel resident on the whole device at once (cached per kernel and
// block size; 0 where the query fails).
template <auto Kernel>
int64_t resident_blocks(int warps) {
  static std::atomic<int64_t> cache[kMaxWarps + 1] = {};
  std::atomic<int64_t>& c = cache[warps];
  int64_t n = c.load(std::memory_order_relaxed);
  if (n == 0) {
    int b = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, Kernel, 32 * warps, 0) != cudaSuccess) {
      cudaGetLastError();
      b = 0;
    }
    n = b > 0 ? int64_t(b) * sm_count() : -1;
    c.store(n, std::memory_order_relaxed);
  }
  return n > 0 ? n : 0;
}

// Blocks of 4 warps of two rows each over the parts (their block_end set in `pairs`).
unsigned pair_blocks(const MatmulArgs* a, int n_parts, GemvParts& pairs) {
  unsigned b = 0;
  for (int i = 0; i < n_parts; ++i) {
    b += unsigned((a[i].w.n_out + 7) / 8);
    pairs.p[i].block_end = b;
  }
  return b;
}
// Rows two per warp (q4k_pair_kernel) where one per warp takes more than one wave of Single and
// the pairs fit in one wave of Pair (blocks of 4 warps).
template <auto Single, auto Pair>
bool pairs_pay(unsigned single_blocks, unsigned pair_blocks) {
  return !flags().no_cuda_gemv_pairs && int64_t(single_blocks) > resident_blocks<Single>(4) &&
         int64_t(pair_blocks) <= resident_blocks<Pair>(4);
}

// Warps per block: kMaxWarps, halved while that leaves fewer than two blocks per multiprocessor
// (small matrices spread over more multiprocessors); counted over all parts of the launch.
template <DevFormat F>
void launch_gemv(const MatmulArgs* a, int n_parts, const QuantAct* xq, const Mat* res, const Mat* sum, int64_t t0, int nt,
                 bool early, cudaStream_t s) {
  // One token over spread Q4_K rows: the usual units per lane and pass, rows of several passes
  // split over warps (below), instead of the wide kernel (Llama-3.1-8B Q4_K_M 435 -> 450 tok/s).
  const bool q4k_split = F == DevFormat::q4_k && nt == 1 && !flags().no_cuda_gemv_split && !flags().no_cuda_q4k_spread;
  // Spread Q5_K rows likewise (it has no early-decode kernel, so its rows of several passes
  // always split).
  const bool q5k_split = F == DevFormat::q5_k && nt == 1 && !flags().no_cuda_gemv_split && !flags().no_cuda_q5k_spread;
  // One token over Q6_K: two rows per warp (gemv_kernel's kRows; Q4_K measured slower with 2
  // or 4, as was Q6_K's wide variant with 2 rows).
  const bool two_rows = F == DevFormat::q6_k && nt == 1 && !flags().no_cuda_gemv_rows;
  const int64_t n_units = a[0].w.n_in / unit_elems<F>();
  // One token over K-quant rows of more than one pass: the wide variant (measured slower for
  // BF16 and no faster for Q8_0, whose passes already hold 4-8 units per lane).
  const bool wide = (F == DevFormat::q4_k || F == DevFormat::q6_k) && !two_rows && nt == 1 && !flags().no_cuda_gemv_wide && !q4k_split &&
                    n_units > int64_t(Unit<F>::kLanes) * Unit<F>::kUnroll;
  const int64_t step = int64_t(Unit<F>::kLanes) * Unit<F>::kUnroll * (wide ? 2 : 1);
  const int64_t passes = (n_units + step - 1) / step;
  // One token over Q8_0 / float / spread Q4_K rows of more than one pass: split rows
  // (gemv_kernel's kSplit), up to one pass per warp. (The wide Q4_K kernel split measured 432.5
  // against 434.5 tok/s for Llama-3.1-8B Q4_K_M, and the Q6_K kernels split slower too: the
  // down projection 30.2 us with one row per warp in 4 warps against 22.4 for two rows a warp.)
  constexpr bool kFloat = F == DevFormat::f32 || F == DevFormat::f16 || F == DevFormat::bf16;
  // (Q4_K rows decoded early take their passes in one warp: Llama-3.1-8B Q4_K_M 485.4-485.9
  // against 481.8-481.9 tok/s with the split, the Q4_K down projection 17.1-17.9 against
  // 18.3-19.1 us event-timed.)
  const bool can_split = (q4k_split && flags().no_cuda_q4k_early_decode) || q5k_split ||
                         (nt == 1 && !flags().no_cuda_gemv_split && (F == DevFormat::q8_0 || kFloat));
  // One token over Q4_K / Q6_K rows: blocks of at most 4 warps, whose resident slots free as
  // soon as their 4 warps finish (Llama-3.1-8B Q4_K_M 461.0 -> 465.8-466.1 tok/s, gate / up
  // 24.0-24.6 -> 23.2-23.7 us event-timed; Q8_0 measured slower with 4: 391.8 against 396.6).
  const bool small_blocks = nt == 1 && (F == DevFormat::q4_k || F == DevFormat::q5_k || F == DevFormat::q6_k) &&
                            !flags().no_cuda_gemv_small_blocks;
  const int max_warps = small_blocks ? kMaxWarps / 2 : kMaxWarps;
  int split = 1;
  while (can_split && split * 2 <= passes && split * 2 <= max_warps) split *= 2;
  const int rows_per_warp = 32 / Unit<F>::kLanes * (two_rows ? 2 : 1);
  int64_t rows = 0;
  for (int i = 0; i < n_parts; ++i) rows += a[i].w.n_out;
  int warps = max_warps;
  while (warps > split && (rows * split + warps * rows_per_warp - 1) / (warps * rows_per_warp) < 2 * sm_count()) warps /= 2;
  const int64_t rows_per_block = int64_t(warps / split) * rows_per_warp;
  GemvParts parts{};
  parts.n = n_parts;
  unsigned blocks = 0;
  for (int i = 0; i < n_parts; ++i) {
    blocks += unsigned((a[i].w.n_out + rows_per_block - 1) / rows_per_block);
    parts.p[i] = GemvPart{.out = a[i].out.row(t0), .out_stride = a[i].out.row_stride(),
                          .w = static_cast<const uint8_t*>(a[i].w.data), .L = dev_layout(F, a[i].w.n_in, a[i].w.n_out),
                          .n_out = a[i].w.n_out, .bias = a[i].bias, .block_end = blocks, .res = nullptr,
                          .res_stride = 0, .sum = nullptr, .sum_stride = 0};
  }
  if (res) {
    parts.p[0].res = res->row(t0);
    parts.p[0].res_stride = res->row_stride();
    parts.p[0].sum = sum->row(t0);
    parts.p[0].sum_stride = sum->row_stride();
  }
  const dim3 grid(blocks), block(32 * warps);
  XRef x{.q = nullptr, .d = nullptr, .f = nullptr, .n_in = a[0].w.n_in, .x_stride = a[0].x.row_stride()};
  if (xq) {
    const int64_t blk = F == DevFormat::q8_0 || F == DevFormat::q4_0 ? 32 : 256;
    x.q = xq->q + t0 * a[0].w.n_in;
    x.d = xq->d + t0 * (a[0].w.n_in / blk);
  } else {
    x.f = a[0].x.row(t0);
  }
  // Q4_K / Q5_K / Q6_K: the spread lane layouts unless BRISK_NO_CUDA_Q4K_SPREAD / _Q5K_ / _Q6K_.
  constexpr bool kCanSpread = F == DevFormat::q4_k || F == DevFormat::q5_k || F == DevFormat::q6_k;
  const bool spread = F == DevFormat::q4_k   ? !flags().no_cuda_q4k_spread
                      : F == DevFormat::q5_k ? !flags().no_cuda_q5k_spread
                      : F == DevFormat::q6_k ? !flags().no_cuda_q6k_spread
                                             : false;
  if constexpr (F == DevFormat::q6_k) {
    if (two_rows) {
      if (spread)
        launch_kernel(gemv_kernel<F, 1, 1, 2, kCanSpread>, grid, block, 0, s, parts, x, early);
      else
        launch_kernel(gemv_kernel<F, 1, 1, 2>, grid, block, 0, s, parts, x, early);
      return;
    }
  }
  if constexpr (F == DevFormat::q4_k || F == DevFormat::q6_k) {
    if (wide) {
      if (spread)
        launch_kernel(gemv_kernel<F, 1, 2, 1, kCanSpread>, grid, block, 0, s, parts, x, early);
      else
        launch_kernel(gemv_kernel<F, 1, 2>, grid, block, 0, s, parts, x, early);
      return;
    }
  }
  if constexpr (F == DevFormat::q8_0) {
    // One-token Q8_0 rows of one pass: built with a minimum of 1 resident block (80 registers,
    // 3 blocks per multiprocessor instead of 4; same code): 382.0 against 378.8 tok/s. Where
    // the launch is one wave of the 64-register build and more of the 80-register one, the
    // former: e.g. an o-projection of 512 blocks of 8 warps is one wave of 528 at 4 blocks per
    // multiprocessor, 1.3 waves of 396 at 3 (10.4-10.9 us against 11.7-12.0 event-timed). (Over
    // many waves the warps stagger and the faster build wins: gate / up 28672 rows took 34.4-35.1
    // us with it, 35.6-36.3 with the 64-register one; q / k / v, 768 blocks, 1.9 waves at 3 and
    // 1.5 at 4: Llama-3.1-8B Q8_0 384.5 against 393.4 tok/s with the 64-register build.)
    if (nt == 1 && split == 1) {
      constexpr auto k80 = gemv_kernel<F, 1, 1, 1, false, 1, 1>;
      constexpr auto k64 = gemv_kernel<F, 1>;
      const int64_t blocks = parts.p[n_parts - 1].block_end;
      if (!flags().no_cuda_gemv_waves && blocks <= resident_blocks<k64>(warps) && blocks > resident_blocks<k80>(warps))
        launch_kernel(k64, grid, block, 0, s, parts, x, early);
      else
        launch_kernel(k80, grid, block, 0, s, parts, x, early);
      return;
    }
  }
  if constexpr (F == DevFormat::q8_0) {
    // Split Q8_0 rows: built for 3 resident blocks (77 registers; 4 blocks: 64 with 16 bytes of
    // spills). Same code and results; Llama-3.1-8B Q8_0 393.8 against 391.3-391.6 tok/s, the
    // down projection 21.3 against 22.0 us event-timed.
    if (split == 8) { launch_kernel(gemv_kernel<F, 1, 1, 1, false, 8, 3>, grid, block, 0, s, parts, x, early); return; }
    if (split == 4) { launch_kernel(gemv_kernel<F, 1, 1, 1, false, 4, 3>, grid, block, 0, s, parts, x, early); return; }
    if (split == 2) { launch_kernel(gemv_kernel<F, 1, 1, 1, false, 2, 3>, grid, block, 0, s, parts, x, early); return; }
  }
  if constexpr (F == DevFormat::q4_k) {
    // One-token spread Q4_K rows (one per warp, not split): decoded before the wait.
    if (nt == 1 && spread && !wide && split == 1 && !flags().no_cuda_q4k_early_decode) {
      // Rows of several passes: 64 registers with 40 bytes of spills, one wave of 4096 down
      // rows; built for 3 blocks (80 registers, no spills, 1.3 waves): 473.6-474.3 against
      // 488.4-488.9 tok/s for Llama-3.1-8B Q4_K_M.
      if (passes > 1) {
        launch_kernel(q4k_early_kernel<false, true>, grid, block, 0, s, parts, x, 0u, early);
        return;
      }
      if (warps == 4) {
        GemvParts pairs = parts;
        if (pairs_pay<q4k_early_kernel<>, q4k_pair_kernel<>>(blocks, pair_blocks(a, n_parts, pairs))) {
          launch_kernel(q4k_pair_kernel<>, dim3(pairs.p[n_parts - 1].block_end), block, 0, s, pairs, x, 0u, early);
          return;
        }
      }
      launch_kernel(q4k_early_kernel<>, grid, block, 0, s, parts, x, 0u, early);
      return;
    }
  }
  if constexpr (kFloat || F == DevFormat::q4_k || F == DevFormat::q5_k) {  // split rows (K-quants: spread only)
    if (split == 8) { launch_kernel(gemv_kernel<F, 1, 1, 1, kCanSpread, 8>, grid, block, 0, s, parts, x, early); return; }
    if (split == 4) { launch_kernel(gemv_kernel<F, 1, 1, 1, kCanSpread, 4>, grid, block, 0, s, parts, x, early); return; }
    if (split == 2) { launch_kernel(gemv_kernel<F, 1, 1, 1, kCanSpread, 2>, grid, block, 0, s, parts, x, early); return; }
  }
  if (spread) {
#define BRISK_GEMV_CASE(N) \
  case N: launch_kernel(gemv_kernel<F, N, 1, 1, kCanSpread>, grid, block, 0, s, parts, x, early); break;
    switch (nt) {
      BRISK_GEMV_CASE(1) BRISK_GEMV_CASE(2) BRISK_GEMV_CASE(3) BRISK_GEMV_CASE(4)
      BRISK_GEMV_CASE(5) BRISK_GEMV_CASE(6) BRISK_GEMV_CASE(7) BRISK_GEMV_CASE(8)
      default: break;
    }
#undef BRISK_GEMV_CASE
    return;
  }
#define BRISK_GEMV_CASE(N) \
  case N: launch_kernel(gemv_kernel<F, N>, grid, block, 0, s, parts, x, early); break;
  switch (nt) {
    BRISK_GEMV_CASE(1) BRISK_GEMV_CASE(2) BRISK_GEMV_CASE(3) BRISK_GEMV_CASE(4)
    BRISK_GEMV_CASE(5) BRISK_GEMV_CASE(6) BRISK_GEMV_CASE(7) BRISK_GEMV_CASE(8)
    default: break;
  }
#undef BRISK_GEMV_CASE
}

template <DevFormat F>
cudaError_t matmul_fmt(const MatmulArgs* a, int n_parts, const QuantAct* xq, bool early, cudaStream_t s,
                       const Mat* res = nullptr, const Mat* sum = nullptr) {
  if (Unit<F>::kInt != (xq != nullptr)) return cudaErrorInvalidValue;
  early = early && !flags().no_cuda_prefetch;
  for (int64_t t0 = 0; t0 < a[0].x.rows; t0 += kMaxTok) {
    const int nt = int(a[0].x.rows - t0 < kMaxTok ? a[0].x.rows - t0 : kMaxTok);
    launch_gemv<F>(a, n_parts, xq, res, sum, t0, nt, early, s);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

// Embedding: out[t, :] = table[ids[t], :] * scale; one thread per group of 8 elements.
template <DevFormat F>
__global__ void embedding_kernel(float* out, int64_t out_stride, const uint8_t* table, DevLayout L, int64_t n_in,
                                 const int32_t* ids, float scale) {
  BRISK_PDL_ENTER();
  const int64_t t = blockIdx.y;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n_in / 8) return;
  float v[8];
  const size_t r = size_t(ids[t]);
  Dev<F>::load8(table + r * L.qs_row, table + L.sc_offset + r * L.sc_row, c, v);
  float* o = out + t * out_stride + 8 * c;
#pragma unroll
  for (int k = 0; k < 8; ++k) o[k] = v[k] * scale;
}

template <DevFormat F>
cudaError_t embedding_fmt(const EmbeddingArgs& a, cudaStream_t s) {
  if (a.out.rows == 0) return cudaSuccess;
  const int64_t chunks = a.table.n_in / 8;
  const dim3 grid(unsigned((chunks + 127) / 128), unsigned(a.out.rows));
  launch_kernel(embedding_kernel<F>, grid, 128, 0, s, a.out.data, a.out.row_stride(), static_cast<const uint8_t*>(a.table.data),
                                           dev_layout(F, a.table.n_in, a.table.n_out), a.table.n_in, a.ids, a.scale);
  return cudaGetLastError();
}

// One thread per stored block: stored rows -> device layout.
template <DevFormat F>
__global__ void repack_kernel(const uint8_t* stored, size_t stored_row_bytes, uint8_t* dst, DevLayout L,
                              int64_t n_out, int64_t blocks_per_row) {
  BRISK_PDL_ENTER();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_out * blocks_per_row) return;
  repack_block_at<F>(stored, stored_row_bytes, dst, L, i / blocks_per_row, i % blocks_per_row);
}

}  // namespace

bool weight_format_on_device(QuantType t) {
  switch (t) {
    case QuantType::F32: case QuantType::F16: case QuantType::BF16: case QuantType::Q8_0:
    case QuantType::Q4_0: case QuantType::Q4_K: case QuantType::Q5_K: case QuantType::Q6_K:
      return true;
    default:
      return false;
  }
}

bool weight_takes_quantized_act(QuantType t) {
  return t == QuantType::Q8_0 || t == QuantType::Q4_0 || t == QuantType::Q4_K || t == QuantType::Q5_K ||
         t == QuantType::Q6_K;
}

size_t device_weight_bytes(QuantType t, int64_t n_in, int64_t n_out) {
  return dev_layout(dev_format(t), n_in, n_out).bytes;
}

bool weight_repacked(QuantType t) { return dev_layout(dev_format(t), 256, 1).repacked; }

cudaError_t launch_repack_weight(QuantType t, const void* stored, size_t stored_row_bytes, void* dst, int64_t n_in,
                                 int64_t n_out, cudaStream_t s) {
  const DevFormat f = dev_format(t);
  const DevLayout L = dev_layout(f, n_in, n_out);
  if (!L.repacked || n_in % L.block != 0) return cudaErrorInvalidValue;
  const int64_t bpr = n_in / L.block, n = bpr * n_out;
  const unsigned grid = unsigned((n + 255) / 256);
  const auto* src = static_cast<const uint8_t*>(stored);
  auto* d = static_cast<uint8_t*>(dst);
  switch (f) {
    case DevFormat::q8_0: launch_kernel(repack_kernel<DevFormat::q8_0>, grid, 256, 0, s, src, stored_row_bytes, d, L, n_out, bpr); break;
    case DevFormat::q4_0: launch_kernel(repack_kernel<DevFormat::q4_0>, grid, 256, 0, s, src, stored_row_bytes, d, L, n_out, bpr); break;
    case DevFormat::q6_k: launch_kernel(repack_kernel<DevFormat::q6_k>, grid, 256, 0, s, src, stored_row_bytes, d, L, n_out, bpr); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

#define BRISK_FMT_DISPATCH(fn, type, ...)                                  \
  switch (type) {                                                          \
    case QuantType::F32: return fn<DevFormat::f32>(__VA_ARGS__);          \
    case QuantType::F16: return fn<DevFormat::f16>(__VA_ARGS__);          \
    case QuantType::BF16: return fn<DevFormat::bf16>(__VA_ARGS__);        \
    case QuantType::Q8_0: return fn<DevFormat::q8_0>(__VA_ARGS__);        \
    case QuantType::Q4_0: return fn<DevFormat::q4_0>(__VA_ARGS__);        \
    case QuantType::Q4_K: return fn<DevFormat::q4_k>(__VA_ARGS__);        \
    case QuantType::Q6_K: return fn<DevFormat::q6_k>(__VA_ARGS__);        \
    case QuantType::Q5_K: return fn<DevFormat::q5_k>(__VA_ARGS__);        \
    default: return cudaErrorInvalidValue;                                 \
  }

cudaError_t launch_matmul(const MatmulArgs& a, const QuantAct* xq, cudaStream_t s, bool weights_constant) {
  BRISK_FMT_DISPATCH(matmul_fmt, a.w.type, &a, 1, xq, weights_constant, s)
}

cudaError_t launch_matmul_add(const MatmulArgs& a, const QuantAct* xq, const Mat& residual, const Mat& sum,
                              cudaStream_t s, bool weights_constant) {
  if (residual.rows != a.out.rows || residual.cols != a.w.n_out || sum.rows != a.out.rows || sum.cols != a.w.n_out)
    return cudaErrorInvalidValue;
  BRISK_FMT_DISPATCH(matmul_fmt, a.w.type, &a, 1, xq, weights_constant, s, &residual, &sum)
}

namespace {

// Q4_K and Q6_K matmuls of one token over rows of at most 4096 (one pass each) can share one
// q4k_early_kernel launch: Q4_K_M stores attn_v (and ffn_down) of some layers as Q6_K, whose
// v then joins the q / k launch instead of following it (both take Q8_K activations).
bool kquant_mixes(const MatmulArgs& a) {
  return (a.w.type == QuantType::Q4_K || a.w.type == QuantType::Q6_K) && a.x.rows == 1 && a.w.n_in <= 4096 &&
         a.w.n_in % 256 == 0 && !flags().no_cuda_gemv_mixed && !flags().no_cuda_q4k_early_decode &&
         !flags().no_cuda_q4k_spread && !flags().no_cuda_q6k_spread;
}

cudaError_t launch_kquant_mixed(const MatmulArgs* a, int n, const QuantAct& xq, bool early, cudaStream_t s) {
  early = early && !flags().no_cuda_prefetch;
  constexpr int kWarps = 4;  // one row per warp
  GemvParts parts{};
  parts.n = n;
  unsigned blocks = 0, q6k_parts = 0;
  for (int i = 0; i < n; ++i) {
    const DevFormat f = dev_format(a[i].w.type);
    blocks += unsigned((a[i].w.n_out + kWarps - 1) / kWarps);
    if (f == DevFormat::q6_k) q6k_parts |= 1u << i;
    parts.p[i] = GemvPart{.out = a[i].out.row(0), .out_stride = a[i].out.row_stride(),
                          .w = static_cast<const uint8_t*>(a[i].w.data), .L = dev_layout(f, a[i].w.n_in, a[i].w.n_out),
                          .n_out = a[i].w.n_out, .bias = a[i].bias, .block_end = blocks, .res = nullptr,
                          .res_stride = 0, .sum = nullptr, .sum_stride = 0};
  }
  const XRef x{.q = xq.q, .d = xq.d, .f = nullptr, .n_in = a[0].w.n_in, .x_stride = a[0].x.row_stride()};
  GemvParts pairs = parts;
  if (pairs_pay<q4k_early_kernel<true>, q4k_pair_kernel<true>>(blocks, pair_blocks(a, n, pairs))) {
    launch_kernel(q4k_pair_kernel<true>, dim3{pairs.p[n - 1].block_end}, dim3{32 * kWarps}, 0, s, pairs, x, q6k_parts, early);
    return cudaGetLastError();
  }
  launch_kernel(q4k_early_kernel<true>, dim3{blocks}, dim3{32 * kWarps}, 0, s, parts, x, q6k_parts, early);
  return cudaGetLastError();
}

}  // namespace

bool matmuls_share_launch(const MatmulArgs& a, const MatmulArgs& b) {
  return (a.w.type == b.w.type || (kquant_mixes(a) && kquant_mixes(b))) && a.w.n_in == b.w.n_in && a.x.data == b.x.data && a.x.rows == b.x.rows &&
         a.x.row_stride() == b.x.row_stride() && a.out.rows == b.out.rows;
}

cudaError_t launch_matmuls(const MatmulArgs* a, int n, const QuantAct* xq, cudaStream_t s, bool weights_constant) {
  if (n < 1 || n > kMaxParts) return cudaErrorInvalidValue;
  bool mixed = false;
  for (int i = 1; i < n; ++i) {
    if (!matmuls_share_launch(a[0], a[i])) return cudaErrorInvalidValue;
    mixed = mixed || a[i].w.type != a[0].w.type;
  }
  if (mixed) return xq ? launch_kquant_mixed(a, n, *xq, weights_constant, s) : cudaErrorInvalidValue;
  BRISK_FMT_DISPATCH(matmul_fmt, a[0].w.type, a, n, xq, weights_constant, s)
}

namespace {

// Mixture-of-experts matmul: blockIdx.y is a (token, slot) pair, whose expert id (read on the
// device) selects the weight; blocks [0, bx1) take the first matrix, [bx1, ..) the second (the
// gate and up projections of the same input in one launch). kRowLanes lanes a row (8 / 16 /
// 32: as few as take the row's units in one pass, so short expert rows, e.g. 768 columns, do
// not leave most of a warp idle), each lane whole units, then a shuffle sum over the row's
// lanes; x the pair's row (or its token's).
struct MoeGemv {
  const uint8_t* const* w;
  const uint8_t* const* w2;  // the second matrix (nullptr: one)
  DevLayout L;
  int64_t n_out;
  unsigned bx1;              // blocks of the first matrix
  int n_expert;
  const int32_t* ids;
  int64_t pair0;
  int n_used;
  bool x_per_pair;
  XRef x;
  float* out;
  float* out2;
};

// x from its row `r` on (quantized rows with their scales, or float rows).
template <DevFormat F>
__device__ __forceinline__ XRef x_from_row(XRef x, int64_t r) {
  if (x.q) {
    const int64_t blk = F == DevFormat::q8_0 || F == DevFormat::q4_0 ? 32 : 256;
    x.q += r * x.n_in;
    x.d += r * (x.n_in / blk);
  } else {
    x.f += r * x.x_stride;
  }
  return x;
}

// Row r of pair `pair`'s expert in `table` (r < n_out, or a real row whose result is dropped),
// dotted with the pair's input: the sum over the row's kRowLanes lanes, in all of them; 0 for
// an expert id out of range. The whole warp calls it for one pair.
template <DevFormat F, int kRowLanes>
__device__ __forceinline__ float moe_pair_row(const MoeGemv& g, const uint8_t* const* table, int64_t pair, int64_t r,
                                              int sl) {
  using U = Unit<F>;
  const int e = g.ids[pair];
  if (e < 0 || e >= g.n_expert) return 0.0f;  // warp-uniform
  const int64_t rr = r < g.n_out ? r : g.n_out - 1;
  const uint8_t* w = table[e];
  const RowRef row{.qs = w + size_t(rr) * g.L.qs_row, .sc = w + g.L.sc_offset + size_t(rr) * g.L.sc_row};
  const XRef x = x_from_row<F>(g.x, g.x_per_pair ? pair : pair / g.n_used);
  const int64_t n_units = U::count(x.n_in);
  constexpr int kB = U::kUnroll;
  float acc = 0.0f;
  for (int64_t base = 0; base < n_units; base += int64_t(kRowLanes) * kB) {
    typename U::Raw raw[kB] = {};
#pragma unroll
    for (int k = 0; k < kB; ++k) {
      const int64_t u = base + kRowLanes * k + sl;
      if (u < n_units) U::load(row, u, raw[k]);
    }
#pragma unroll
    for (int k = 0; k < kB; ++k) {
      const int64_t u0 = base + kRowLanes * k;
      if (u0 >= n_units) break;  // uniform
      const int64_t u = u0 + sl;
      const bool ok = u < n_units;
      if constexpr (U::kInt) {
        // Every lane: the K-quant dots shuffle within a block's 2 / 4 lanes, which a row's
        // lanes hold whole (n_units is a multiple of the units per block).
        const float v = U::dot(raw[k], x, 0, ok ? u : u0);
        if (ok) acc += v;
      } else {
        if (ok) acc += U::dot(raw[k], x, 0, u);
      }
    }
  }
  for (int o = kRowLanes / 2; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  return acc;
}

template <DevFormat F, int kRowLanes>
__global__ void __launch_bounds__(128) moe_gemv_kernel(MoeGemv g) {
  static_assert(kRowLanes >= 4 && kRowLanes <= 32 && kRowLanes % 4 == 0, "rows of whole K-quant lane groups");
  constexpr int kRowsPerWarp = 32 / kRowLanes;
  const bool second = blockIdx.x >= g.bx1;
  const unsigned bx = second ? blockIdx.x - g.bx1 : blockIdx.x;
  const int lane = threadIdx.x & 31, sl = lane % kRowLanes;
  const int64_t r0 = (int64_t(bx) * (blockDim.x / 32) + threadIdx.x / 32) * kRowsPerWarp;
  BRISK_PDL_ENTER();
  if (r0 >= g.n_out) return;  // whole warps
  const int64_t pair = g.pair0 + blockIdx.y;
  const int64_t r = r0 + lane / kRowLanes;
  const float acc = moe_pair_row<F, kRowLanes>(g, second ? g.w2 : g.w, pair, r, sl);
  if (sl == 0 && r < g.n_out) (second ? g.out2 : g.out)[pair * g.n_out + r] = acc;
}

// The down projection of every slot of a token and their weighted sum in one launch:
// blockIdx.y is a token, blockIdx.x a group of kRowsPerWarp output rows; warp w computes those
// rows for slots w, w + warps, ... (each exactly as moe_gemv_kernel computes a pair's rows) into
// shared memory, then thread i < kRowsPerWarp sums row i over the slots in expert id order with
// their weights, as launch_moe_combine does: the same bits as the two launches.
template <DevFormat F, int kRowLanes>
__global__ void __launch_bounds__(256) moe_down_combine_kernel(MoeGemv g, const float* wts, float* out,
                                                                int64_t out_stride) {
  constexpr int kRowsPerWarp = 32 / kRowLanes;
  __shared__ float part[kMoeMaxUsed][kRowsPerWarp];
  __shared__ int32_t sid[kMoeMaxUsed];
  __shared__ int order[kMoeMaxUsed];
  const int lane = threadIdx.x & 31, sl = lane % kRowLanes, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int64_t t = blockIdx.y, r0 = int64_t(blockIdx.x) * kRowsPerWarp, r = r0 + lane / kRowLanes;
  const int n_used = g.n_used;
  BRISK_PDL_ENTER();
  // The slots in expert id order (stable: equal ids keep slot order, as the insertion sort of
  // launch_moe_combine leaves them).
  if (threadIdx.x < n_used) sid[threadIdx.x] = g.ids[t * n_used + threadIdx.x];
  __syncthreads();
  if (threadIdx.x < n_used) {
    const int j = threadIdx.x, id = sid[j];
    int rank = 0;
    for (int k = 0; k < n_used; ++k) rank += sid[k] < id || (sid[k] == id && k < j);
    order[rank] = j;
  }
  for (int slot = warp; slot < n_used; slot += warps) {
    const float acc = moe_pair_row<F, kRowLanes>(g, g.w, t * n_used + slot, r, sl);
    if (sl == 0) part[slot][lane / kRowLanes] = acc;
  }
  __syncthreads();
  if (threadIdx.x < kRowsPerWarp && r0 + threadIdx.x < g.n_out) {
    float o = 0.0f;
    for (int j = 0; j < n_used; ++j) {
      const int slot = order[j];
      o = fmaf(wts[t * n_used + slot], part[slot][threadIdx.x], o);
    }
    out[t * out_stride + r0 + threadIdx.x] = o;
  }
}

// Expert matmuls of a prefill batch, grouped: x holds the pairs' rows sorted by expert, and
// each item (blockIdx.y) is up to kMoeItemRows consecutive rows that share one expert: {expert,
// first row, rows}. A warp loads each weight unit of its row once and dots it with every row of
// the item (as the multi-token GEMV reuses its loads); each row's sum is moe_pair_row's (the
// same units per lane, the same shuffle tree), so a pair gets the bits it gets in decode.
template <DevFormat F, int kRowLanes>
__global__ void __launch_bounds__(128) moe_items_kernel(MoeGemv g, const int32_t* items, const int32_t* n_items) {
  using U = Unit<F>;
  constexpr int kNt = kMoeItemRows;
  constexpr int kRowsPerWarp = 32 / kRowLanes;
  const bool second = blockIdx.x >= g.bx1;
  const unsigned bx = second ? blockIdx.x - g.bx1 : blockIdx.x;
  const int lane = threadIdx.x & 31, sl = lane % kRowLanes;
  const int64_t r0 = (int64_t(bx) * (blockDim.x / 32) + threadIdx.x / 32) * kRowsPerWarp;
  BRISK_PDL_ENTER();
  if (r0 >= g.n_out || (n_items && int(blockIdx.y) >= *n_items)) return;  // whole warps
  const int32_t* it = items + 3 * int64_t(blockIdx.y);
  const int e = it[0], n = it[2];
  const int64_t first = it[1];
  if (e < 0 || e >= g.n_expert || n < 1 || n > kNt) return;  // not made by the backend
  const int64_t r = r0 + lane / kRowLanes;
  const int64_t rr = r < g.n_out ? r : g.n_out - 1;
  const uint8_t* w = (second ? g.w2 : g.w)[e];
  const RowRef row{.qs = w + size_t(rr) * g.L.qs_row, .sc = w + g.L.sc_offset + size_t(rr) * g.L.sc_row};
  const XRef x = x_from_row<F>(g.x, first);
  const int64_t n_units = U::count(x.n_in);
  constexpr int kB = U::kUnroll;
  float acc[kNt];
#pragma unroll
  for (int t = 0; t < kNt; ++t) acc[t] = 0.0f;
  for (int64_t base = 0; base < n_units; base += int64_t(kRowLanes) * kB) {
    typename U::Raw raw[kB] = {};
#pragma unroll
    for (int k = 0; k < kB; ++k) {
      const int64_t u = base + kRowLanes * k + sl;
      if (u < n_units) U::load(row, u, raw[k]);
    }
#pragma unroll
    for (int k = 0; k < kB; ++k) {
      const int64_t u0 = base + kRowLanes * k;
      if (u0 >= n_units) break;  // uniform
      const int64_t u = u0 + sl;
      const bool ok = u < n_units;
#pragma unroll
      for (int t = 0; t < kNt; ++t) {
        if (t >= n) break;  // uniform
        if constexpr (U::kInt) {
          const float v = U::dot(raw[k], x, t, ok ? u : u0);
          if (ok) acc[t] += v;
        } else {
          if (ok) acc[t] += U::dot(raw[k], x, t, u);
        }
      }
    }
  }
  float* out = second ? g.out2 : g.out;
#pragma unroll
  for (int t = 0; t < kNt; ++t) {
    if (t >= n) break;
    float v = acc[t];
    for (int o = kRowLanes / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (sl == 0 && r < g.n_out) out[(first + t) * g.n_out + r] = v;
  }
}

// The kernels' view of a launch: blocks of kMoeWarps warps, kRowLanes lanes a row; bx1 blocks
// for the first matrix.
constexpr int kMoeWarps = 4;
template <DevFormat F, int kRowLanes>
MoeGemv moe_gemv_of(const MoeMatmulArgs& a) {
  constexpr int64_t kRowsPerBlock = int64_t(kMoeWarps) * (32 / kRowLanes);
  return MoeGemv{.w = reinterpret_cast<const uint8_t* const*>(a.w), .w2 = reinterpret_cast<const uint8_t* const*>(a.w2),
                 .L = dev_layout(F, a.n_in, a.n_out), .n_out = a.n_out,
                 .bx1 = unsigned((a.n_out + kRowsPerBlock - 1) / kRowsPerBlock), .n_expert = a.n_expert, .ids = a.ids,
                 .pair0 = 0, .n_used = a.n_used, .x_per_pair = a.x_per_pair,
                 .x = XRef{.q = a.xq.q, .d = a.xq.d, .f = a.x, .n_in = a.n_in, .x_stride = a.x_stride}, .out = a.out,
                 .out2 = a.out2};
}

template <DevFormat F, int kRowLanes>
cudaError_t moe_items_lanes(const MoeMatmulArgs& a, const int32_t* items, int64_t n_items, const int32_t* n_items_dev,
                            cudaStream_t s) {
  const MoeGemv g = moe_gemv_of<F, kRowLanes>(a);
  launch_kernel(moe_items_kernel<F, kRowLanes>, dim3(g.bx1 * (a.w2 ? 2u : 1u), unsigned(n_items)),
                dim3(32 * kMoeWarps), 0, s, g, items, n_items_dev);
  return cudaGetLastError();
}

template <DevFormat F, int kRowLanes>
cudaError_t moe_matmul_lanes(const MoeMatmulArgs& a, cudaStream_t s) {
  MoeGemv g = moe_gemv_of<F, kRowLanes>(a);
  const unsigned bx = g.bx1 * (a.w2 ? 2u : 1u);
  for (int64_t p0 = 0; p0 < a.n_pairs; p0 += 65535) {
    g.pair0 = p0;
    const unsigned by = unsigned(a.n_pairs - p0 < 65535 ? a.n_pairs - p0 : 65535);
    launch_kernel(moe_gemv_kernel<F, kRowLanes>, dim3(bx, by), dim3(32 * kMoeWarps), 0, s, g);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

template <DevFormat F, int kRowLanes>
cudaError_t moe_combine_lanes(const MoeMatmulArgs& a, const float* wts, const Mat& out, cudaStream_t s) {
  MoeGemv g = moe_gemv_of<F, kRowLanes>(a);
  g.x_per_pair = true;
  constexpr int kRowsPerWarp = 32 / kRowLanes;
  const int warps = a.n_used < 8 ? a.n_used : 8;
  const dim3 grid(unsigned((a.n_out + kRowsPerWarp - 1) / kRowsPerWarp), unsigned(out.rows));
  launch_kernel(moe_down_combine_kernel<F, kRowLanes>, grid, dim3(32 * warps), 0, s, g, wts, out.data,
                out.row_stride());
  return cudaGetLastError();
}

// Lanes a row: halved (down to 8) while half as many still take the row's units in one pass.
template <DevFormat F>
int moe_row_lanes(const MoeMatmulArgs& a) {
  if (a.row_lanes != 0) return a.row_lanes;
  const int64_t n_units = a.n_in / unit_elems<F>();
  int lanes = 32;
  while (lanes > 8 && int64_t(lanes / 2) * Unit<F>::kUnroll >= n_units) lanes /= 2;
  return lanes;
}

template <DevFormat F>
cudaError_t moe_combine_fmt(const MoeMatmulArgs& a, const float* wts, const Mat& out, cudaStream_t s) {
  if (Unit<F>::kInt != (a.xq.q != nullptr)) return cudaErrorInvalidValue;
  switch (moe_row_lanes<F>(a)) {
    case 8: return moe_combine_lanes<F, 8>(a, wts, out, s);
    case 16: return moe_combine_lanes<F, 16>(a, wts, out, s);
    case 32: return moe_combine_lanes<F, 32>(a, wts, out, s);
    default: return cudaErrorInvalidValue;
  }
}

template <DevFormat F>
cudaError_t moe_items_fmt(const MoeMatmulArgs& a, const int32_t* items, int64_t n_items, const int32_t* n_items_dev,
                          cudaStream_t s) {
  if (Unit<F>::kInt != (a.xq.q != nullptr) || (a.w2 && !a.out2)) return cudaErrorInvalidValue;
  switch (moe_row_lanes<F>(a)) {
    case 8: return moe_items_lanes<F, 8>(a, items, n_items, n_items_dev, s);
    case 16: return moe_items_lanes<F, 16>(a, items, n_items, n_items_dev, s);
    case 32: return moe_items_lanes<F, 32>(a, items, n_items, n_items_dev, s);
    default: return cudaErrorInvalidValue;
  }
}

template <DevFormat F>
cudaError_t moe_matmul_fmt(const MoeMatmulArgs& a, cudaStream_t s) {
  if (Unit<F>::kInt != (a.xq.q != nullptr) || (a.w2 && !a.out2)) return cudaErrorInvalidValue;
  switch (moe_row_lanes<F>(a)) {
    case 8: return moe_matmul_lanes<F, 8>(a, s);
    case 16: return moe_matmul_lanes<F, 16>(a, s);
    case 32: return moe_matmul_lanes<F, 32>(a, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t launch_moe_matmul(const MoeMatmulArgs& a, cudaStream_t s) {
  if (a.n_expert < 1 || a.n_used < 1 || a.n_in <= 0 || a.n_out <= 0 || !a.w || !a.ids || !a.out) return cudaErrorInvalidValue;
  if (a.n_pairs == 0) return cudaSuccess;
  if (!a.xq.q && (!a.x || reinterpret_cast<uintptr_t>(a.x) % 16 != 0 || a.x_stride % 4 != 0)) return cudaErrorInvalidValue;
  BRISK_FMT_DISPATCH(moe_matmul_fmt, a.type, a, s)
}

cudaError_t launch_moe_matmul_combine(const MoeMatmulArgs& a, const float* w, const Mat& out, cudaStream_t s) {
  if (a.n_expert < 1 || a.n_used < 1 || a.n_used > kMoeMaxUsed || a.n_in <= 0 || a.n_out <= 0 || !a.w || !a.ids ||
      !w || a.w2 || out.rows > 65535 || out.cols != a.n_out || a.n_pairs != out.rows * a.n_used)
    return cudaErrorInvalidValue;
  if (out.rows == 0) return cudaSuccess;
  if (!a.xq.q && (!a.x || reinterpret_cast<uintptr_t>(a.x) % 16 != 0 || a.x_stride % 4 != 0)) return cudaErrorInvalidValue;
  BRISK_FMT_DISPATCH(moe_combine_fmt, a.type, a, w, out, s)
}

cudaError_t launch_moe_items(const MoeMatmulArgs& a, const int32_t* items, int64_t n_items, cudaStream_t s,
                             const int32_t* n_items_dev) {
  if (a.n_expert < 1 || a.n_in <= 0 || a.n_out <= 0 || !a.w || !a.out || !items || n_items < 0 || n_items > 65535)
    return cudaErrorInvalidValue;
  if (n_items == 0) return cudaSuccess;
  if (!a.xq.q && (!a.x || reinterpret_cast<uintptr_t>(a.x) % 16 != 0 || a.x_stride % 4 != 0)) return cudaErrorInvalidValue;
  BRISK_FMT_DISPATCH(moe_items_fmt, a.type, a, items, n_items, n_items_dev, s)
}

cudaError_t launch_embedding(const EmbeddingArgs& a, cudaStream_t s) {
  BRISK_FMT_DISPATCH(embedding_fmt, a.table.type, a, s)
}

}  // namespace brisk::cuda
