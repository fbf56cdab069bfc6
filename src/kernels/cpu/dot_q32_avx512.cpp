// AVX-512 decode dot products for the 32-element block formats with Q8_0 activations (Q8_0,
// Q4_0, Q5_0), for 1..8 tokens at once with bit-identical results per token.
//
// The 256-bit kernels of dot_x86.inc spend most of their time on per-block work (two fp16
// scales converted and multiplied, a broadcast and an FMA per 32 elements, sign fix-ups).
// Here the activation row is first prepared once (per GEMV call, shared by all rows):
//   x      per pair of blocks, 64 bytes in the order the weight codes come out of their
//          packing (Q8_0: block b then b + 1; Q4_0/Q5_0: low halves of b, b + 1, then high halves)
//   corr   per group of 16 blocks, 16 int32 = -offset * (sum of the block's 32 activations)
//   dx     per group, 16 float scales; both in the reduction's lane order
// and the weights are taken 16 blocks at a time as unsigned codes (Q8_0: q + 128, Q4_0: q,
// Q5_0: q | high bit << 4); vpdpbusd gives exact int32 lane sums of code * x, the 8 pair
// vectors are reduced to one vector of 16 block sums by a transpose-and-add tree, and adding
// corr makes them the exact sums of (code - offset) * x. The 16 weight scales are gathered in
// the same lane order, and acc += float(block sums) * (d_w * d_x) is one FMA per 16 blocks. A
// last group of fewer than 16 blocks runs the same code with the missing blocks zero.
//
// Q8_0 repacked at load (Q8_0_R16, quant/repack.h) needs no reduction tree: its 64-byte step j
// of a group holds bytes 4j..4j+3 of the 16 blocks, one block per int32 lane, and its prepared
// activation the same interleave, so the 8 vpdpbusd of a group accumulate straight into the 16
// block sums (two chains, the first started from corr). Per token and group: 8 vpdpbusd with
// the activation from memory, 1 add, then the same cvt, mul and FMA as above, on the same lane
// order (a partial last group, stored in block order, is permuted into it once per token), so
// the repacked and stored kernels give the same bits. See "Q8_0_R16" below.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <type_traits>
#include <utility>
#include <cstddef>
#include <cstring>
#include <vector>

#include "core/cpu_features.h"
#include "core/flags.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/dot_isa.h"
#include "kernels/cpu/stream_load_avx512.h"
#include "quant/blocks.h"

namespace brisk::kernels::avx512 {
namespace {

using quant::BlockQ4_0;
using quant::BlockQ5_0;
using quant::BlockQ8_0;

// Lane l of the reduced vector holds block kBlockOfLane[l] of the group (see reduce16).
alignas(64) constexpr int32_t kBlockOfLane[16] = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};

constexpr int kGroup = 16;  // blocks per group
constexpr int kPairs = 8;

// Prepared activation of one token: per group, 8 x 64 bytes x, then 16 int32 corr and 16 float
// dx in the reduction's lane order.
constexpr size_t kGroupBytes = kPairs * 64 + 64 + 64;

struct Prepared {
  const uint8_t* base;  // (n_groups, kGroupBytes)
  const __m512i* x(int64_t g, int j) const { return reinterpret_cast<const __m512i*>(base + g * kGroupBytes + 64 * j); }
  const __m512i* corr(int64_t g) const { return reinterpret_cast<const __m512i*>(base + g * kGroupBytes + kPairs * 64); }
  const float* dx(int64_t g) const { return reinterpret_cast<const float*>(base + g * kGroupBytes + kPairs * 64 + 64); }
};

// kSplit: codes come as (low halves of b, b + 1, high halves of b, b + 1), else (b, b + 1).
struct FmtQ8_0 {
  using Block = BlockQ8_0;
  static constexpr bool kSplit = false;
  static constexpr int kOffset = 128;
  static __m512i codes(const Block* x, int64_t b, bool two) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
    const __m256i hi = two ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b + 1].qs)) : _mm256_setzero_si256();
    return _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), _mm512_set1_epi8(char(0x80)));
  }
};

