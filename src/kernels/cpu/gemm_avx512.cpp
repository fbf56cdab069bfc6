// AVX-512 VNNI tile kernels of the prefill GEMM (see gemm.h).
//
// One zmm holds two consecutive 32-element blocks (lanes 0-7: block b, lanes 8-15: block b+1).
// vpdpbusd multiplies unsigned by signed bytes, so one operand is made unsigned:
//   Q8_0 x Q8_0: u = x + 128 (x ^ 0x80), s = w;  sum(x*w) = dpbusd(u, w) - 128 * sum(w)
//                (the row's 128*sum(w) is computed once per weight block and shared by 4 tokens)
//   Q4_0 x Q8_0: u = q (the 4-bit codes 0..15), s = x;  sum((q-8)*x) = dpbusd(q, x) - 8 * sum(x)
//                (the token's 8*sum(x) is computed once per activation block, shared by 4 rows)
// Each lane's int32 sum is exact; it is scaled by d_w * d_x of its block and accumulated in
// float: acc[r][t] (16 zmm) += float(isum) * (d_w[r] * d_x[t]). An odd last block runs with the
// upper half zero.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "kernels/cpu/gemm_isa.h"
#include "quant/blocks.h"

namespace brisk::kernels::avx512 {
namespace {

using quant::BlockQ4_0;
using quant::BlockQ4_K;
using quant::BlockQ5_K;
using quant::BlockQ6_K;
using quant::BlockQ8_K;
using quant::BlockQ8_0;

constexpr int R = int(kGemmTileRows);
constexpr int T = int(kGemmTileTokens);
constexpr int64_t kRowBlock = 64;    // rows whose weights stay in L2 while all tokens pass
constexpr int64_t kTokenBlock = 64;  // tokens whose activations stay in L2 for a row block
static_assert(kRowBlock % R == 0 && kTokenBlock % T == 0, "cache blocks are whole tiles");

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

// Scales of two consecutive blocks (p[0], p[1]) spread over the two 256-bit halves.
inline __m512 expand_pair(const float* p) {
  const __m128 v = _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m512i idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(v));
}

// Two Q8_0 blocks' 64 quants (b and b + 1; the upper half zero when !two).
inline __m512i load_q8_pair(const BlockQ8_0* blk, bool two) {
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[0].qs));
  if (!two) return _mm512_zextsi256_si512(lo);
  const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[1].qs));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// Two Q4_0 blocks' 64 codes in element order (each 128-bit lane: 16 low or 16 high nibbles).
inline __m512i load_q4_pair(const BlockQ4_0* blk, bool two) {
  const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[0].qs));
  const __m128i q1 = two ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[1].qs)) : _mm_setzero_si128();
  const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(q0, q0)), _mm256_set_m128i(q1, q1), 1);
  const __m512i shifted = _mm512_srlv_epi64(v, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0));
  return _mm512_and_si512(shifted, _mm512_set1_epi8(0x0F));
}

// Block scales of n rows as floats, nb_pad (even) per row, zero past nb:
//   out: (n, nb_pad) floats
template <class Block>
void row_scales(const uint8_t* base, size_t stride, int64_t n, int64_t nb, int64_t nb_pad, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const auto* blk = reinterpret_cast<const Block*>(base + size_t(i) * stride);
    float* o = out + i * nb_pad;
    for (int64_t b = 0; b < nb; ++b) o[b] = h2f(blk[b].d);
    for (int64_t b = nb; b < nb_pad; ++b) o[b] = 0.f;
  }
}

