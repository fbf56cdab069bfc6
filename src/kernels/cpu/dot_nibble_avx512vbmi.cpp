// AVX-512 VBMI + BITALG + GFNI decode dot products for Q4_0 and Q5_0 weights with Q8_0 activations, for 1..8
// tokens at once with bit-identical results per token (the same role as the Q4_0/Q5_0 kernels
// of dot_q32_avx512.cpp, which CPUs without VBMI keep using).
//
// Decode of these formats is close to instruction-bound at full memory bandwidth: the stored
// blocks (18 or 22 bytes) do not line up with vector lanes, and extracting two blocks' nibbles
// at a time costs two loads and several shuffles. Here four blocks ("a quad": 72 or 88
// contiguous bytes) are read with two overlapping 64-byte loads that end exactly at the quad's
// last byte, and one two-source byte permute (vpermt2b) puts the 4 x 16 code bytes side by
// side, one block per 128-bit lane:
//   lo = codes & 15          lane L: elements 0..15 of block L of the quad
//   hi = codes >> 4          lane L: elements 16..31 (one GFNI affine map per vector)
// Q5_0's fifth bits come the same way: a permute of the qh bytes, then two bit-shuffles
// (vpshufbitqmb) into 64-bit masks that add 16 to the selected code bytes (the repacked layout
// stores those two masks as they are). vpdpbusd of lo and hi against the prepared activations
// gives each block's sum in 4 int32 of its lane; the 4 quads of a group of 16 blocks reduce to
// one vector of 16 block sums in 6 instructions, lane 4L + j holding block 4j + L. The weight
// scales are permuted straight from the loaded bytes into that lane order (masked vpermb), so
// per 16 blocks a token costs 8 vpdpbusd, the reduction and 3 float ops.
//
// The activation row is prepared once per GEMV call (shared by all rows), per group of 16
// blocks: 8 x 64 bytes x (quad j: its lo-half activations, then its hi-half ones, one block
// per lane), 16 int32 corr = -offset * (sum of the block's activations) and 16 float dx, both
// in the reduction's lane order. acc += float(block sums + corr) * (d_w * d_x). For one token over
// rows of at most two groups (up to 1024 elements) the prepared codes stay in registers across
// all the rows (gemv_short_rows).
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>
#include <bit>
#include <cstring>
#include <vector>

#include "core/flags.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/dot_isa.h"
#include "kernels/cpu/stream_load_avx512.h"
#include "quant/blocks.h"

