// AVX-512 decode dot products of the K-quant formats Q4_K, Q5_K and Q6_K with Q8_K activations,
// for 1..8 tokens at once; each weight block (256 elements) is decoded once for all tokens and
// every token's result is bit-identical to the 1-token kernel's (same per-token instructions).
//
// Block layouts (quant/blocks.h), element e of a super-block of 256:
//   Q4_K  qs[128]: chunk c = e / 64 in qs[32c..32c+32), low nibbles e % 64 < 32, high nibbles the
//         rest; 8 sub-blocks of 32 with 6-bit scales s_j and mins m_j packed in scales[12];
//         w = d * s_j * q - dmin * m_j.
//   Q5_K  as Q4_K plus the fifth bit of element e in bit e / 32 of qh[e % 32].
//   Q6_K  ql[128] / qh[64]: half h = e / 128; low 4 bits from ql[64h..64h+64) (low nibbles for
//         e % 128 < 64, high nibbles after), top 2 bits from qh[32h + e % 32] bits 2 * (e % 128 / 32);
//         16 sub-blocks of 16 with int8 scales; w = d * sc_j * (q - 32).
// Decoding puts the unsigned codes of 64 consecutive elements in one zmm (Q4_K/Q5_K: 32 stored
// bytes broadcast to both halves, shifted right by 0 / 4 bits and masked), so the activation
// bytes are loaded as they are stored, and without lane-crossing shuffles. Per token and block:
//   r_k  = vpdpbusd(codes_k, act_k): 16 i32 lanes of 4 products each (|lane| <= 4 * 63 * 127)
//   p    = vpackssdw(r_0, r_1), vpackssdw(r_2, r_3): exact narrowing to i16
//   sumi = vpdpwssd with the sub-block scales widened to i16 in the packed lane order
// Q6_K adds -32 * sc_j * bsum_j with one more vpdpwssd (bsums of the Q8_K block, scales * -32
// in the low 8 lanes), so all 16 lanes carry the scale d * d_y. Q4_K/Q5_K fold the 16 lanes of
// sumi into the low 8 and put -m_j * (bsum_2j + bsum_2j+1) in the high 8 (one vpdpwssd), and the
// float step multiplies lanes 0..7 by d * d_y and 8..15 by dmin * d_y. Integer block sums are
// exact; only the float accumulation order (16 lanes, one FMA per block) differs from the
// scalar reference. Against the 256-bit kernels of dot_x86.inc (vpdpbusd per 32 bytes, two
// FMAs per block for Q4_K) this halves the integer multiply instructions per block and token.
// Measured (brisk_microbench gemv_l2, rows of 4096, one thread, GB/s of weights; 256-bit in
// brackets): Q6_K 27.1 (21.0), Q4_K 19 (19.6), Q5_K 17.8 (17.7); 8 tokens Q4_K 5.1 (3.7),
// Q5_K 5.7 (4.3), Q6_K 7.7 (5.0). Q4_K/Q5_K with one token are bound by the two ports that
// run 512-bit vector uops: ~40 per block, of which ~21 decode the block (codes, the packed
// 6-bit scales and mins, d and dmin) and ~14 per token, so the wider vectors buy nothing there.
// BRISK_NO_AVX512_KQUANT selects the 256-bit kernels instead.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstring>

#include "core/flags.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/dot_isa.h"
#include "kernels/cpu/stream_load_avx512.h"
#include "quant/blocks.h"