// One tile: rows r0..r0+R x tokens t0..t0+T. wsc: (R, nb_pad) weight scales of these rows;
// xsc: (n_tokens, nb_pad) activation scales of all tokens.
template <bool kQ4>
void tile(const GemmParams& p, int64_t r0, int64_t t0, const float* wsc, const float* xsc, int64_t nb_pad) {
  using WBlock = std::conditional_t<kQ4, BlockQ4_0, BlockQ8_0>;
  const auto* wb = static_cast<const uint8_t*>(p.w);
  const auto* xb = static_cast<const uint8_t*>(p.x_quant);
  const WBlock* w[R];
  const BlockQ8_0* x[T];
  for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const WBlock*>(wb + size_t(r0 + r) * p.row_bytes);
  for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const BlockQ8_0*>(xb + size_t(t0 + t) * p.x_stride);
  const float* xs_t = xsc + t0 * nb_pad;
  const int64_t nb = p.k / 32;
  __m512 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  const __m512i zero = _mm512_setzero_si512();
  for (int64_t b = 0; b < nb; b += 2) {
    const bool two = b + 1 < nb;
    __m512i wv[R], wbias[R];
    __m512 ws[R];
    for (int r = 0; r < R; ++r) {
      ws[r] = expand_pair(wsc + r * nb_pad + b);
      if constexpr (kQ4) {
        wv[r] = load_q4_pair(w[r] + b, two);
      } else {
        wv[r] = load_q8_pair(w[r] + b, two);
        wbias[r] = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, _mm512_set1_epi8(char(0x80)), wv[r]));
      }
    }
    for (int t = 0; t < T; ++t) {
      __m512i xv = load_q8_pair(x[t] + b, two);
      const __m512 xs = expand_pair(xs_t + t * nb_pad + b);
      if constexpr (kQ4) {
        const __m512i xbias = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, _mm512_set1_epi8(8), xv));
        for (int r = 0; r < R; ++r) {
          const __m512i s = _mm512_dpbusd_epi32(xbias, wv[r], xv);
          acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(ws[r], xs), acc[r][t]);
        }
      } else {
        xv = _mm512_xor_si512(xv, _mm512_set1_epi8(char(0x80)));
        for (int r = 0; r < R; ++r) {
          const __m512i s = _mm512_dpbusd_epi32(wbias[r], xv, wv[r]);
          acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(ws[r], xs), acc[r][t]);
        }
      }
    }
  }
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) p.y[(t0 + t) * p.y_stride + r0 + r] = _mm512_reduce_add_ps(acc[r][t]);
}

template <bool kQ4>
void gemm_tiles(const GemmParams& p) {
  using WBlock = std::conditional_t<kQ4, BlockQ4_0, BlockQ8_0>;
  const int64_t nb = p.k / 32;
  const int64_t nb_pad = nb + (nb & 1);
  // Block scales converted to float once: all tokens' per call, a row tile's per token block.
  // Reused per thread (grown, never shrunk): n_tokens * k / 8 + 4 * k / 8 bytes.
  thread_local std::vector<float> scales;
  scales.resize(size_t((p.n_tokens + R) * nb_pad));
  float* xsc = scales.data();
  float* wsc = xsc + p.n_tokens * nb_pad;
  row_scales<BlockQ8_0>(static_cast<const uint8_t*>(p.x_quant), p.x_stride, p.n_tokens, nb, nb_pad, xsc);
  const auto* wb = static_cast<const uint8_t*>(p.w);
  for (int64_t rb = 0; rb < p.n_rows; rb += kRowBlock) {
    const int64_t re = std::min(p.n_rows, rb + kRowBlock);
    for (int64_t tb = 0; tb < p.n_tokens; tb += kTokenBlock) {
      const int64_t te = std::min(p.n_tokens, tb + kTokenBlock);
      for (int64_t r = rb; r < re; r += R) {
        row_scales<WBlock>(wb + size_t(r) * p.row_bytes, p.row_bytes, R, nb, nb_pad, wsc);
        for (int64_t t = tb; t < te; t += T) tile<kQ4>(p, r, t, wsc, xsc, nb_pad);
      }
    }
  }
}

// ---- Q4_K and Q5_K x Q8_K ----
// Super-blocks of 256: 8 sub-blocks of 32 with a 6-bit scale sc_j and min m_j each:
//   dot = dx * sum_j (d * sc_j) * sum_i(q_i * x_i)  -  dx * sum_j (dmin * m_j) * sum_i(x_i)
// A zmm covers sub-blocks 2c and 2c + 1 (the low and high nibbles of 32 code bytes, next to 64
// contiguous activation bytes); q is 0..15, so vpdpbusd takes it as the unsigned operand
// directly. The min term uses the activation's bsums: one 8-lane fnmadd per super-block.
// Q5_K is the same with a fifth bit per code from qh (codes 0..31).
constexpr int64_t kQK = 256;

// Per row: (nsb, 8) floats d * sc_j and (nsb, 8) floats dmin * m_j.
template <class Block>
void q4k_row_scales(const Block* blk, int64_t nsb, float* sc_out, float* min_out) {
  for (int64_t s = 0; s < nsb; ++s) {
    const float d = h2f(blk[s].d), dmin = h2f(blk[s].dmin);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, mn;
      quant::kquant_scale_min(j, blk[s].scales, &sc, &mn);
      sc_out[s * 8 + j] = d * float(sc);
      min_out[s * 8 + j] = dmin * float(mn);
    }
  }
}