namespace brisk::kernels::avx512vbmi {
namespace {

using quant::BlockQ4_0;
using quant::BlockQ5_0;
using quant::BlockQ8_0;

constexpr int kGroup = 16;  // blocks per group
constexpr int kQuads = 4;   // quads per group
constexpr size_t kGroupBytes = 2 * kQuads * 64 + 64 + 64;

// Block of reduced lane l (l = 4L + j holds block 4j + L of the group).
constexpr int block_of_lane(int l) { return 4 * (l % 4) + l / 4; }

struct Prepared {
  const uint8_t* base;  // (n_groups, kGroupBytes)
  const __m512i* x(int64_t g, int v) const { return reinterpret_cast<const __m512i*>(base + g * kGroupBytes + 64 * v); }
  const __m512i* corr(int64_t g) const { return reinterpret_cast<const __m512i*>(base + g * kGroupBytes + 8 * 64); }
  const float* dx(int64_t g) const { return reinterpret_cast<const float*>(base + g * kGroupBytes + 9 * 64); }
};

// Byte-permute tables of a format whose quad is read as A = bytes [0, 64) and B = bytes
// [kSecond, kSecond + 64) (kSecond + 64 = the quad's size): index i < 64 selects A[i], 64 + i
// selects B[i].
template <int kBytes, int kQsAt, int kQhAt>
struct QuadTables {
  static constexpr int kSecond = 4 * kBytes - 64;
  // Source index of byte `at` of the quad, from A when the `len` bytes starting there lie in A.
  static constexpr uint8_t source(int at, int first_of_run, int len) {
    return first_of_run + len <= 64 ? uint8_t(at) : uint8_t(64 + at - kSecond);
  }
  // Byte 16L + j: code byte j of block L.
  alignas(64) static constexpr std::array<uint8_t, 64> qs = [] {
    std::array<uint8_t, 64> t{};
    for (int L = 0; L < 4; ++L)
      for (int j = 0; j < 16; ++j) t[size_t(16 * L + j)] = source(kBytes * L + kQsAt + j, kBytes * L + kQsAt, 16);
    return t;
  }();
  // Bytes 16L + e and 16L + 8 + e (e < 4): qh byte e of block L (its 32 high bits, bit i for
  // element i), so that qwords 2L and 2L + 1 both start with them.
  alignas(64) static constexpr std::array<uint8_t, 64> qh = [] {
    std::array<uint8_t, 64> t{};
    for (int L = 0; L < 4; ++L)
      for (int e = 0; e < 4; ++e)
        for (int half = 0; half < 2; ++half)
          t[size_t(16 * L + 8 * half + e)] = source(kBytes * L + kQhAt + e, kBytes * L + kQhAt, 4);
    return t;
  }();
  // Scale of quad position j (0..3): fp16 of block L goes to word 4L + j of the scale vector.
  // Single-source permutes (vpermb) from A, or from B for a block whose scale lies past A.
  static constexpr bool scale_in_a(int L) { return kBytes * L + 2 <= 64; }
  alignas(64) static constexpr std::array<std::array<uint8_t, 64>, 4> scale_idx = [] {
    std::array<std::array<uint8_t, 64>, 4> t{};
    for (int j = 0; j < 4; ++j)
      for (int L = 0; L < 4; ++L)
        for (int e = 0; e < 2; ++e)
          t[size_t(j)][size_t(2 * (4 * L + j) + e)] =
              uint8_t(scale_in_a(L) ? kBytes * L + e : kBytes * L + e - kSecond);
    return t;
  }();
  static constexpr __mmask64 scale_mask(int j, bool from_a) {
    __mmask64 m = 0;
    for (int L = 0; L < 4; ++L)
      if (scale_in_a(L) == from_a) m |= __mmask64(3) << (2 * (4 * L + j));
    return m;
  }
};

// vpshufbitqmb selector table: byte m picks bit first + m % period of its qword.
constexpr std::array<uint8_t, 64> bit_selectors(int first, int period) {
  std::array<uint8_t, 64> t{};
  for (int m = 0; m < 64; ++m) t[size_t(m)] = uint8_t(first + m % period);
  return t;
}

// Stored layout: mask bit 16L + j takes bit j (elements 0..15) or bit 16 + j (elements
// 16..31) of the qword holding block L's high bits.
alignas(64) constexpr std::array<uint8_t, 64> kHighBitLo = bit_selectors(0, 16);
alignas(64) constexpr std::array<uint8_t, 64> kHighBitHi = bit_selectors(16, 16);

struct FmtQ4_0 {
  using Block = BlockQ4_0;
  static constexpr int kOffset = 8;  // code - offset = the stored value
  static constexpr int kShift = std::countr_zero(unsigned(kOffset));
  static constexpr bool kHighBit = false;
  static constexpr bool kRepacked = false;
  using Tables = QuadTables<sizeof(Block), 2, 0>;
};

struct FmtQ5_0 {
  using Block = BlockQ5_0;
  static constexpr int kOffset = 16;
  static constexpr int kShift = std::countr_zero(unsigned(kOffset));
  static constexpr bool kHighBit = true;
  static constexpr bool kRepacked = false;
  using Tables = QuadTables<sizeof(Block), 6, 2>;
};

// The same formats in the repacked row layout of quant/repack.h (Q4_0_R16 / Q5_0_R16).
template <class Stored>
struct Repacked : Stored {
  using StoredFmt = Stored;
  static constexpr bool kRepacked = true;
};
using FmtQ4_0R16 = Repacked<FmtQ4_0>;
using FmtQ5_0R16 = Repacked<FmtQ5_0>;

inline __m512i load_table(const std::array<uint8_t, 64>& t) { return _mm512_load_si512(t.data()); }

// x >> 4 per byte in one instruction (a shift and a mask otherwise): the GF(2) affine map whose
// matrix moves bit i + 4 of each byte to bit i (row byte 7 - i of the matrix selects bit i + 4).
inline __m512i high_nibbles(__m512i x) {
  return _mm512_gf2p8affine_epi64_epi8(x, _mm512_set1_epi64(0x1020408000000000LL), 0);
}

// Codes (lo, hi) of the quad at q and its 4 scales merged into scales16 (fp16 words in the
// reduction's lane order) at quad position j.
template <class Fmt>
inline void decode_quad(const uint8_t* q, int j, __m512i* lo, __m512i* hi, __m512i* scales16) {
  using T = typename Fmt::Tables;
  const __m512i a = load_weights_512(q);
  const __m512i b = load_weights_512(q + T::kSecond);
  const __m512i codes = _mm512_permutex2var_epi8(a, load_table(T::qs), b);
  *lo = _mm512_and_si512(codes, _mm512_set1_epi8(0x0F));
  *hi = high_nibbles(codes);
  if constexpr (Fmt::kHighBit) {
    // qwords 2L and 2L + 1 hold block L's 32 high bits; vpshufbitqmb picks bit j (lo) or
    // 16 + j (hi) of them for code byte 16L + j.
    const __m512i h = _mm512_permutex2var_epi8(a, load_table(T::qh), b);
    const __m512i c16 = _mm512_set1_epi8(0x10);
    *lo = _mm512_mask_add_epi8(*lo, _mm512_bitshuffle_epi64_mask(h, load_table(kHighBitLo)), *lo, c16);
    *hi = _mm512_mask_add_epi8(*hi, _mm512_bitshuffle_epi64_mask(h, load_table(kHighBitHi)), *hi, c16);
  }
  const __m512i idx = _mm512_load_si512(T::scale_idx[size_t(j)].data());
  constexpr __mmask64 kFromA[4] = {T::scale_mask(0, true), T::scale_mask(1, true), T::scale_mask(2, true),
                                   T::scale_mask(3, true)};
  constexpr __mmask64 kFromB[4] = {T::scale_mask(0, false), T::scale_mask(1, false), T::scale_mask(2, false),
                                   T::scale_mask(3, false)};
  *scales16 = _mm512_mask_permutexvar_epi8(*scales16, kFromA[j], idx, a);
  if constexpr (kFromB[0] != 0) *scales16 = _mm512_mask_permutexvar_epi8(*scales16, kFromB[j], idx, b);
}

// 4 vectors (quad j: 4 int32 partial sums per block lane) -> 16 block sums, lane 4L + j.
inline __m512i reduce_quads(const __m512i* p) {
  const __m512i r0 = _mm512_add_epi32(_mm512_unpacklo_epi32(p[0], p[1]), _mm512_unpackhi_epi32(p[0], p[1]));
  const __m512i r1 = _mm512_add_epi32(_mm512_unpacklo_epi32(p[2], p[3]), _mm512_unpackhi_epi32(p[2], p[3]));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(r0, r1), _mm512_unpackhi_epi64(r0, r1));
}

// Writes the prepared activation of one Q8_0 row of nb blocks (layout in the header comment).
template <class Fmt>
void prepare(const BlockQ8_0* y, int64_t nb, uint8_t* out) {
  const int64_t n_groups = (nb + kGroup - 1) / kGroup;
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t g = 0; g < n_groups; ++g) {
    const int64_t b0 = g * kGroup;
    uint8_t* go = out + g * kGroupBytes;
    std::memset(go, 0, kGroupBytes);
    __m512i sums[kQuads];
    for (int j = 0; j < kQuads; ++j) {
      uint8_t* xlo = go + 64 * (2 * j);
      uint8_t* xhi = go + 64 * (2 * j + 1);
      for (int L = 0; L < 4; ++L) {
        const int64_t b = b0 + 4 * j + L;
        if (b >= nb) continue;
        std::memcpy(xlo + 16 * L, y[b].qs, 16);
        std::memcpy(xhi + 16 * L, y[b].qs + 16, 16);
      }
      const __m512i vlo = _mm512_load_si512(xlo), vhi = _mm512_load_si512(xhi);
      sums[j] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, vlo), ones, vhi);
    }
    _mm512_store_si512(go + 8 * 64,
                       _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(reduce_quads(sums), Fmt::kShift)));
    float* dx = reinterpret_cast<float*>(go + 9 * 64);
    for (int l = 0; l < kGroup; ++l) {
      const int64_t b = b0 + block_of_lane(l);
      dx[l] = b < nb ? _cvtsh_ss(y[b].d) : 0.0f;
    }
  }
}