inline __m512i split_nibbles_pair(const uint8_t* qa, const uint8_t* qb, bool two) {
  const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qa));
  const __m128i b = two ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(qb)) : _mm_setzero_si128();
  const __m256i v = _mm256_set_m128i(b, a);
  const __m256i m = _mm256_set1_epi8(0x0F);
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(v, m)),
                            _mm256_and_si256(_mm256_srli_epi16(v, 4), m), 1);
}

struct FmtQ4_0 {
  using Block = BlockQ4_0;
  static constexpr bool kSplit = true;
  static constexpr int kOffset = 8;
  static __m512i codes(const Block* x, int64_t b, bool two) { return split_nibbles_pair(x[b].qs, x[b + 1].qs, two); }
};

struct FmtQ5_0 {
  using Block = BlockQ5_0;
  static constexpr bool kSplit = true;
  static constexpr int kOffset = 16;
  static __m512i codes(const Block* x, int64_t b, bool two) {
    uint32_t h0, h1 = 0;
    std::memcpy(&h0, x[b].qh, 4);
    if (two) std::memcpy(&h1, x[b + 1].qh, 4);
    // Byte order of the codes: b[0..15], b+1[0..15], b[16..31], b+1[16..31].
    const __mmask64 high = __mmask64(h0 & 0xFFFF) | (__mmask64(h1 & 0xFFFF) << 16) | (__mmask64(h0 >> 16) << 32) |
                           (__mmask64(h1 >> 16) << 48);
    return _mm512_or_si512(split_nibbles_pair(x[b].qs, x[b + 1].qs, two),
                           _mm512_maskz_mov_epi8(high, _mm512_set1_epi8(0x10)));
  }
};

// 8 vectors of 2 blocks x 8 int32 partial sums -> 16 block sums, lane l = block kBlockOfLane[l].
// Block b of a pair covers 128-bit lanes {0, 1} (natural) or {0, 2} (split), b + 1 the others.
template <bool kSplit>
inline __m512i reduce16(const __m512i* p) {
  __m512i r[4], s[2], t[2];
  for (int m = 0; m < 4; ++m)  // per 128-bit lane: (a0+a2, b0+b2, a1+a3, b1+b3)
    r[m] = _mm512_add_epi32(_mm512_unpacklo_epi32(p[2 * m], p[2 * m + 1]), _mm512_unpackhi_epi32(p[2 * m], p[2 * m + 1]));
  for (int n = 0; n < 2; ++n)  // per 128-bit lane L: the L-lane sums of p[4n..4n+3]
    s[n] = _mm512_add_epi32(_mm512_unpacklo_epi64(r[2 * n], r[2 * n + 1]), _mm512_unpackhi_epi64(r[2 * n], r[2 * n + 1]));
  if constexpr (kSplit) {
    for (int n = 0; n < 2; ++n)  // lane 0: L0 + L2 (blocks b), lane 1: L1 + L3 (blocks b + 1)
      t[n] = _mm512_add_epi32(s[n], _mm512_shuffle_i32x4(s[n], s[n], 0x4E));
    return _mm512_shuffle_i32x4(t[0], t[1], 0x44);  // (t0.L0, t0.L1, t1.L0, t1.L1)
  } else {
    for (int n = 0; n < 2; ++n)  // lane 0: L0 + L1 (blocks b), lane 2: L2 + L3 (blocks b + 1)
      t[n] = _mm512_add_epi32(s[n], _mm512_shuffle_i32x4(s[n], s[n], 0xB1));
    return _mm512_shuffle_i32x4(t[0], t[1], 0x88);  // (t0.L0, t0.L2, t1.L0, t1.L2)
  }
}