// Per token: (nsb) floats dx and (nsb, 8) floats dx * (sum of the sub-block's 32 activations).
void q8k_token_scales(const BlockQ8_K* blk, int64_t nsb, float* d_out, float* sum_out) {
  for (int64_t s = 0; s < nsb; ++s) {
    d_out[s] = blk[s].d;
    for (int j = 0; j < 8; ++j)
      sum_out[s * 8 + j] = blk[s].d * float(int(blk[s].bsums[2 * j]) + int(blk[s].bsums[2 * j + 1]));
  }
}

inline __m512i load_q4k_chunk(const uint8_t* qs) {
  const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
  const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(q), q, 1);
  return _mm512_and_si512(_mm512_srlv_epi64(v, _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0)), _mm512_set1_epi8(0x0F));
}
// Codes of elements 64c .. 64c + 63 (sub-blocks 2c, 2c + 1).
inline __m512i load_kchunk(const BlockQ4_K& b, int c) { return load_q4k_chunk(b.qs + 32 * c); }
inline __m512i load_kchunk(const BlockQ5_K& b, int c) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh));
  const __m512i hz = _mm512_inserti64x4(_mm512_castsi256_si512(h), h, 1);
  const int64_t s0 = 2 * c, s1 = 2 * c + 1;
  const __m512i hb = _mm512_and_si512(_mm512_srlv_epi64(hz, _mm512_set_epi64(s1, s1, s1, s1, s0, s0, s0, s0)),
                                      _mm512_set1_epi8(1));
  return _mm512_or_si512(load_q4k_chunk(b.qs + 32 * c), _mm512_slli_epi16(hb, 4));
}

struct Q4kScratch {
  const float* wsc;   // (R, nsb, 8) d * sc_j of the tile's rows
  const float* wmin;  // (R, nsb, 8) dmin * m_j
  const float* xd;    // (n_tokens, nsb) dx
  const float* xsum;  // (n_tokens, nsb, 8) dx * sub-block sums
};

template <class Block>
void tile_q4k(const GemmParams& p, int64_t r0, int64_t t0, const Q4kScratch& sc) {
  const int64_t nsb = p.k / kQK;
  const auto* wb = static_cast<const uint8_t*>(p.w);
  const auto* xb = static_cast<const uint8_t*>(p.x_quant);
  const Block* w[R];
  const BlockQ8_K* x[T];
  for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const Block*>(wb + size_t(r0 + r) * p.row_bytes);
  for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const BlockQ8_K*>(xb + size_t(t0 + t) * p.x_stride);
  __m512 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  const __m512i zero = _mm512_setzero_si512();
  for (int64_t s = 0; s < nsb; ++s) {
    {
      __m512 wm[R];
      for (int r = 0; r < R; ++r) wm[r] = _mm512_maskz_loadu_ps(0xFF, sc.wmin + (r * nsb + s) * 8);
      for (int t = 0; t < T; ++t) {
        const __m512 xm = _mm512_maskz_loadu_ps(0xFF, sc.xsum + ((t0 + t) * nsb + s) * 8);
        for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fnmadd_ps(wm[r], xm, acc[r][t]);
      }
    }
    for (int c = 0; c < 4; ++c) {
      __m512i wv[R];
      __m512 ws[R];
      for (int r = 0; r < R; ++r) {
        wv[r] = load_kchunk(w[r][s], c);
        ws[r] = expand_pair(sc.wsc + (r * nsb + s) * 8 + 2 * c);
      }
      for (int t = 0; t < T; ++t) {
        const __m512i xv = _mm512_loadu_si512(x[t][s].qs + 64 * c);
        const __m512 xs = _mm512_set1_ps(sc.xd[(t0 + t) * nsb + s]);
        for (int r = 0; r < R; ++r) {
          const __m512i v = _mm512_dpbusd_epi32(zero, wv[r], xv);
          acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), _mm512_mul_ps(ws[r], xs), acc[r][t]);
        }
      }
    }
  }
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) p.y[(t0 + t) * p.y_stride + r0 + r] = _mm512_reduce_add_ps(acc[r][t]);
}