// acc[t] += the group's 16 block sums for token t, scaled: lo/hi are the codes of its 4 quads,
// scales16 the 16 weight scales (fp16, reduction lane order).
template <int NT>
inline void accumulate_group(const __m512i* lo, const __m512i* hi, __m512i scales16, const Prepared* xp, int64_t g,
                             __m512* acc) {
  const __m512 dw = _mm512_cvtph_ps(_mm512_castsi512_si256(scales16));
  for (int t = 0; t < NT; ++t) {
    __m512i part[kQuads];
    for (int j = 0; j < kQuads; ++j)
      part[j] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[j], _mm512_load_si512(xp[t].x(g, 2 * j))),
                                    hi[j], _mm512_load_si512(xp[t].x(g, 2 * j + 1)));
    const __m512i sums = _mm512_add_epi32(reduce_quads(part), _mm512_load_si512(xp[t].corr(g)));
    const __m512 s = _mm512_mul_ps(dw, _mm512_load_ps(xp[t].dx(g)));
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), s, acc[t]);
  }
}

// out[t * out_stride] = dot(row w, token t) for NT prepared tokens, stored layout.
template <int NT, class Fmt>
void row_dot_stored(int64_t nb, const void* w, const Prepared* xp, float* out, size_t out_stride) {
  using Block = typename Fmt::Block;
  constexpr int kQuadBytes = 4 * int(sizeof(Block));
  const auto* x = static_cast<const uint8_t*>(w);
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b0 = 0, g = 0; b0 < nb; b0 += kGroup, ++g) {
    const uint8_t* gw = x + b0 * int64_t(sizeof(Block));
    const int nv = int(nb - b0 < kGroup ? nb - b0 : kGroup);
    for (size_t off = 0; off < kGroup * sizeof(Block); off += 64)
      _mm_prefetch(reinterpret_cast<const char*>(gw) + kWeightPrefetchBytes + off, _MM_HINT_T1);
    __m512i lo[kQuads], hi[kQuads], scales16 = _mm512_setzero_si512();
    for (int j = 0; j < kQuads; ++j) {
      const int in_quad = nv - 4 * j;
      if (in_quad >= 4) {
        decode_quad<Fmt>(gw + j * kQuadBytes, j, &lo[j], &hi[j], &scales16);
      } else if (in_quad > 0) {  // the row's last blocks: a zero-padded copy (never read past the row)
        alignas(64) uint8_t tail[kQuadBytes] = {};
        std::memcpy(tail, gw + j * kQuadBytes, size_t(in_quad) * sizeof(Block));
        decode_quad<Fmt>(tail, j, &lo[j], &hi[j], &scales16);
      } else {
        lo[j] = hi[j] = _mm512_setzero_si512();
      }
    }
    accumulate_group<NT>(lo, hi, scales16, xp, g, acc);
  }
  for (int t = 0; t < NT; ++t) out[size_t(t) * out_stride] = _mm512_reduce_add_ps(acc[t]);
}