// Writes the prepared activation of one Q8_0 row of nb blocks for format Fmt (layout above).
template <class Fmt>
void prepare_pairs(const BlockQ8_0* y, int64_t nb, uint8_t* out) {
  static_assert(Fmt::kOffset == 8 || Fmt::kOffset == 16 || Fmt::kOffset == 128, "offset is a power of two");
  constexpr int kShift = Fmt::kOffset == 8 ? 3 : Fmt::kOffset == 16 ? 4 : 7;
  const int64_t n_groups = (nb + kGroup - 1) / kGroup;
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t g = 0; g < n_groups; ++g) {
    const int64_t b0 = g * kGroup;
    const int nv = int(nb - b0 < kGroup ? nb - b0 : kGroup);
    uint8_t* go = out + g * kGroupBytes;
    __m512i sums[kPairs];
    for (int j = 0; j < kPairs; ++j) {
      uint8_t* gx = go + 64 * j;
      __m512i xv = _mm512_setzero_si512();
      const int64_t b = b0 + 2 * j;
      if (2 * j < nv) {
        const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs));
        const __m256i hi = 2 * j + 1 < nv ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b + 1].qs))
                                          : _mm256_setzero_si256();
        if constexpr (Fmt::kSplit) {  // (b low 16, b+1 low 16, b high 16, b+1 high 16)
          const __m256i first = _mm256_permute2x128_si256(lo, hi, 0x20);
          const __m256i second = _mm256_permute2x128_si256(lo, hi, 0x31);
          xv = _mm512_inserti64x4(_mm512_castsi256_si512(first), second, 1);
        } else {
          xv = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
        }
      }
      _mm512_store_si512(gx, xv);
      sums[j] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, xv);  // lane sums of 4 bytes
    }
    // -offset * (sum of each block's 32 activations), in the lane order of the block sums
    _mm512_store_si512(go + kPairs * 64,
                       _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(reduce16<Fmt::kSplit>(sums), kShift)));
    float* dx = reinterpret_cast<float*>(go + kPairs * 64 + 64);
    for (int l = 0; l < kGroup; ++l) dx[l] = kBlockOfLane[l] < nv ? _cvtsh_ss(y[b0 + kBlockOfLane[l]].d) : 0.0f;
  }
}

// 16 fp16 scales (the first field of blocks of `stride` bytes) in kBlockOfLane order; lanes
// past the valid blocks are 0.
inline __m512 gather_scales(const void* first_block, int stride, __mmask16 valid) {
  const __m512i idx = _mm512_mullo_epi32(_mm512_load_si512(kBlockOfLane), _mm512_set1_epi32(stride));
  const __m512i raw = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, idx, first_block, 1);
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw));
}

// Lanes (in kBlockOfLane order) that hold one of the first nv blocks of a group, for nv 0..16.
constexpr std::array<__mmask16, 17> kValidLanes = [] {
  std::array<__mmask16, 17> m{};
  for (int nv = 0; nv <= kGroup; ++nv)
    for (int l = 0; l < kGroup; ++l)
      if (kBlockOfLane[l] < nv) m[size_t(nv)] = __mmask16(m[size_t(nv)] | (1u << l));
  return m;
}();

inline __mmask16 valid_lanes(int nv) { return kValidLanes[size_t(nv)]; }

// out[t * out_stride] = dot(row w, token t) for NT prepared tokens.
template <int NT, class Fmt>
__attribute__((always_inline)) inline void row_dot_pairs(int64_t nb, const void* w, const Prepared* xp, float* out,
                                                         size_t out_stride) {
  using Block = typename Fmt::Block;
  const auto* x = static_cast<const Block*>(w);
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t g0 = 0, g = 0; g0 < nb; g0 += kGroup, ++g) {
    const int nv = int(nb - g0 < kGroup ? nb - g0 : kGroup);
    // Software prefetch ahead of this group's weights (rows are contiguous).
    for (size_t off = 0; off < kGroup * sizeof(Block); off += 64)
      _mm_prefetch(reinterpret_cast<const char*>(&x[g0]) + kWeightPrefetchBytes + off, _MM_HINT_T1);
    __m512i u[kPairs];
    for (int j = 0; j < kPairs; ++j)
      u[j] = 2 * j < nv ? Fmt::codes(x, g0 + 2 * j, 2 * j + 1 < nv) : _mm512_setzero_si512();
    const __m512 dw = gather_scales(&x[g0], int(sizeof(Block)), nv == kGroup ? __mmask16(0xFFFF) : valid_lanes(nv));
    for (int t = 0; t < NT; ++t) {
      __m512i part[kPairs];
      for (int j = 0; j < kPairs; ++j)
        part[j] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[j], _mm512_load_si512(xp[t].x(g, j)));
      const __m512i sums = _mm512_add_epi32(reduce16<Fmt::kSplit>(part), _mm512_load_si512(xp[t].corr(g)));
      const __m512 s = _mm512_mul_ps(dw, _mm512_load_ps(xp[t].dx(g)));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), s, acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) out[size_t(t) * out_stride] = _mm512_reduce_add_ps(acc[t]);
}

