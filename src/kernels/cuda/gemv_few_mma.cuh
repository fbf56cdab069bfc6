// The few-token Q4_K and Q6_K GEMVs on the tensor cores: out[t, r] = dot(W[r, :], x[t, :]) + bias[r]
// for 2..8 tokens (a speculative verify step), with every token's row equal bit for bit to the
// one-token launch of that token alone (q4k_early_kernel / q4k_pair_kernel / the unsplit spread
// rows of gemv_kernel; Q6_K: q6k_few_mma_rows below). One launch can mix Q4_K and Q6_K parts
// (a Q4_K_M layer's Q6_K v beside its Q4_K q / k), as the one-token launch does.
//
// Why: the dp4a few-token kernel (gemv_few.cuh) does 0.67 dp4a per weight byte and token, so from
// about 4 tokens a verify step is bound by instruction issue, not by the weight reads. Here one
// mma.m16n8k32 (int8 x int8 -> int32) takes a sub-block of 32 weights of 16 rows against up to 8
// tokens: per weight byte the integer work no longer grows with the tokens.
//
// Same bits as one token: a Q4_K block's result for (row, token) is
//   f = (d x_d) float(isum) - (dmin x_d) float(msum),
//   isum = sum over sub-blocks s of sc[s] * dot(q[s], x[s]),  msum = sum of mn[s] * sum(x[s]),
// with exact integers (no overflow: |isum| < 8 * 63 * 32 * 15 * 128), so the tensor core's
// products give the one-token kernel's isum and msum, and f is rounded by the same float steps.
// The one-token row then adds the f of its blocks in a fixed order: lane 4m (m = 0..7) adds
// blocks m, m + 8, m + 16, ... from 0.0f, and the shuffle tree adds lanes at distance 16, 8, 4
// (lead lanes m ^ 4, m ^ 2, m ^ 1), then 2 and 1 (lanes holding +0). Here warp m of the block
// takes blocks m, m + 8, ... in order into one accumulator per (row, token), and the block's
// threads replay the tree from shared memory. Only unsplit rows (the default one-token Q4_K
// kernels) have this order; launches whose one-token rows are split over warps keep gemv_few.
//
// Layout: a block of 8 warps takes 16 rows of one part; a warp loads its next block before it
// computes the current one. Per Q4_K block (144 bytes: d, dmin, 12
// scale bytes, 128 nibble bytes) a thread (group g = lane / 4, t4 = lane % 4) loads the header
// and the bytes 8 t4 .. 8 t4 + 7 of each 32-byte nibble chunk c of rows g and g + 8 (a warp
// instruction reads whole 32-byte sectors). The k index of the mma is permuted alike in A and B:
// A register 0 / 2 (k = 4 t4 .., 16 + 4 t4 ..) hold nibble bytes 8 t4 .. + 3 / 8 t4 + 4 .. + 7,
// B registers 0 / 1 the activation bytes 8 t4 .. + 7 of token g. Chunk c's low nibbles are
// sub-block 2c, its high nibbles sub-block 2c + 1. The C fragment gives the thread rows g, g + 8
// and tokens 2 t4, 2 t4 + 1; the activation sums of a sub-block come from the B fragment
// (dp4a, two shuffles over t4, two shuffles to the C columns' threads).
// BRISK_NO_CUDA_GEMV_FEW_MMA: gemv_few instead (no mixed launches of several tokens).
#pragma once
#include "kernels/cuda/gemv_few.cuh"