// Scale words of a partial group (4q scales in block order) -> reduction lane order: lane l
// takes block 4 (l % 4) + l / 4, present when l % 4 < q.
alignas(32) constexpr std::array<uint16_t, 16> kTailScaleIdx = [] {
  std::array<uint16_t, 16> t{};
  for (int l = 0; l < 16; ++l) t[size_t(l)] = uint16_t(4 * (l % 4) + l / 4);
  return t;
}();
constexpr __mmask16 tail_scale_lanes(int q) {
  __mmask16 m = 0;
  for (int l = 0; l < 16; ++l)
    if (l % 4 < q) m = __mmask16(m | (1u << l));
  return m;
}

// Codes of a repacked quad: one load, no permute. Q5_0: the quad's 16 qh bytes are the two
// 64-bit masks of the code bytes that get their fifth bit (low nibbles, then high nibbles), read
// straight into mask registers (widening them and two vpshufbitqmb instead cost 10-15 % of the
// kernel's rate in gemv_l2).
template <class Fmt>
inline void decode_packed_quad(const uint8_t* codes, const uint8_t* qh, __m512i* lo, __m512i* hi) {
  const __m512i c = load_weights_512(codes);
  *lo = _mm512_and_si512(c, _mm512_set1_epi8(0x0F));
  *hi = high_nibbles(c);
  if constexpr (Fmt::kHighBit) {
    uint64_t mask_lo, mask_hi;
    std::memcpy(&mask_lo, qh, 8);
    std::memcpy(&mask_hi, qh + 8, 8);
    const __m512i c16 = _mm512_set1_epi8(0x10);
    *lo = _mm512_mask_add_epi8(*lo, _cvtu64_mask64(mask_lo), *lo, c16);
    *hi = _mm512_mask_add_epi8(*hi, _cvtu64_mask64(mask_hi), *hi, c16);
  }
}