namespace brisk::kernels::avx512 {
namespace {

using quant::BlockQ4_K;
using quant::BlockQ5_K;
using quant::BlockQ6_K;
using quant::BlockQ8_K;
using quant::QK_K;

inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }
inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
// 32 bytes at p in both halves of a zmm (a load, no shuffle uop)
inline __m512i load256_twice(const void* p) { return _mm512_broadcast_i64x4(load256(p)); }

// Prefetch of the weight stream kWeightPrefetchBytes past this block (as the 256-bit kernels).
template <class Block>
inline void prefetch_block_ahead(const Block* b) {
  const char* p = reinterpret_cast<const char*>(b) + kWeightPrefetchBytes;
  for (size_t off = 0; off < sizeof(Block); off += 64) _mm_prefetch(p + off, _MM_HINT_T1);
}

// i16 lanes: lo in the low 256 bits, hi in the high 256 bits
inline __m512i halves_i16(short lo, short hi) {
  return _mm512_inserti64x4(_mm512_set1_epi16(lo), _mm256_set1_epi16(hi), 1);
}

// i16 lane vector from 64 control bytes of vpshufb (index, or 0x80 for a zero byte) per lane
inline __m512i shuffle_i16(__m512i src, const int8_t (&ctrl)[64]) {
  return _mm512_shuffle_epi8(src, _mm512_loadu_si512(ctrl));
}

// sum of the packed products of one token: 4 zmm of codes (elements 64k..64k+63) times the
// block's activations, narrowed pairwise and scaled by sc01 / sc23 (16 i32 lanes)
inline __m512i scaled_block_sum(const __m512i q[4], __m512i sc01, __m512i sc23, const int8_t* y) {
  const __m512i z = _mm512_setzero_si512();
  __m512i r[4];
  for (int k = 0; k < 4; ++k) r[k] = _mm512_dpbusd_epi32(z, q[k], load512(y + 64 * k));
  const __m512i s = _mm512_dpwssd_epi32(z, _mm512_packs_epi32(r[0], r[1]), sc01);
  return _mm512_dpwssd_epi32(s, _mm512_packs_epi32(r[2], r[3]), sc23);
}

// ---- Q4_K / Q5_K ----------------------------------------------------------------------------

// vpshufb controls over the 16 bytes (s_0..s_7, m_0..m_7) in every 128-bit lane. After
// vpackssdw(r_0, r_1), 128-bit lane L holds 4 sums of r_0 then 4 of r_1; r_k covers sub-blocks
// 2k (lanes 0, 1) and 2k + 1 (lanes 2, 3).
#define Z -128
#define S4(a) a, Z, a, Z, a, Z, a, Z
alignas(64) constexpr int8_t kScale01[64] = {S4(0), S4(2), S4(0), S4(2), S4(1), S4(3), S4(1), S4(3)};
alignas(64) constexpr int8_t kScale23[64] = {S4(4), S4(6), S4(4), S4(6), S4(5), S4(7), S4(5), S4(7)};
#undef S4
// mins pairs (m_i, m_i) for bsums 2i, 2i + 1 in i16 lanes 16..31 (i32 lanes 8..15), zero below
#define P2(a) a, Z, a, Z
alignas(64) constexpr int8_t kMinPairs[64] = {Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z,
                                              Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z,
                                              P2(8), P2(9), P2(10), P2(11), P2(12), P2(13), P2(14), P2(15)};
#undef P2
#undef Z

// The 12 packed scale bytes -> 8 scales (bytes 0..7) and 8 mins (bytes 8..15) in every 128-bit
// lane, as quant::kquant_scale_min: with u0, u1, u2 the three words, scales 0..3 = u0 & 0x3f,
// scales 4..7 = (u2 & 0xf) | (u0 >> 6) << 4, mins 0..3 = u1 & 0x3f, mins 4..7 =
// (u2 >> 4 & 0xf) | (u1 >> 6) << 4 (per byte). Reads 16 bytes (the scales are followed by the
// block's codes); the broadcast is a plain load.
inline __m512i unpack_scales_mins(const uint8_t* scales) {
  const __m512i v = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)));
  const __m512i a = _mm512_shuffle_epi32(v, _MM_PERM_CBCA);  // u0 u2 u1 u2
  const __m512i b = _mm512_shuffle_epi32(v, _MM_PERM_BBAA);  // u0 u0 u1 u1
  const __m512i low = _mm512_and_si512(_mm512_srlv_epi32(a, _mm512_set4_epi32(4, 0, 0, 0)),
                                       _mm512_set4_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f));
  return _mm512_ternarylogic_epi32(low, _mm512_srli_epi32(b, 2), _mm512_set4_epi32(0x30303030, 0, 0x30303030, 0),
                                   0xF8);  // low | (b >> 2 & mask)
}

struct ScaleMinDecoded {
  __m512i q[4];        // codes of elements 64k..64k+63
  __m512i sc01, sc23;  // i16 scales in packed lane order
  __m512i mins;        // i16 (m_i, m_i) pairs in i32 lanes 8..15
  __m512 dd;           // d in lanes 0..7, -dmin in lanes 8..15
};