namespace brisk::cuda {

constexpr int kFewMmaWarps = 8;  // warps per block: warp w takes the blocks w, w + 8, ...
constexpr int kFewMmaRows = 16;  // rows per block (one mma tile)

// D = A (16 x 32, s8, row) . B (32 x 8, s8, col), int32, from zero.
__device__ __forceinline__ void mma_s8_m16n8k32(int (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(0));
}
// D += A (16 x 32, s8, row) . B (32 x 8, s8, col), int32.
__device__ __forceinline__ void mma_s8_m16n8k32_acc(int (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// D = A (16 x 16, s8, row) . B (16 x 8, s8, col), int32, from zero.
__device__ __forceinline__ void mma_s8_m16n8k16(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t b0) {
  asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a0), "r"(a1), "r"(b0), "r"(0));
}

// Byte i (0..3) of w, as an int.
__device__ __forceinline__ int byte_of(uint32_t w, int i) { return int((w >> (8 * i)) & 0xffu); }

// The rows of a block's tile that a thread reads (g and g + 8; rows past the end read the last
// row and store nothing), and where the tile's per-row sums are stored.
struct FewMmaTile {
  const GemvPart* P;
  int64_t r0;  // the tile's first row
  const uint8_t* row[2];
  const uint8_t* sc[2];  // Q6_K: the rows' d values
};
__device__ __forceinline__ FewMmaTile few_mma_tile(const GemvPart& P, unsigned b_local, int g) {
  FewMmaTile T{.P = &P, .r0 = int64_t(b_local) * kFewMmaRows, .row = {}, .sc = {}};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t r = T.r0 + g + 8 * i;
    const size_t rc = size_t(r < P.n_out ? r : P.n_out - 1);
    T.row[i] = P.w + rc * P.L.qs_row;
    T.sc[i] = P.w + P.L.sc_offset + rc * P.L.sc_row;
  }
  return T;
}

// A thread's share of one Q4_K block of rows g and g + 8: the headers and, per nibble chunk c,
// bytes 8 t4 .. 8 t4 + 7.
struct Q4kMmaRaw {
  uint4 h[2];
  uint2 q[2][4];
};
__device__ __forceinline__ void q4k_mma_load(const FewMmaTile& T, int64_t b, int t4, Q4kMmaRaw& raw) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const uint8_t* blk = T.row[i] + 144 * b;
    raw.h[i] = ld_stream(blk);
#pragma unroll
    for (int c = 0; c < 4; ++c) raw.q[i][c] = __ldcs(reinterpret_cast<const uint2*>(blk + 16 + 32 * c + 8 * t4));
  }
}

// The scales of tokens 2 t4 and 2 t4 + 1 for block b (0 past the step's tokens), read without a
// branch (tokens past the step read token 0's).
template <int NT>
__device__ __forceinline__ void few_mma_x_scales(const XRef& x, int64_t nb, int64_t b, int t4, float (&d)[2]) {
  const int ta = 2 * t4, tb = 2 * t4 + 1;
  const float da = x.d[(ta < NT ? ta : 0) * nb + b], db = x.d[(tb < NT ? tb : 0) * nb + b];
  d[0] = ta < NT ? da : 0.0f;
  d[1] = tb < NT ? db : 0.0f;
}

// The activations a thread's share of Q4_K block b takes: token g's bytes 8 t4 .. 8 t4 + 7 of
// each sub-block (B fragments), and the scales of tokens 2 t4 and 2 t4 + 1 (0 past the step's
// tokens). Threads of tokens g >= NT read token NT - 1's bytes: B columns past the tokens only
// reach C columns that are never stored. No load depends on a branch, so all of them are in
// flight together (a load per sub-block, each behind the one before, cost a cache latency
// apiece).
struct Q4kMmaX {
  uint2 v[8];
  float d[2];
};
template <int NT>
__device__ __forceinline__ void q4k_mma_x(const XRef& x, int64_t nb, int64_t b, int g, int t4, Q4kMmaX& X) {
  const int gx = g < NT ? g : NT - 1;
  const int8_t* xg = x.q + int64_t(gx) * x.n_in + 256 * b + 8 * t4;
#pragma unroll
  for (int s = 0; s < 8; ++s) X.v[s] = *reinterpret_cast<const uint2*>(xg + 32 * s);
  few_mma_x_scales<NT>(x, nb, b, t4, X.d);
}