// The codes of a whole repacked group at gw, and its 16 scales (fp16, reduction lane order).
template <class Fmt>
inline __m512i decode_full_group(const uint8_t* gw, __m512i* lo, __m512i* hi) {
  constexpr int kQhBytes = Fmt::kHighBit ? 16 : 0;  // per quad
  for (int j = 0; j < kQuads; ++j) decode_packed_quad<Fmt>(gw + 64 * j, gw + 256 + kQhBytes * j, &lo[j], &hi[j]);
  return _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gw + 256 + 4 * kQhBytes)));
}

// The codes and scales of a row's last partial group of M (1..15) blocks, M known at compile
// time: its q = M / 4 whole quads as in decode_full_group (then their 4q scales in block order),
// its last r = M % 4 blocks (stored layout) through decode_quad. Only the kTailQuads<M> quads
// that hold blocks are written; with M a constant they stay in registers (a run-time tail put
// them on the stack: rows of 896 ran at half the rate of rows of 1024 in gemv_l2).
template <int M>
constexpr int kTailQuads = (M + 3) / 4;
template <class Fmt, int M>
__attribute__((always_inline)) inline __m512i decode_tail_group_fixed(const uint8_t* gw, __m512i* lo, __m512i* hi) {
  static_assert(M >= 1 && M < kGroup);
  using Stored = typename Fmt::StoredFmt;
  using Block = typename Fmt::Block;
  constexpr int kQhBytes = Fmt::kHighBit ? 16 : 0;
  constexpr int q = M / 4, r = M % 4;
  for (int j = 0; j < q; ++j) decode_packed_quad<Fmt>(gw + 64 * j, gw + 64 * q + kQhBytes * j, &lo[j], &hi[j]);
  const uint8_t* sc = gw + (64 + kQhBytes) * q;
  __m512i scales16 = _mm512_setzero_si512();
  if constexpr (q > 0) {
    const __m256i words = _mm256_maskz_loadu_epi16(__mmask16((1u << (4 * q)) - 1), sc);
    scales16 = _mm512_zextsi256_si512(_mm256_maskz_permutexvar_epi16(
        tail_scale_lanes(q), _mm256_load_si256(reinterpret_cast<const __m256i*>(kTailScaleIdx.data())), words));
  }
  if constexpr (r > 0) {  // a zero-padded copy of the stored blocks (never read past the row)
    alignas(64) uint8_t tail[4 * sizeof(Block)] = {};
    std::memcpy(tail, gw + 4 * q * int64_t(sizeof(Block)), size_t(r) * sizeof(Block));
    decode_quad<Stored>(tail, q, &lo[q], &hi[q], &scales16);
  }
  return scales16;
}

// decode_tail_group_fixed for a run-time m (1..15; rows of more than two groups): one compare per
// shape, each inlined, so that the quads stay in registers; the quads past the tail are zero.
template <class Fmt, int... M>
__attribute__((always_inline)) inline __m512i decode_tail_group_any(const uint8_t* gw, int m, __m512i* lo, __m512i* hi,
                                                                    std::integer_sequence<int, M...>) {
  for (int j = 0; j < kQuads; ++j) lo[j] = hi[j] = _mm512_setzero_si512();
  __m512i scales16 = _mm512_setzero_si512();
  (void)((m == M + 1 && (scales16 = decode_tail_group_fixed<Fmt, M + 1>(gw, lo, hi), true)) || ...);
  return scales16;
}

inline void prefetch_ahead(const uint8_t* gw, size_t bytes) {
  for (size_t off = 0; off < bytes; off += 64)
    _mm_prefetch(reinterpret_cast<const char*>(gw) + kWeightPrefetchBytes + off, _MM_HINT_T1);
}