// ---- Q8_0_R16: the interleaved layout of quant/repack.h ------------------------------------
//
// Prepared activation (same kGroupBytes per group as above): step j's 64 bytes hold, in int32
// lane l, bytes 4j..4j+3 of the lane's block (kBlockOfLane[l] in a whole group, l in a partial
// one, 0 past its blocks), then corr in the same lanes, then dx in kBlockOfLane order always
// (a partial group's block sums are permuted into that order before they meet dx).
struct FmtQ8_0R16 {
  using Block = BlockQ8_0;
};

template <class Fmt>
constexpr bool kInterleaved = std::is_same_v<Fmt, FmtQ8_0R16>;

void prepare_interleaved(const BlockQ8_0* y, int64_t nb, uint8_t* out) {
  const int64_t n_groups = (nb + kGroup - 1) / kGroup;
  const __m512i ones = _mm512_set1_epi8(1);
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  for (int64_t g = 0; g < n_groups; ++g) {
    const int64_t b0 = g * kGroup;
    const int nv = int(nb - b0 < kGroup ? nb - b0 : kGroup);
    uint8_t* go = out + g * kGroupBytes;
    const __m512i block = nv == kGroup ? _mm512_load_si512(kBlockOfLane) : lane;
    const __mmask16 valid = __mmask16((1u << nv) - 1u);  // a partial group's lanes 0..nv-1
    // Byte offset of the lane's qs[0] from the group's first block.
    const __m512i at = _mm512_add_epi32(_mm512_mullo_epi32(block, _mm512_set1_epi32(int(sizeof(BlockQ8_0)))),
                                        _mm512_set1_epi32(int(offsetof(BlockQ8_0, qs))));
    __m512i sums = _mm512_setzero_si512();
    for (int j = 0; j < kPairs; ++j) {
      const __m512i xv = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid,
                                                     _mm512_add_epi32(at, _mm512_set1_epi32(4 * j)), &y[b0], 1);
      _mm512_store_si512(go + 64 * j, xv);
      sums = _mm512_dpbusd_epi32(sums, ones, xv);  // lane sums of the block's activations
    }
    _mm512_store_si512(go + kPairs * 64, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sums, 7)));
    float* dx = reinterpret_cast<float*>(go + kPairs * 64 + 64);
    for (int l = 0; l < kGroup; ++l) dx[l] = kBlockOfLane[l] < nv ? _cvtsh_ss(y[b0 + kBlockOfLane[l]].d) : 0.0f;
  }
}

// A group's weights, decoded once for all tokens: u[j] = step j's 16 lanes of unsigned codes,
// dw = the 16 scales in kBlockOfLane order.
struct InterleavedGroup {
  __m512i u[kPairs];
  __m512 dw;
};

__attribute__((always_inline)) inline InterleavedGroup interleaved_whole_group(const uint8_t* group) {
  InterleavedGroup w;
  for (int j = 0; j < kPairs; ++j) w.u[j] = load_weights_512(group + 64 * j);
  w.dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(group + kGroup * 32)));
  return w;
}