template <class Block, bool kHighBit>
inline void decode_scale_min(const Block& x, ScaleMinDecoded& o) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i nibble_shift = halves_i16(0, 4);
  for (int c = 0; c < 4; ++c)  // chunk c in both halves: low nibbles (sub-block 2c), high (2c + 1)
    o.q[c] = _mm512_and_si512(_mm512_srlv_epi16(load256_twice(x.qs + 32 * c), nibble_shift), m4);
  if constexpr (kHighBit) {
    // bit j of qh[l] -> bit 4 of the code of sub-block j, element l; zmm k holds sub-blocks 2k
    // (bytes 0..31) and 2k + 1. 16-bit shifts by at most 4 keep bit 4 of each byte within it.
    const __m512i qh = load256_twice(x.qh);
    const __m512i b4 = _mm512_set1_epi8(0x10);
    for (int k = 0; k < 4; ++k) {
      // bit 2k (low half) / 2k + 1 (high half) to bit 4: left by 4 - j for j < 4, else right
      const __m512i h = k < 2 ? _mm512_sllv_epi16(qh, halves_i16(short(4 - 2 * k), short(3 - 2 * k)))
                              : _mm512_srlv_epi16(qh, halves_i16(short(2 * k - 4), short(2 * k - 3)));
      o.q[k] = _mm512_ternarylogic_epi32(o.q[k], h, b4, 0xF8);  // q | (h & 0x10)
    }
  }
  const __m512i sm = unpack_scales_mins(x.scales);
  o.sc01 = shuffle_i16(sm, kScale01);
  o.sc23 = shuffle_i16(sm, kScale23);
  o.mins = shuffle_i16(sm, kMinPairs);
  static_assert(offsetof(Block, dmin) == offsetof(Block, d) + 2);
  uint32_t ddbits;
  std::memcpy(&ddbits, &x.d, 4);
  const __m512 dd = _mm512_castps128_ps512(_mm_cvtph_ps(_mm_cvtsi32_si128(int(ddbits))));
  const __m512 both = _mm512_permutexvar_ps(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0), dd);
  o.dd = _mm512_mask_sub_ps(both, __mmask16(0xFF00), _mm512_setzero_ps(), both);
}

inline __m512 accumulate_scale_min(const ScaleMinDecoded& d, const BlockQ8_K& y, __m512 acc) {
  const __m512i s = scaled_block_sum(d.q, d.sc01, d.sc23, y.qs);
  // lanes 0..7: the sub-block sums folded; lanes 8..15: m_i * (bsum_2i + bsum_2i+1)
  const __m512i folded = _mm512_maskz_add_epi32(__mmask16(0x00FF), s, _mm512_shuffle_i64x2(s, s, 0x4E));
  const __m512i total = _mm512_dpwssd_epi32(folded, load256_twice(y.bsums), d.mins);
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(d.dd, _mm512_set1_ps(y.d)), acc);
}

template <class Block, bool kHighBit>
struct FmtScaleMin {
  using Decoded = ScaleMinDecoded;
  using WeightBlock = Block;
  static void decode(const Block& x, Decoded& o) { decode_scale_min<Block, kHighBit>(x, o); }
  static __m512 accumulate(const Decoded& d, const BlockQ8_K& y, __m512 acc) { return accumulate_scale_min(d, y, acc); }
};
using FmtQ4_K = FmtScaleMin<BlockQ4_K, false>;
using FmtQ5_K = FmtScaleMin<BlockQ5_K, true>;

// ---- Q6_K -----------------------------------------------------------------------------------

// After vpackssdw(r_0, r_1), 128-bit lane L holds 4 sums of r_0 (sub-block L) then 4 of r_1
// (sub-block 4 + L); r_2, r_3 likewise with sub-blocks 8 + L, 12 + L. vpermw indices:
#define I4(a) a, a, a, a
alignas(64) constexpr int16_t kQ6Scale01[32] = {I4(0), I4(4), I4(1), I4(5), I4(2), I4(6), I4(3), I4(7)};
alignas(64) constexpr int16_t kQ6Scale23[32] = {I4(8), I4(12), I4(9), I4(13), I4(10), I4(14), I4(11), I4(15)};
#undef I4

struct Q6Decoded {
  __m512i q[4];        // codes + 32 (0..63) of elements 64k..64k+63
  __m512i sc01, sc23;  // i16 scales in packed lane order
  __m512i bias;        // -32 * sc_j in i16 lanes 0..15, zero above
  __m512 d;
};

struct FmtQ6_K {
  using Decoded = Q6Decoded;
  using WeightBlock = BlockQ6_K;
  static void decode(const BlockQ6_K& x, Decoded& o) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x30);
    // top-bit shifts per 256-bit half (16-bit lanes): low nibbles take qh bits 0,1 / 2,3 to 4,5,
    // high nibbles bits 4,5 / 6,7
    const __m512i shl = halves_i16(4, 2), shr = halves_i16(0, 2);
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = load_weights_512(x.ql + 64 * h);
      const __m512i qh = load256_twice(x.qh + 32 * h);
      o.q[2 * h] = _mm512_ternarylogic_epi32(_mm512_and_si512(ql, m4), _mm512_sllv_epi16(qh, shl), m2, 0xF8);
      o.q[2 * h + 1] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                                 _mm512_srlv_epi16(qh, shr), m2, 0xF8);
    }
    const __m512i sc = _mm512_zextsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.scales))));
    o.sc01 = _mm512_permutexvar_epi16(_mm512_load_si512(kQ6Scale01), sc);
    o.sc23 = _mm512_permutexvar_epi16(_mm512_load_si512(kQ6Scale23), sc);
    o.bias = _mm512_sub_epi16(_mm512_setzero_si512(), _mm512_slli_epi16(sc, 5));
    o.d = _mm512_set1_ps(_cvtsh_ss(x.d));
  }
  static __m512 accumulate(const Decoded& d, const BlockQ8_K& y, __m512 acc) {
    const __m512i s = scaled_block_sum(d.q, d.sc01, d.sc23, y.qs);
    // exact: |sumi| < 2^26, |32 * sc * bsums| < 2^25
    const __m512i total = _mm512_dpwssd_epi32(s, _mm512_zextsi256_si512(load256(y.bsums)), d.bias);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(d.d, _mm512_set1_ps(y.d)), acc);
  }
};