// Repacked layout: whole groups read straight into the reduction's order; a partial group's
// whole quads likewise, its last r < 4 blocks (stored layout) through decode_quad.
template <int NT, class Fmt>
__attribute__((always_inline)) inline void row_dot_repacked(int64_t nb, const void* w, const Prepared* xp, float* out,
                                                            size_t out_stride) {
  using Block = typename Fmt::Block;
  const auto* x = static_cast<const uint8_t*>(w);
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  const int64_t n_full = nb / kGroup;
  for (int64_t g = 0; g < n_full; ++g) {
    const uint8_t* gw = x + g * kGroup * int64_t(sizeof(Block));
    prefetch_ahead(gw, kGroup * sizeof(Block));
    __m512i lo[kQuads], hi[kQuads];
    const __m512i scales16 = decode_full_group<Fmt>(gw, lo, hi);
    accumulate_group<NT>(lo, hi, scales16, xp, g, acc);
  }
  if (const int m = int(nb - n_full * kGroup); m > 0) {
    const uint8_t* gw = x + n_full * kGroup * int64_t(sizeof(Block));
    prefetch_ahead(gw, size_t(m) * sizeof(Block));
    __m512i lo[kQuads], hi[kQuads];
    const __m512i scales16 = decode_tail_group_any<Fmt>(gw, m, lo, hi, std::make_integer_sequence<int, kGroup - 1>{});
    accumulate_group<NT>(lo, hi, scales16, xp, n_full, acc);
  }
  for (int t = 0; t < NT; ++t) out[size_t(t) * out_stride] = _mm512_reduce_add_ps(acc[t]);
}

// One token over rows of G = 1 or 2 groups (up to 1024 elements: Qwen2.5-0.5B's rows of 896)
// in the repacked layout, the last group holding M blocks: the prepared activation codes stay in
// registers (8 vectors per group) for all the rows instead of being reloaded per row, and the
// shape of the last group is fixed at compile time (with a run-time tail, rows of 896 ran at
// half the rate of rows of 1024 in gemv_l2). Per row the operations of row_dot_repacked<1> in
// the same order, less the products of the all-zero quads past a partial group's blocks (which
// add 0), so the same bits. (They are written out here rather than shared with
// accumulate_group: passing the vectors to a helper by pointer put them back on the stack, and
// rows of 1024 fell from 67 to 36 GB/s in gemv_l2.)
template <class Fmt, int G, int M>
void gemv_short_rows(const uint8_t* w, size_t row_bytes, int64_t n_rows, const Prepared& xp, float* y) {
  using Block = typename Fmt::Block;
  __m512i xv[G][2 * kQuads];
  for (int g = 0; g < G; ++g)
    for (int v = 0; v < 2 * kQuads; ++v) xv[g][v] = _mm512_load_si512(xp.x(g, v));
  for (int64_t r = 0; r < n_rows; ++r) {
    const uint8_t* row = w + size_t(r) * row_bytes;
    __m512 acc = _mm512_setzero_ps();
#pragma GCC unroll 2
    for (int g = 0; g < G; ++g) {
      const uint8_t* gw = row + g * kGroup * int64_t(sizeof(Block));
      const bool whole = g < G - 1 || M == kGroup;
      prefetch_ahead(gw, size_t(whole ? kGroup : M) * sizeof(Block));
      __m512i lo[kQuads], hi[kQuads];
      __m512i scales16;
      if constexpr (M == kGroup) {
        scales16 = decode_full_group<Fmt>(gw, lo, hi);
      } else {
        scales16 = whole ? decode_full_group<Fmt>(gw, lo, hi) : decode_tail_group_fixed<Fmt, M>(gw, lo, hi);
      }
      const int used = whole ? kQuads : kTailQuads<M>;
      const __m512 dw = _mm512_cvtph_ps(_mm512_castsi512_si256(scales16));
      __m512i part[kQuads];
      for (int j = 0; j < kQuads; ++j)
        part[j] = j < used ? _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[j], xv[g][2 * j]),
                                                 hi[j], xv[g][2 * j + 1])
                           : _mm512_setzero_si512();
      const __m512i sums = _mm512_add_epi32(reduce_quads(part), _mm512_load_si512(xp.corr(g)));
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_mul_ps(dw, _mm512_load_ps(xp.dx(g))), acc);
    }
    y[r] = _mm512_reduce_add_ps(acc);
  }
}

