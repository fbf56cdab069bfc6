// AVX-512 VNNI prefill GEMM (see gemm.h): Y[t, r] = dot(W[r, :], X[t, :]) for many tokens.
//
// One integer tile kernel serves every format. Per call:
//   1. the activations (already quantized to the format's vec_dot_type: Q8_0, Q8_1 or Q8_K)
//      are repacked by groups of 16 tokens, 4 bytes of each token side by side (gemm_pack.cpp,
//      shared with the AVX2 GEMM):
//        xa:  (k / 4, 16) int32     bytes 4i..4i+3 of tokens 0..15
//        dx:  (k / B, 16) float     the token's scale for weight block b
//        aux: (k / B, 16)           -offset * sum(x in block) as int32 (offset formats), or
//                                   dx * sum(x in block) as float (min formats)
//   2. the weights are unpacked a row block at a time (16-128 rows, ~768 KB of codes, so they
//      stay in L2) into unsigned codes + per-block scales
//      (gemm_pack.h, gemm_unpack_avx512.cpp), then swept over all token groups;
//   3. a tile of RR rows x 32 tokens keeps RR x 2 int32 accumulators per block: per 4 elements,
//      one broadcast of a row's 4 codes and one vpdpbusd per (row, group) against the 16 tokens'
//      4 activation bytes. At the end of each block the exact integer sums (offset already
//      subtracted, in integers) are converted and scaled once per 16 tokens:
//        acc += float(isum) * (s_b * dx)            offset formats
//        acc += float(isum) * (s_b * dx) - m_b * sx min formats
// So per block of 32 elements a (row, 16 tokens) pair costs 8 vpdpbusd + 3 (or 4) float ops,
// where a dot-product layout pays 3 float ops per vpdpbusd. Nothing is repacked at load: the
// decode GEMV keeps reading the stored blocks.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/gemm_isa.h"
#include "kernels/cpu/gemm_pack.h"

namespace brisk::kernels::avx512 {
namespace {

constexpr int kGroup = 16;       // tokens per activation group (one zmm of int32 lanes)
static_assert(kGroup == kGemmGroup, "the packed layout's group is the public one");

using GroupLayout = GemmGroupLayout;

// Unpacked rows of one row block: codes (RB, k), scale (RB, nblk), min (RB, nblk).
struct RowBlock {
  const uint8_t* codes;
  const float* scale;
  const float* min;
  int64_t k, nblk;
};

// RR rows (r0..) x G groups of 16 tokens; ob: (G * 16, ob_stride) floats, token-major, this
// tile's results land at ob[t * ob_stride + r0 + r].
template <int RR, int G, int B, bool kMin>
void tile(const RowBlock& W, int64_t r0, const uint8_t* groups, const GroupLayout& L, float* ob, int64_t ob_stride) {
  __m512 acc[RR][G];
  for (int r = 0; r < RR; ++r)
    for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_ps();
  const uint8_t* code[RR];
  const float* sc[RR];
  const float* mn[RR];
  for (int r = 0; r < RR; ++r) {
    code[r] = W.codes + size_t(r0 + r) * size_t(W.k);
    sc[r] = W.scale + (r0 + r) * W.nblk;
    mn[r] = W.min + (r0 + r) * W.nblk;
  }
  const int32_t* xa[G];
  const float* dx[G];
  const uint8_t* aux[G];
  for (int g = 0; g < G; ++g) {
    const uint8_t* base = groups + size_t(g) * L.bytes;
    xa[g] = reinterpret_cast<const int32_t*>(base + L.xa);
    dx[g] = reinterpret_cast<const float*>(base + L.dx);
    aux[g] = base + L.aux;
  }
  constexpr int W4 = B / 4;  // 4-byte words per block
  for (int64_t b = 0; b < L.nblk; ++b) {
    __m512i isum[RR][G];
    for (int g = 0; g < G; ++g) {
      const __m512i init = kMin ? _mm512_setzero_si512()
                                : _mm512_loadu_si512(aux[g] + size_t(b) * kGroup * 4);  // -offset * sum(x)
      for (int r = 0; r < RR; ++r) isum[r][g] = init;
    }
#pragma GCC unroll 8
    for (int w = 0; w < W4; ++w) {
      const int64_t word = b * W4 + w;
      __m512i xv[G];
      for (int g = 0; g < G; ++g) xv[g] = _mm512_loadu_si512(xa[g] + word * kGroup);
      for (int r = 0; r < RR; ++r) {
        int32_t c;
        std::memcpy(&c, code[r] + 4 * word, 4);
        const __m512i cv = _mm512_set1_epi32(c);
        for (int g = 0; g < G; ++g) isum[r][g] = _mm512_dpbusd_epi32(isum[r][g], cv, xv[g]);
      }
    }
    for (int g = 0; g < G; ++g) {
      const __m512 d = _mm512_loadu_ps(dx[g] + b * kGroup);
      for (int r = 0; r < RR; ++r) {
        const __m512 s = _mm512_mul_ps(_mm512_set1_ps(sc[r][b]), d);
        acc[r][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r][g]), s, acc[r][g]);
      }
      if constexpr (kMin) {
        const __m512 sx = _mm512_loadu_ps(reinterpret_cast<const float*>(aux[g]) + b * kGroup);
        for (int r = 0; r < RR; ++r) acc[r][g] = _mm512_fnmadd_ps(_mm512_set1_ps(mn[r][b]), sx, acc[r][g]);
      }
    }
  }
  const __m512i lane_offsets = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                                  _mm512_set1_epi32(int32_t(ob_stride)));
  for (int r = 0; r < RR; ++r)
    for (int g = 0; g < G; ++g) _mm512_i32scatter_ps(ob + g * kGroup * ob_stride + r0 + r, lane_offsets, acc[r][g], 4);
}