// Block b's results f for (row g, token 2 t4), (g, 2 t4 + 1), (g + 8, 2 t4), (g + 8, 2 t4 + 1),
// added to acc (the one-token kernel's integers and float steps, q4k_dot_pass).
// MINS_MMA: msum = sum over s of mn[s] * sum(x[s]) accumulated by a second mma per sub-block whose
// A holds each row's min of the sub-block in all 32 of its k (the same integers), instead of the
// activation sums' dp4a and four shuffles per sub-block (BRISK_NO_CUDA_FEW_MMA_MINS).
template <bool MINS_MMA = false>
__device__ __forceinline__ void q4k_mma_block(const Q4kMmaRaw& raw, const Q4kMmaX& X, int t4, float (&acc)[4]) {
  // Scales and mins of sub-blocks 0..3 / 4..7 as bytes (Unit<q4_k>::scale_min), d and dmin.
  uint32_t sc[2][2], mn[2][2];
  float d[2], dmin[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const uint32_t Y = raw.h[i].y, Z = raw.h[i].z, W = raw.h[i].w;
    sc[i][0] = Y & 0x3f3f3f3fu;
    mn[i][0] = Z & 0x3f3f3f3fu;
    sc[i][1] = (W & 0x0f0f0f0fu) | ((Y >> 2) & 0x30303030u);
    mn[i][1] = ((W >> 4) & 0x0f0f0f0fu) | ((Z >> 2) & 0x30303030u);
    d[i] = half_bits_to_f32(uint16_t(raw.h[i].x & 0xffffu));
    dmin[i] = half_bits_to_f32(uint16_t(raw.h[i].x >> 16));
  }
  int isum[4] = {0, 0, 0, 0}, msum[4] = {0, 0, 0, 0};
#pragma unroll
  for (int s = 0; s < 8; ++s) {
    const uint2 xv = X.v[s];
    int xs_a = 0, xs_b = 0;
    if (!MINS_MMA) {  // token g's activation sum over the sub-block, then those of tokens 2 t4 and 2 t4 + 1
      int xs = __dp4a(int(xv.y), 0x01010101, __dp4a(int(xv.x), 0x01010101, 0));
      xs += __shfl_xor_sync(0xffffffffu, xs, 1);
      xs += __shfl_xor_sync(0xffffffffu, xs, 2);
      xs_a = __shfl_sync(0xffffffffu, xs, 8 * t4);
      xs_b = __shfl_sync(0xffffffffu, xs, 8 * t4 + 4);
    }
    const int c = s >> 1, sh = 4 * (s & 1);
    const uint32_t a[4] = {(raw.q[0][c].x >> sh) & 0x0f0f0f0fu, (raw.q[1][c].x >> sh) & 0x0f0f0f0fu,
                           (raw.q[0][c].y >> sh) & 0x0f0f0f0fu, (raw.q[1][c].y >> sh) & 0x0f0f0f0fu};
    int dot[4];
    mma_s8_m16n8k32(dot, a, xv.x, xv.y);
    const int s0 = byte_of(sc[0][s >> 2], s & 3), s1 = byte_of(sc[1][s >> 2], s & 3);
    const int m0 = byte_of(mn[0][s >> 2], s & 3), m1 = byte_of(mn[1][s >> 2], s & 3);
    isum[0] += s0 * dot[0];
    isum[1] += s0 * dot[1];
    isum[2] += s1 * dot[2];
    isum[3] += s1 * dot[3];
    if (MINS_MMA) {  // mins of 6 bits: positive as s8
      const uint32_t a0 = uint32_t(m0) * 0x01010101u, a1 = uint32_t(m1) * 0x01010101u;
      const uint32_t am[4] = {a0, a1, a0, a1};
      mma_s8_m16n8k32_acc(msum, am, xv.x, xv.y);
    } else {
      msum[0] += m0 * xs_a;
      msum[1] += m0 * xs_b;
      msum[2] += m1 * xs_a;
      msum[3] += m1 * xs_b;
    }
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int i = k >> 1;
    const float xd = X.d[k & 1];
    acc[k] = __fadd_rn(acc[k], __fsub_rn(__fmul_rn(__fmul_rn(d[i], xd), float(isum[k])),
                                         __fmul_rn(__fmul_rn(dmin[i], xd), float(msum[k]))));
  }
}