template <class Block>
void gemm_tiles_q4k(const GemmParams& p) {
  const int64_t nsb = p.k / kQK;
  // Reused per thread (grown, never shrunk): n_tokens * 9 + R * 16 floats per super-block.
  thread_local std::vector<float> scratch;
  scratch.resize(size_t((p.n_tokens * 9 + R * 16) * nsb));
  float* xd = scratch.data();
  float* xsum = xd + p.n_tokens * nsb;
  float* wsc = xsum + p.n_tokens * nsb * 8;
  float* wmin = wsc + R * nsb * 8;
  const auto* xb = static_cast<const uint8_t*>(p.x_quant);
  for (int64_t t = 0; t < p.n_tokens; ++t)
    q8k_token_scales(reinterpret_cast<const BlockQ8_K*>(xb + size_t(t) * p.x_stride), nsb, xd + t * nsb,
                     xsum + t * nsb * 8);
  const Q4kScratch sc{.wsc = wsc, .wmin = wmin, .xd = xd, .xsum = xsum};
  const auto* wb = static_cast<const uint8_t*>(p.w);
  for (int64_t rb = 0; rb < p.n_rows; rb += kRowBlock) {
    const int64_t re = std::min(p.n_rows, rb + kRowBlock);
    for (int64_t tb = 0; tb < p.n_tokens; tb += kTokenBlock) {
      const int64_t te = std::min(p.n_tokens, tb + kTokenBlock);
      for (int64_t r = rb; r < re; r += R) {
        for (int i = 0; i < R; ++i)
          q4k_row_scales(reinterpret_cast<const Block*>(wb + size_t(r + i) * p.row_bytes), nsb,
                         wsc + i * nsb * 8, wmin + i * nsb * 8);
        for (int64_t t = tb; t < te; t += T) tile_q4k<Block>(p, r, t, sc);
      }
    }
  }
}

// ---- Q6_K x Q8_K ----
// Super-blocks of 256: 16 sub-blocks of 16 with an int8 scale sc_j; codes q = 0..63 stand for
// q - 32:
//   dot = dx * sum_j (d * sc_j) * sum_i(q_i * x_i)  -  32 * dx * sum_j (d * sc_j) * bsum_j(x)
// A zmm covers 64 elements (4 sub-blocks): its codes are 4 bits of ql and 2 bits of qh, and
// the activation bytes are contiguous. The correction is one 16-lane fnmadd per super-block.
// Per row: (nsb, 16) floats d * sc_j.
void q6k_row_scales(const BlockQ6_K* blk, int64_t nsb, float* sc_out) {
  for (int64_t s = 0; s < nsb; ++s) {
    const float d = h2f(blk[s].d);
    for (int j = 0; j < 16; ++j) sc_out[s * 16 + j] = d * float(blk[s].scales[j]);
  }
}

// Per token: (nsb) floats dx and (nsb, 16) floats 32 * dx * bsum_j.
void q8k_token_bsums(const BlockQ8_K* blk, int64_t nsb, float* d_out, float* sum_out) {
  for (int64_t s = 0; s < nsb; ++s) {
    d_out[s] = blk[s].d;
    for (int j = 0; j < 16; ++j) sum_out[s * 16 + j] = 32.f * blk[s].d * float(blk[s].bsums[j]);
  }
}

// Scales of four consecutive sub-blocks of 16 (p[0..3]), each over 4 lanes.
inline __m512 expand_quad(const float* p) {
  const __m512i idx = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(_mm_loadu_ps(p)));
}

// Codes of elements 64c .. 64c + 63 of a Q6_K super-block.
inline __m512i load_q6k_chunk(const BlockQ6_K& b, int c) {
  const int n = c / 2;
  const bool high = c & 1;
  __m512i lo = _mm512_loadu_si512(b.ql + 64 * n);
  if (high) lo = _mm512_srli_epi16(lo, 4);
  lo = _mm512_and_si512(lo, _mm512_set1_epi8(0x0F));
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * n));
  const __m512i hz = _mm512_inserti64x4(_mm512_castsi256_si512(h), h, 1);
  const __m512i shift = high ? _mm512_set_epi64(6, 6, 6, 6, 4, 4, 4, 4) : _mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0);
  const __m512i hb = _mm512_and_si512(_mm512_srlv_epi64(hz, shift), _mm512_set1_epi8(3));
  return _mm512_or_si512(lo, _mm512_slli_epi16(hb, 4));
}

struct Q6kScratch {
  const float* wsc;   // (R, nsb, 16) d * sc_j of the tile's rows
  const float* xd;    // (n_tokens, nsb) dx
  const float* xsum;  // (n_tokens, nsb, 16) 32 * dx * bsum_j
};