// ---- row kernels ----------------------------------------------------------------------------

// out[t * out_stride] = dot(w, token t), token t's Q8_K row at a + t * a_stride bytes.
template <int NT, class Fmt>
__attribute__((always_inline)) inline void dot_rows(int64_t n, float* out, size_t out_stride, const void* w, const void* a,
                                                    size_t a_stride) {
  const auto* x = static_cast<const typename Fmt::WeightBlock*>(w);
  const BlockQ8_K* y[NT];
  for (int t = 0; t < NT; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(a) + t * a_stride);
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / QK_K; ++i) {
    prefetch_block_ahead(&x[i]);
    typename Fmt::Decoded d;
    Fmt::decode(x[i], d);
    for (int t = 0; t < NT; ++t) acc[t] = Fmt::accumulate(d, y[t][i], acc[t]);
  }
  for (int t = 0; t < NT; ++t) out[size_t(t) * out_stride] = _mm512_reduce_add_ps(acc[t]);
}

// All the rows of a GEMV for NT tokens in one loop: dot_rows inlined per row, so a row costs no
// call through a function pointer (the same operations per row, so the same bits).
template <int NT, class Fmt>
void gemv_rows(const GemvMultiParams& p) {
  const auto* w = static_cast<const uint8_t*>(p.w);
  for (int64_t r = 0; r < p.n_rows; ++r)
    dot_rows<NT, Fmt>(p.k, p.y + r, size_t(p.y_stride), w + size_t(r) * p.row_bytes, p.x_quant, p.x_stride);
}

template <class Fmt>
bool gemv_any(const GemvMultiParams& p) {
  switch (p.n_tokens) {
    case 1: gemv_rows<1, Fmt>(p); return true; case 2: gemv_rows<2, Fmt>(p); return true;
    case 3: gemv_rows<3, Fmt>(p); return true; case 4: gemv_rows<4, Fmt>(p); return true;
    case 5: gemv_rows<5, Fmt>(p); return true; case 6: gemv_rows<6, Fmt>(p); return true;
    case 7: gemv_rows<7, Fmt>(p); return true; case 8: gemv_rows<8, Fmt>(p); return true;
    default: return false;
  }
}

template <class Fmt>
void dot_one(int64_t n, float* out, const void* w, const void* a) {
  dot_rows<1, Fmt>(n, out, 0, w, a, 0);
}

template <class Fmt>
VecDotMultiFn pick_multi(int nt) {
  switch (nt) {
    case 1: return dot_rows<1, Fmt>; case 2: return dot_rows<2, Fmt>; case 3: return dot_rows<3, Fmt>;
    case 4: return dot_rows<4, Fmt>; case 5: return dot_rows<5, Fmt>; case 6: return dot_rows<6, Fmt>;
    case 7: return dot_rows<7, Fmt>; case 8: return dot_rows<8, Fmt>;
    default: return nullptr;
  }
}

}  // namespace

VecDotFn wide_kquant_kernel(QuantType t) {
  if (flags().no_avx512_kquant) return nullptr;
  switch (t) {
    case QuantType::Q4_K: return dot_one<FmtQ4_K>;
    case QuantType::Q5_K: return dot_one<FmtQ5_K>;
    case QuantType::Q6_K: return dot_one<FmtQ6_K>;
    default: return nullptr;
  }
}

bool wide_kquant_gemv(const GemvMultiParams& p) {
  if (flags().no_avx512_kquant || flags().no_kquant_gemv) return false;
  switch (p.weight_type) {
    case QuantType::Q4_K: return gemv_any<FmtQ4_K>(p);
    case QuantType::Q5_K: return gemv_any<FmtQ5_K>(p);
    case QuantType::Q6_K: return gemv_any<FmtQ6_K>(p);
    default: return false;
  }
}

VecDotMultiFn wide_kquant_multi_kernel(QuantType t, int nt) {
  if (flags().no_avx512_kquant) return nullptr;
  switch (t) {
    case QuantType::Q4_K: return pick_multi<FmtQ4_K>(nt);
    case QuantType::Q5_K: return pick_multi<FmtQ5_K>(nt);
    case QuantType::Q6_K: return pick_multi<FmtQ6_K>(nt);
    default: return nullptr;
  }
}

}  // namespace brisk::kernels::avx512