using TileFn = void (*)(const RowBlock&, int64_t, const uint8_t*, const GroupLayout&, float*, int64_t);

template <int B, bool kMin>
TileFn pick_tile(int rr, int g) {
  if (g == 2) {
    switch (rr) {
      case 4: return tile<4, 2, B, kMin>;
      case 3: return tile<3, 2, B, kMin>;
      case 2: return tile<2, 2, B, kMin>;
      default: return tile<1, 2, B, kMin>;
    }
  }
  switch (rr) {
    case 4: return tile<4, 1, B, kMin>;
    case 3: return tile<3, 1, B, kMin>;
    case 2: return tile<2, 1, B, kMin>;
    default: return tile<1, 1, B, kMin>;
  }
}

TileFn pick(const UnpackSpec& spec, int rr, int g) {
  if (spec.block == 16) return spec.has_min ? pick_tile<16, true>(rr, g) : pick_tile<16, false>(rr, g);
  return spec.has_min ? pick_tile<32, true>(rr, g) : pick_tile<32, false>(rr, g);
}

constexpr int kTileRows = 4;

void gemm_unpacked(const GemmParams& p) {
  const UnpackSpec spec = unpack_spec(p.weight_type);
  const GroupLayout L(p.k, spec.block);
  const int64_t n_groups = (p.n_tokens + kGroup - 1) / kGroup;

  const int64_t row_block = gemm_row_block(p.k, 1, 16);
  const GemmScratch scratch = gemm_scratch(p, L, row_block, p.k);
  const uint8_t* packed = scratch.packed;
  const auto* wb = static_cast<const uint8_t*>(p.w);
  const RowBlock W{.codes = scratch.codes, .scale = scratch.scale, .min = scratch.min, .k = p.k, .nblk = L.nblk};
  // Results of a row block for 32 tokens, token-major, so that each token's row_block outputs
  // reach y with whole-cache-line stores: (32, row_block) floats.
  thread_local std::vector<float> obuf;
  obuf.resize(size_t(2 * kGroup * row_block));
  float* ob = obuf.data();
  for (int64_t rb = 0; rb < p.n_rows; rb += row_block) {
    const int64_t nr = std::min(row_block, p.n_rows - rb);
    for (int64_t i = 0; i < nr; ++i)
      spec.unpack(wb + size_t(rb + i) * p.row_bytes, p.k, scratch.codes + size_t(i) * size_t(p.k),
                  scratch.scale + i * L.nblk, scratch.min + i * L.nblk);
    for (int64_t gi = 0; gi < n_groups; gi += 2) {
      const int G = int(std::min<int64_t>(2, n_groups - gi));
      const uint8_t* groups = packed + size_t(gi) * L.bytes;
      const int64_t t0 = gi * kGroup;
      const int nt = int(std::min<int64_t>(G * kGroup, p.n_tokens - t0));
      for (int64_t r = 0; r < nr; r += kTileRows) {
        const int rr = int(std::min<int64_t>(kTileRows, nr - r));
        pick(spec, rr, G)(W, r, groups, L, ob, row_block);
      }
      for (int t = 0; t < nt; ++t) {
        float* y = p.y + (t0 + t) * p.y_stride + rb;
        const float* o = ob + t * row_block;
        int64_t i = 0;
        for (; i + 16 <= nr; i += 16) _mm512_storeu_ps(y + i, _mm512_loadu_ps(o + i));
        if (i < nr) {
          const __mmask16 m = __mmask16((1u << (nr - i)) - 1u);
          _mm512_mask_storeu_ps(y + i, m, _mm512_maskz_loadu_ps(m, o + i));
        }
      }
    }
  }
}

}  // namespace

GemmIsaKernels gemm_kernels(QuantType t) {
  if (!unpack_spec(t).unpack) return {};
  return {.kernel = gemm_unpacked, .packed_bytes = gemm_group_packed_bytes, .pack_tokens = gemm_pack_groups};
}

}  // namespace brisk::kernels::avx512