// One token over repacked rows of more than two groups: n_full whole groups, then a last group
// of M blocks (0: none) whose shape is fixed at compile time, as in gemv_short_rows, so the
// quads past its blocks are skipped and its decoded quads stay in registers. Per row the
// operations of row_dot_repacked<1> in the same order, less the products of all-zero quads, so
// the same bits. (row_dot_repacked picks the tail's shape per row through a chain of compares:
// Qwen2.5-0.5B's down projection, rows of 4864 = 9 groups + 8 blocks, then streamed at about 60 %
// of a plain read of its bytes, against 80 % for rows of 4096 or 5120, which have no tail.)
template <class Fmt, int M>
void gemv_long_rows(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_full, const Prepared& xp, float* y) {
  using Block = typename Fmt::Block;
  for (int64_t r = 0; r < n_rows; ++r) {
    const uint8_t* row = w + size_t(r) * row_bytes;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t g = 0; g < n_full; ++g) {
      const uint8_t* gw = row + g * kGroup * int64_t(sizeof(Block));
      prefetch_ahead(gw, kGroup * sizeof(Block));
      __m512i lo[kQuads], hi[kQuads];
      const __m512i scales16 = decode_full_group<Fmt>(gw, lo, hi);
      accumulate_group<1>(lo, hi, scales16, &xp, g, &acc);
    }
    if constexpr (M > 0) {
      const uint8_t* gw = row + n_full * kGroup * int64_t(sizeof(Block));
      prefetch_ahead(gw, size_t(M) * sizeof(Block));
      __m512i lo[kQuads], hi[kQuads];
      const __m512i scales16 = decode_tail_group_fixed<Fmt, M>(gw, lo, hi);
      constexpr int used = kTailQuads<M>;
      const __m512 dw = _mm512_cvtph_ps(_mm512_castsi512_si256(scales16));
      __m512i part[kQuads];
      for (int j = 0; j < kQuads; ++j)
        part[j] = j < used ? _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[j],
                                                                     _mm512_load_si512(xp.x(n_full, 2 * j))),
                                                 hi[j], _mm512_load_si512(xp.x(n_full, 2 * j + 1)))
                           : _mm512_setzero_si512();
      const __m512i sums = _mm512_add_epi32(reduce_quads(part), _mm512_load_si512(xp.corr(n_full)));
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_mul_ps(dw, _mm512_load_ps(xp.dx(n_full))), acc);
    }
    y[r] = _mm512_reduce_add_ps(acc);
  }
}

template <int NT, class Fmt>
__attribute__((always_inline)) inline void row_dot(int64_t nb, const void* w, const Prepared* xp, float* out, size_t out_stride) {
  if constexpr (Fmt::kRepacked) row_dot_repacked<NT, Fmt>(nb, w, xp, out, out_stride);
  else row_dot_stored<NT, Fmt>(nb, w, xp, out, out_stride);
}

// gemv_short_rows and gemv_long_rows serve the repacked layouts only.
template <class Fmt>
constexpr bool kHasShortRows = Fmt::kRepacked;
template <class Fmt>
constexpr bool kHasLongRows = Fmt::kRepacked;

#include "kernels/cpu/dot_prepared.inc"

}  // namespace

VecDotFn nibble_kernel(QuantType t) {
  switch (t) {
    case QuantType::Q4_0: return dot_one<FmtQ4_0>;
    case QuantType::Q5_0: return dot_one<FmtQ5_0>;
    case QuantType::Q4_0_R16: return dot_one<FmtQ4_0R16>;
    case QuantType::Q5_0_R16: return dot_one<FmtQ5_0R16>;
    default: return nullptr;
  }
}

VecDotMultiFn nibble_multi_kernel(QuantType t, int nt) {
  switch (t) {
    case QuantType::Q4_0: return pick_multi<FmtQ4_0>(nt);
    case QuantType::Q5_0: return pick_multi<FmtQ5_0>(nt);
    case QuantType::Q4_0_R16: return pick_multi<FmtQ4_0R16>(nt);
    case QuantType::Q5_0_R16: return pick_multi<FmtQ5_0R16>(nt);
    default: return nullptr;
  }
}

bool nibble_gemv(const GemvMultiParams& p) {
  switch (p.weight_type) {
    case QuantType::Q4_0: return run_gemv<FmtQ4_0>(p);
    case QuantType::Q5_0: return run_gemv<FmtQ5_0>(p);
    case QuantType::Q4_0_R16: return run_gemv<FmtQ4_0R16>(p);
    case QuantType::Q5_0_R16: return run_gemv<FmtQ5_0R16>(p);
    default: return false;
  }
}

}  // namespace brisk::kernels::avx512vbmi