// A partial group of nv (1..15) blocks, steps of 4 nv bytes; lanes past nv 0.
__attribute__((always_inline)) inline InterleavedGroup interleaved_tail_group(const uint8_t* group, int nv) {
  InterleavedGroup w;
  const int step = 4 * nv;  // 4..60 bytes: at most two 32-byte halves, as load_weights_512
  const __mmask32 lo = step >= 32 ? ~__mmask32(0) : __mmask32((1u << step) - 1u);
  const __mmask32 hi = step > 32 ? __mmask32((1u << (step - 32)) - 1u) : __mmask32(0);
  for (int j = 0; j < kPairs; ++j) {
    const uint8_t* p = group + step * j;
    w.u[j] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_maskz_loadu_epi8(lo, p)),
                                _mm256_maskz_loadu_epi8(hi, p + 32), 1);
  }
  const __m256i words = _mm256_maskz_loadu_epi16(__mmask16((1u << nv) - 1u), group + 32 * nv);
  const __m512 natural = _mm512_cvtph_ps(words);
  w.dw = _mm512_permutexvar_ps(_mm512_load_si512(kBlockOfLane), natural);  // lanes past nv: 0
  return w;
}

// acc + one token's products over a group: x = the token's 8 prepared steps (memory or
// registers). kPermute: a partial group (block sums in block order, moved into kBlockOfLane
// order).
template <bool kPermute, int kChains = 2>
__attribute__((always_inline)) inline __m512 interleaved_token_dot(const InterleavedGroup& w, const __m512i* x,
                                                                   __m512i corr, __m512 dx, __m512 acc) {
  // kChains independent accumulations (exact integers: any grouping gives the same sums).
  __m512i c[kChains];
  c[0] = _mm512_dpbusd_epi32(corr, w.u[0], x[0]);
  for (int j = 1; j < kChains; ++j) c[j] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.u[j], x[j]);
  for (int j = kChains; j < kPairs; ++j) c[j % kChains] = _mm512_dpbusd_epi32(c[j % kChains], w.u[j], x[j]);
  for (int n = kChains / 2; n >= 1; n /= 2)
    for (int j = 0; j < n; ++j) c[j] = _mm512_add_epi32(c[j], c[j + n]);
  __m512i sums = c[0];
  if constexpr (kPermute) sums = _mm512_permutexvar_epi32(_mm512_load_si512(kBlockOfLane), sums);
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_mul_ps(w.dw, dx), acc);
}

// acc[t] += this group's products for NT tokens.
template <int NT, bool kPermute>
__attribute__((always_inline)) inline void interleaved_group_dot(const InterleavedGroup& w, const Prepared* xp,
                                                                 int64_t g, __m512* acc) {
  for (int t = 0; t < NT; ++t)
    acc[t] = interleaved_token_dot<kPermute, NT == 1 ? 2 : 2>(w, xp[t].x(g, 0), _mm512_load_si512(xp[t].corr(g)),
                                             _mm512_load_ps(xp[t].dx(g)), acc[t]);
}

template <int NT>
__attribute__((always_inline)) inline void row_dot_interleaved(int64_t nb, const void* w, const Prepared* xp,
                                                               float* out, size_t out_stride) {
  const auto* row = static_cast<const uint8_t*>(w);
  constexpr size_t kGroupWeightBytes = kGroup * sizeof(BlockQ8_0);
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  const int64_t n_whole = nb / kGroup;
  for (int64_t g = 0; g < n_whole; ++g) {
    const uint8_t* group = row + size_t(g) * kGroupWeightBytes;
    for (size_t off = 0; off < kGroupWeightBytes; off += 64)
      _mm_prefetch(reinterpret_cast<const char*>(group) + kWeightPrefetchBytes + off, _MM_HINT_T1);
    interleaved_group_dot<NT, false>(interleaved_whole_group(group), xp, g, acc);
  }
  if (const int nv = int(nb % kGroup); nv > 0) {
    const uint8_t* group = row + size_t(n_whole) * kGroupWeightBytes;
    for (size_t off = 0; off < size_t(nv) * sizeof(BlockQ8_0); off += 64)
      _mm_prefetch(reinterpret_cast<const char*>(group) + kWeightPrefetchBytes + off, _MM_HINT_T1);
    interleaved_group_dot<NT, true>(interleaved_tail_group(group, nv), xp, n_whole, acc);
  }
  for (int t = 0; t < NT; ++t) out[size_t(t) * out_stride] = _mm512_reduce_add_ps(acc[t]);
}