// A thread's share of one Q6_K block (device layout: ql[128], qh[64], scales[16]; d apart) of rows
// g and g + 8: for half h and 16-element group p, the ql words at 64 h + 32 j + 16 p + 4 t4
// (j = 0, 1) and the qh word at 128 + 32 h + 16 p + 4 t4 (elements 16 p + 4 t4 .. + 3 of the
// half's quarters), the 16 scale bytes and d.
struct Q6kMmaRaw {
  uint32_t ql[2][2][2][2];  // [row][h][j][p]
  uint32_t qh[2][2][2];     // [row][h][p]
  uint4 sc[2];
  float d[2];
};
__device__ __forceinline__ void q6k_mma_load(const FewMmaTile& T, int64_t b, int t4, Q6kMmaRaw& raw) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const uint8_t* blk = T.row[i] + 208 * b;
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int p = 0; p < 2; ++p) {
#pragma unroll
        for (int j = 0; j < 2; ++j)
          raw.ql[i][h][j][p] = __ldcs(reinterpret_cast<const unsigned*>(blk + 64 * h + 32 * j + 16 * p + 4 * t4));
        raw.qh[i][h][p] = __ldcs(reinterpret_cast<const unsigned*>(blk + 128 + 32 * h + 16 * p + 4 * t4));
      }
    raw.sc[i] = ld_stream(blk + 192);
    raw.d[i] = half_at(T.sc[i], b);
  }
}

// The activations of a thread's share of Q6_K block b: token g's bytes 4 t4 .. 4 t4 + 3 of each
// group of 16 (h, qq, p) at 128 h + 32 qq + 16 p, and the scales of tokens 2 t4, 2 t4 + 1 (as
// q4k_mma_x: branch-free loads, tokens past the step read token NT - 1).
struct Q6kMmaX {
  uint32_t v[16];  // [8 h + 2 qq + p]
  float d[2];
};
template <int NT>
__device__ __forceinline__ void q6k_mma_x(const XRef& x, int64_t nb, int64_t b, int g, int t4, Q6kMmaX& X) {
  const int gx = g < NT ? g : NT - 1;
  const int8_t* xg = x.q + int64_t(gx) * x.n_in + 256 * b + 4 * t4;
#pragma unroll
  for (int i = 0; i < 16; ++i) X.v[i] = *reinterpret_cast<const uint32_t*>(xg + 16 * i);
  few_mma_x_scales<NT>(x, nb, b, t4, X.d);
}

// Q6_K block b's results for the thread's (row, token) pairs added to acc: the integer sum over
// the 16 groups of 16 of scale * (dot(q, x) - 32 sum(x)) = scale * dot(q - 32, x), one
// mma.m16n8k16 per group with the values q - 32 as signed bytes, then d x_d float(isum) as the
// one-token unit rounds it (UnitQ6kSpread::dot). Per group (h, quarter qq, p) a thread's 4
// values are elements 128 h + 32 qq + 16 p + 4 t4 .. + 3: ql word (h, qq % 2, p) shifted by
// 4 (qq / 2), qh word (h, p) by 2 qq.
__device__ __forceinline__ void q6k_mma_block(const Q6kMmaRaw& raw, const Q6kMmaX& X, float (&acc)[4]) {
  const uint32_t* S0 = reinterpret_cast<const uint32_t*>(&raw.sc[0]);
  const uint32_t* S1 = reinterpret_cast<const uint32_t*>(&raw.sc[1]);
  int isum[4] = {0, 0, 0, 0};
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int qq = 0; qq < 4; ++qq)
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        const int sb = 8 * h + 2 * qq + p;
        uint32_t a[2];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const uint32_t q = ((raw.ql[i][h][qq & 1][p] >> (4 * (qq >> 1))) & 0x0f0f0f0fu) |
                             (((raw.qh[i][h][p] >> (2 * qq)) & 0x03030303u) << 4);
          a[i] = (q + 0x60606060u) ^ 0x80808080u;  // q - 32 per byte (q <= 63: no carries)
        }
        int dot[4];
        mma_s8_m16n8k16(dot, a[0], a[1], X.v[sb]);
        const int s0 = int(int8_t(uint8_t(S0[sb >> 2] >> (8 * (sb & 3)))));
        const int s1 = int(int8_t(uint8_t(S1[sb >> 2] >> (8 * (sb & 3)))));
        isum[0] += s0 * dot[0];
        isum[1] += s0 * dot[1];
        isum[2] += s1 * dot[2];
        isum[3] += s1 * dot[3];
      }