void tile_q6k(const GemmParams& p, int64_t r0, int64_t t0, const Q6kScratch& sc) {
  const int64_t nsb = p.k / kQK;
  const auto* wb = static_cast<const uint8_t*>(p.w);
  const auto* xb = static_cast<const uint8_t*>(p.x_quant);
  const BlockQ6_K* w[R];
  const BlockQ8_K* x[T];
  for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const BlockQ6_K*>(wb + size_t(r0 + r) * p.row_bytes);
  for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const BlockQ8_K*>(xb + size_t(t0 + t) * p.x_stride);
  __m512 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  const __m512i zero = _mm512_setzero_si512();
  for (int64_t s = 0; s < nsb; ++s) {
    {
      __m512 wm[R];
      for (int r = 0; r < R; ++r) wm[r] = _mm512_loadu_ps(sc.wsc + (r * nsb + s) * 16);
      for (int t = 0; t < T; ++t) {
        const __m512 xm = _mm512_loadu_ps(sc.xsum + ((t0 + t) * nsb + s) * 16);
        for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fnmadd_ps(wm[r], xm, acc[r][t]);
      }
    }
    for (int c = 0; c < 4; ++c) {
      __m512i wv[R];
      __m512 ws[R];
      for (int r = 0; r < R; ++r) {
        wv[r] = load_q6k_chunk(w[r][s], c);
        ws[r] = expand_quad(sc.wsc + (r * nsb + s) * 16 + 4 * c);
      }
      for (int t = 0; t < T; ++t) {
        const __m512i xv = _mm512_loadu_si512(x[t][s].qs + 64 * c);
        const __m512 xs = _mm512_set1_ps(sc.xd[(t0 + t) * nsb + s]);
        for (int r = 0; r < R; ++r) {
          const __m512i v = _mm512_dpbusd_epi32(zero, wv[r], xv);
          acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), _mm512_mul_ps(ws[r], xs), acc[r][t]);
        }
      }
    }
  }
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) p.y[(t0 + t) * p.y_stride + r0 + r] = _mm512_reduce_add_ps(acc[r][t]);
}

void gemm_tiles_q6k(const GemmParams& p) {
  const int64_t nsb = p.k / kQK;
  // Reused per thread (grown, never shrunk): n_tokens * 17 + R * 16 floats per super-block.
  thread_local std::vector<float> scratch;
  scratch.resize(size_t((p.n_tokens * 17 + R * 16) * nsb));
  float* xd = scratch.data();
  float* xsum = xd + p.n_tokens * nsb;
  float* wsc = xsum + p.n_tokens * nsb * 16;
  const auto* xb = static_cast<const uint8_t*>(p.x_quant);
  for (int64_t t = 0; t < p.n_tokens; ++t)
    q8k_token_bsums(reinterpret_cast<const BlockQ8_K*>(xb + size_t(t) * p.x_stride), nsb, xd + t * nsb,
                    xsum + t * nsb * 16);
  const Q6kScratch sc{.wsc = wsc, .xd = xd, .xsum = xsum};
  const auto* wb = static_cast<const uint8_t*>(p.w);
  for (int64_t rb = 0; rb < p.n_rows; rb += kRowBlock) {
    const int64_t re = std::min(p.n_rows, rb + kRowBlock);
    for (int64_t tb = 0; tb < p.n_tokens; tb += kTokenBlock) {
      const int64_t te = std::min(p.n_tokens, tb + kTokenBlock);
      for (int64_t r = rb; r < re; r += R) {
        for (int i = 0; i < R; ++i)
          q6k_row_scales(reinterpret_cast<const BlockQ6_K*>(wb + size_t(r + i) * p.row_bytes), nsb,
                         wsc + i * nsb * 16);
        for (int64_t t = tb; t < te; t += T) tile_q6k(p, r, t, sc);
      }
    }
  }
}

}  // namespace

GemmTileFn gemm_kernel(QuantType t) {
  switch (t) {
    case QuantType::Q8_0: return gemm_tiles<false>;
    case QuantType::Q4_0: return gemm_tiles<true>;
    case QuantType::Q4_K: return gemm_tiles_q4k<BlockQ4_K>;
    case QuantType::Q5_K: return gemm_tiles_q4k<BlockQ5_K>;
    case QuantType::Q6_K: return gemm_tiles_q6k;
    default: return nullptr;
  }
}

}  // namespace brisk::kernels::avx512