// ---- the entry points of dot_prepared.inc ----------------------------------------------------

template <class Fmt>
void prepare(const BlockQ8_0* y, int64_t nb, uint8_t* out) {
  if constexpr (kInterleaved<Fmt>) prepare_interleaved(y, nb, out);
  else prepare_pairs<Fmt>(y, nb, out);
}

template <int NT, class Fmt>
__attribute__((always_inline)) inline void row_dot(int64_t nb, const void* w, const Prepared* xp, float* out,
                                                   size_t out_stride) {
  if constexpr (kInterleaved<Fmt>) row_dot_interleaved<NT>(nb, w, xp, out, out_stride);
  else row_dot_pairs<NT, Fmt>(nb, w, xp, out, out_stride);
}

// One token over rows of G = 1 or 2 groups (up to 1024 elements: Qwen2.5-0.5B's rows of 896,
// its output matrix among them), the last group holding M blocks: the token's 8 or 16 prepared
// steps stay in registers for all the rows and the last group's masks are constants. Per row
// the operations of row_dot<1, FmtQ8_0R16> in the same order, so the same bits.
template <class Fmt, int G, int M>
void gemv_short_rows(const uint8_t* w, size_t row_bytes, int64_t n_rows, const Prepared& xp, float* y) {
  static_assert(kInterleaved<Fmt>);
  constexpr size_t kGroupWeightBytes = kGroup * sizeof(BlockQ8_0);
  __m512i xv[G][kPairs];
  for (int g = 0; g < G; ++g)
    for (int j = 0; j < kPairs; ++j) xv[g][j] = _mm512_load_si512(xp.x(g, j));
  for (int64_t r = 0; r < n_rows; ++r) {
    const uint8_t* row = w + size_t(r) * row_bytes;
    __m512 acc = _mm512_setzero_ps();
#pragma GCC unroll 2
    for (int g = 0; g < G; ++g) {
      const uint8_t* group = row + size_t(g) * kGroupWeightBytes;
      const bool whole = g < G - 1 || M == kGroup;
      const int nv = whole ? kGroup : M;
      for (size_t off = 0; off < size_t(nv) * sizeof(BlockQ8_0); off += 64)
        _mm_prefetch(reinterpret_cast<const char*>(group) + kWeightPrefetchBytes + off, _MM_HINT_T1);
      const __m512i corr = _mm512_load_si512(xp.corr(g));
      const __m512 dx = _mm512_load_ps(xp.dx(g));
      if (whole) acc = interleaved_token_dot<false>(interleaved_whole_group(group), xv[g], corr, dx, acc);
      else acc = interleaved_token_dot<true>(interleaved_tail_group(group, nv), xv[g], corr, dx, acc);
    }
    y[r] = _mm512_reduce_add_ps(acc);
  }
}
template <class Fmt>
constexpr bool kHasShortRows = kInterleaved<Fmt>;

// Longer rows need no one-token specialisation: the interleaved row loop has no per-row shape
// to fix (declared for dot_prepared.inc only).
template <class Fmt>
constexpr bool kHasLongRows = false;
template <class Fmt, int M>
void gemv_long_rows(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t n_full, const Prepared& xp, float* y);

#include "kernels/cpu/dot_prepared.inc"