#pragma unroll
  for (int k = 0; k < 4; ++k) acc[k] = __fadd_rn(acc[k], __fmul_rn(__fmul_rn(raw.d[k >> 1], X.d[k & 1]), float(isum[k])));
}

// The lead lanes' sums of a tile, [lead lane][row][token] (Q4_K: 8 lead lanes, Q6_K: 16).
using FewMmaLead = float[16][kFewMmaRows][8];

// Stores a warp's per-(row, token) sums of lead lane m.
__device__ __forceinline__ void few_mma_store_lead(FewMmaLead& lead, int m, int g, int t4, const float (&acc)[4]) {
  lead[m][g][2 * t4] = acc[0];
  lead[m][g][2 * t4 + 1] = acc[1];
  lead[m][g + 8][2 * t4] = acc[2];
  lead[m][g + 8][2 * t4 + 1] = acc[3];
}

// Q4_K rows of a tile: warp w takes blocks w, w + 8, ... (lead lane 4w of the one-token row), the
// next block's loads issued before the current one is computed.
template <int NT>
__device__ __forceinline__ void q4k_few_mma_rows(const FewMmaTile& T, const XRef& x, bool early, int warp, int g, int t4,
                                                 FewMmaLead& lead) {
  const int64_t nb = x.n_in / 256;
  Q4kMmaRaw cur, next;
  if (early && warp < nb) q4k_mma_load(T, warp, t4, cur);
  BRISK_PDL_ENTER();
  if (!early && warp < nb) q4k_mma_load(T, warp, t4, cur);
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int64_t b = warp; b < nb; b += kFewMmaWarps) {  // warp-uniform
    if (b + kFewMmaWarps < nb) q4k_mma_load(T, b + kFewMmaWarps, t4, next);
    Q4kMmaX X;
    q4k_mma_x<NT>(x, nb, b, g, t4, X);
    q4k_mma_block(cur, X, t4, acc);
    cur = next;
  }
  few_mma_store_lead(lead, warp, g, t4, acc);
}

// Q6_K rows of a tile: warp w takes blocks w, w + 8, ..., which are lead lane 2w's (blocks w mod
// 16) and lead lane 2 (w + 8)'s in turn.
template <int NT>
__device__ __forceinline__ void q6k_few_mma_rows(const FewMmaTile& T, const XRef& x, bool early, int warp, int g, int t4,
                                                 FewMmaLead& lead) {
  const int64_t nb = x.n_in / 256;
  Q6kMmaRaw cur, next;
  if (early && warp < nb) q6k_mma_load(T, warp, t4, cur);
  BRISK_PDL_ENTER();
  if (!early && warp < nb) q6k_mma_load(T, warp, t4, cur);
  float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
  for (int64_t b = warp; b < nb; b += kFewMmaWarps) {  // warp-uniform
    if (b + kFewMmaWarps < nb) q6k_mma_load(T, b + kFewMmaWarps, t4, next);
    Q6kMmaX X;
    q6k_mma_x<NT>(x, nb, b, g, t4, X);
    if ((b >> 3) & 1)  // acc[] by a constant index: registers
      q6k_mma_block(cur, X, acc[1]);
    else
      q6k_mma_block(cur, X, acc[0]);
    cur = next;
  }
  few_mma_store_lead(lead, warp, g, t4, acc[0]);
  few_mma_store_lead(lead, warp + kFewMmaWarps, g, t4, acc[1]);
}

// The end of a tile (after the barrier that completes `lead`): a thread per (row, token) replays
// the one-token shuffle tree (finish_row: lanes at distance 16, 8, 4, 2, 1; Q4_K: lead lanes 4m
// at m ^ 4, m ^ 2, m ^ 1, then lanes of +0 twice; Q6_K: lead lanes 2m at m ^ 8, m ^ 4, m ^ 2,
// m ^ 1, then lanes of +0 once), adds the bias and the residual, stores.
template <int NT>
__device__ __forceinline__ void few_mma_store_row(const FewMmaLead& lead, const GemvPart& P, int64_t r0, bool q6k) {
  if (int(threadIdx.x) >= kFewMmaRows * NT) return;
  const int rr = int(threadIdx.x) / NT, t = int(threadIdx.x) % NT;
  const int64_t r = r0 + rr;
  if (r >= P.n_out) return;
  float v;
  if (q6k) {
    float b8[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) b8[i] = __fadd_rn(lead[i][rr][t], lead[i + 8][rr][t]);
    const float c0 = __fadd_rn(__fadd_rn(b8[0], b8[4]), __fadd_rn(b8[2], b8[6]));
    const float c1 = __fadd_rn(__fadd_rn(b8[1], b8[5]), __fadd_rn(b8[3], b8[7]));
    v = __fadd_rn(__fadd_rn(c0, c1), 0.0f);
  } else {
    float a[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) a[i] = lead[i][rr][t];
    const float c0 = __fadd_rn(__fadd_rn(a[0], a[4]), __fadd_rn(a[2], a[6]));
    const float c1 = __fadd_rn(__fadd_rn(a[1], a[5]), __fadd_rn(a[3], a[7]));
    v = __fadd_rn(__fadd_rn(__fadd_rn(c0, c1), 0.0f), 0.0f);
  }
  const float o = __fadd_rn(v, P.bias ? P.bias[r] : 0.0f);
  P.out[t * P.out_stride + r] = o;
  if (P.res) P.sum[t * P.sum_stride + r] = __fadd_rn(P.res[t * P.res_stride + r], o);
}

// The few-token kernel over Q4_K and Q6_K parts (bit i of q6k_parts: part i is Q6_K): a block
// takes 16 rows of one part; its warps' lead-lane sums meet in shared memory and
// few_mma_store_row replays the one-token tree over them.
template <int NT>
__global__ void __launch_bounds__(32 * kFewMmaWarps, 2) few_mma_kernel(GemvParts parts, XRef x, unsigned q6k_parts,
                                                                    bool early) {
  static_assert(NT >= 1 && NT <= 8, "an mma tile holds 8 tokens");
  __shared__ FewMmaLead lead;
  unsigned b_local;
  const int m = block_part(parts, b_local);
  const GemvPart& P = parts.p[m];
  const bool q6k = (q6k_parts >> m) & 1u;  // block-uniform
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
  const int g = lane >> 2, t4 = lane & 3;
  const FewMmaTile T = few_mma_tile(P, b_local, g);
  if (q6k)
    q6k_few_mma_rows<NT>(T, x, early, warp, g, t4, lead);
  else
    q4k_few_mma_rows<NT>(T, x, early, warp, g, t4, lead);
  __syncthreads();
  few_mma_store_row<NT>(lead, P, T.r0, q6k);
}

// Launches few_mma_kernel for nt (2..8) tokens over `parts` (Q4_K, and Q6_K where q6k_parts has
// their bit; block_end recounted in blocks of kFewMmaRows rows). The default is the pipelined
// kernel of gemv_few_pipe.cuh (launch_few_mma); this one is its kill switch.
inline void launch_few_mma_tiles(GemvParts parts, const XRef& x, int nt, unsigned q6k_parts, bool early, cudaStream_t s) {
  unsigned blocks = 0;
  for (int i = 0; i < parts.n; ++i) {
    blocks += unsigned((parts.p[i].n_out + kFewMmaRows - 1) / kFewMmaRows);
    parts.p[i].block_end = blocks;
  }
  const dim3 grid(blocks), block(32 * kFewMmaWarps);
#define BRISK_FEW_MMA_CASE(N) \
  case N: launch_kernel(few_mma_kernel<N>, grid, block, 0, s, parts, x, q6k_parts, early); return;
  switch (nt) {
    BRISK_FEW_MMA_CASE(2) BRISK_FEW_MMA_CASE(3) BRISK_FEW_MMA_CASE(4) BRISK_FEW_MMA_CASE(5)
    BRISK_FEW_MMA_CASE(6) BRISK_FEW_MMA_CASE(7) BRISK_FEW_MMA_CASE(8)
    default: return;
  }
#undef BRISK_FEW_MMA_CASE
}

}  // namespace brisk::cuda