// Tokens of one Q8_0_R16 GEMV pass: as many as keep their prepared activations (reread for
// every row) within this share of the 48 KiB L1 data cache, the weights streaming through the
// rest. Rows of 4864 (10 groups, 6.4 KB per token) fell out of it from 6 tokens on: `gemv_l2`
// 5 tokens 19.7 us, 6 33.5, 8 64.4, against 2 x 15.3 for two passes of 4. In decode (the
// weights from memory) two passes paid off from 7 tokens on (Qwen2.5-0.5B verify of 8 tokens
// 44.0-44.8 -> 47.8-50.2 steps/s), not at 6 (3 + 3: 59-61 against 62-64).
constexpr size_t kPreparedL1Bytes = 40 << 10;

bool run_gemv_interleaved(const GemvMultiParams& p) {
  if (p.n_tokens < 1 || p.n_tokens > 8) return false;
  const size_t per_token = size_t((p.k / 32 + kGroup - 1) / kGroup) * kGroupBytes;
  const int fit = int(std::max<size_t>(1, kPreparedL1Bytes / per_token));
  const int passes = (p.n_tokens + fit - 1) / fit;
  if (passes <= 1 || flags().no_gemv_token_passes) return run_gemv<FmtQ8_0R16>(p);
  for (int t0 = 0, pass = 0; pass < passes; ++pass) {  // as even as possible: 8 = 4 + 4, 7 = 4 + 3
    const int n = (p.n_tokens - t0) / (passes - pass);
    GemvMultiParams q = p;
    q.x_quant = static_cast<const uint8_t*>(p.x_quant) + size_t(t0) * p.x_stride;
    q.n_tokens = n;
    q.y = p.y + size_t(t0) * size_t(p.y_stride);
    run_gemv<FmtQ8_0R16>(q);
    t0 += n;
  }
  return true;
}

}  // namespace

namespace {
// Q4_0 / Q5_0 (and their repacked layouts, which only these kernels read) on a CPU of the
// avx512-vbmi level (and no BRISK_NO_AVX512_VBMI): dot_nibble_avx512vbmi.cpp.
bool use_vbmi(QuantType t) {
  return (t == QuantType::Q4_0 || t == QuantType::Q5_0 || t == QuantType::Q4_0_R16 || t == QuantType::Q5_0_R16) &&
         cpu_has_level(IsaLevel::avx512_vbmi);
}
}  // namespace

VecDotFn wide_q32_kernel(QuantType t) {
  if (use_vbmi(t)) return avx512vbmi::nibble_kernel(t);
  switch (t) {
    case QuantType::Q8_0: return dot_one<FmtQ8_0>;
    case QuantType::Q8_0_R16: return dot_one<FmtQ8_0R16>;
    case QuantType::Q4_0: return dot_one<FmtQ4_0>;
    case QuantType::Q5_0: return dot_one<FmtQ5_0>;
    default: return nullptr;
  }
}

VecDotMultiFn wide_q32_multi_kernel(QuantType t, int nt) {
  if (use_vbmi(t)) return avx512vbmi::nibble_multi_kernel(t, nt);
  switch (t) {
    case QuantType::Q8_0: return pick_multi<FmtQ8_0>(nt);
    case QuantType::Q8_0_R16: return pick_multi<FmtQ8_0R16>(nt);
    case QuantType::Q4_0: return pick_multi<FmtQ4_0>(nt);
    case QuantType::Q5_0: return pick_multi<FmtQ5_0>(nt);
    default: return nullptr;
  }
}

bool wide_q32_gemv(const GemvMultiParams& p, size_t prefetch_bytes) {
  (void)prefetch_bytes;  // the row kernels prefetch inside their block loops
  if (use_vbmi(p.weight_type)) return avx512vbmi::nibble_gemv(p);
  switch (p.weight_type) {
    case QuantType::Q8_0: return run_gemv<FmtQ8_0>(p);
    case QuantType::Q8_0_R16: return run_gemv_interleaved(p);
    case QuantType::Q4_0: return run_gemv<FmtQ4_0>(p);
    case QuantType::Q5_0: return run_gemv<FmtQ5_0>(p);
    default: return false;
  }
}

}  // namespace brisk::kernels::avx512
