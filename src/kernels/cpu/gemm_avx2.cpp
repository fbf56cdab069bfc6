// AVX2 prefill GEMM (see gemm.h) for CPUs without AVX-512 VNNI: the scheme of gemm_avx512.cpp
// on 256-bit registers. The activations are the same packed token groups (gemm_pack.cpp); the
// weights are unpacked a row block at a time by the AVX2 build of the unpackers
// (gemm_unpack_avx2.cpp); a tile of 3 rows x 16 tokens (two ymm halves of 8 tokens) keeps
// exact int32 block sums and converts them once per block, as the AVX-512 tile does.
//
// Two integer multiply-accumulate variants:
//   AVX-VNNI (cpu_features().avx_vnni): vpdpbusd on ymm, unsigned codes 0..255 x signed int8
//     activations summed straight into int32; the codes are the AVX-512 kernel's.
//   AVX2: vpmaddubsw (u8 x s8, pairs summed into int16, saturating) + vpmaddwd. To stay exact
//     every code is at most 63 and the int16 pair sums are added in int16 (vpaddw) for a chunk
//     of words short enough that chunk * 2 * code_max * 128 <= 32767, then widened once with
//     vpmaddwd:
//       codes <= 15 (Q4_0, Q4_1, Q4_K):  |pair| <= 2*15*128, 8 words (a whole block) per chunk
//       codes <= 31 (Q5_0, Q5_1, Q5_K):  |pair| <= 2*31*128, 4 words per chunk
//       codes <= 63 (Q6_K):              |pair| <= 2*63*128, 2 words per chunk
//     Q8_0, IQ4_NL and IQ4_XS codes (value + 128, up to 255) are split after unpacking into two
//     nibble planes, code = 16 * hi + lo, each a codes <= 15 pass; the high plane's sums are
//     widened with weight 16 (vpmaddwd by 16), so sum(code * x) stays exact in integers.
//     (|x| <= 128 for any int8 activation, so no input can saturate.)
// Either way the integer block sums equal the reference dot product's; only the order of the
// float additions differs. Single thread, 512 tokens, 4864 x 896 (docs/quant-kernels.md): AVX-VNNI
// ~225 GFLOP/s for every format, vpmaddubsw ~180 (Q4_*) and ~92 (two planes), the 8-token GEMV
// ~45. A 4-row tile measured the same as 3 rows.
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/cpu_features.h"
#include "core/flags.h"
#include "kernels/cpu/gemm_isa.h"
#include "kernels/cpu/gemm_pack.h"

namespace brisk::kernels::avx2 {
namespace {

constexpr int kHalf = 8;       // tokens per ymm of int32 lanes; a packed group is two halves
constexpr int kTileRows = 3;   // rows per tile: 3 x 2 halves of accumulators fit the 16 ymm
static_assert(kGemmGroup == 2 * kHalf, "a packed token group is two ymm halves");

// Unpacked rows of one row block: codes (RB, planes, k), scale (RB, nblk), min (RB, nblk).
struct RowBlock {
  const uint8_t* codes;
  const float* scale;
  const float* min;
  int64_t k, nblk;
  int64_t code_stride;  // planes * k bytes per row
};

// Where a tile's results go: y[t * y_stride + r] for the group's tokens t < nt.
struct TileOut {
  float* y;
  int64_t y_stride;
  int nt;
};

using TileFn = void (*)(const RowBlock&, int64_t r0, const uint8_t* group, const GemmGroupLayout&, const TileOut&);

// One tile's inputs (pointers into the row block and the token group) and float accumulators,
// with the per-block steps both integer variants share.
template <int RR, int H, bool kMin>
struct TileState {
  const uint8_t* code[RR];
  const float* sc[RR];
  const float* mn[RR];
  const int32_t* xa;
  const float* dx;
  const uint8_t* aux;
  __m256 acc[RR][H];

  __attribute__((always_inline)) TileState(const RowBlock& W, int64_t r0, const uint8_t* group,
                                           const GemmGroupLayout& L) {
    for (int r = 0; r < RR; ++r) {
      code[r] = W.codes + size_t(r0 + r) * size_t(W.code_stride);
      sc[r] = W.scale + (r0 + r) * W.nblk;
      mn[r] = W.min + (r0 + r) * W.nblk;
      for (int h = 0; h < H; ++h) acc[r][h] = _mm256_setzero_ps();
    }
    xa = reinterpret_cast<const int32_t*>(group + L.xa);
    dx = reinterpret_cast<const float*>(group + L.dx);
    aux = group + L.aux;
  }

  // The activation bytes of 4-byte word `word` for the H halves.
  __attribute__((always_inline)) void load_x(__m256i (&xv)[H], int64_t word) const {
    for (int h = 0; h < H; ++h)
      xv[h] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa + word * kGemmGroup + h * kHalf));
  }

  // Block b's int32 sums start from -offset * sum(x) (offset formats) or zero (min formats).
  __attribute__((always_inline)) void start_block(__m256i (&isum)[RR][H], int64_t b) const {
    for (int h = 0; h < H; ++h) {
      const __m256i init =
          kMin ? _mm256_setzero_si256()
               : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(aux + size_t(b * kGemmGroup + h * kHalf) * 4));
      for (int r = 0; r < RR; ++r) isum[r][h] = init;
    }
  }

  // acc += float(isum) * (s_b * dx)  [- m_b * dx * sum(x)]: the block's exact sums, scaled once.
  __attribute__((always_inline)) void finish_block(const __m256i (&isum)[RR][H], int64_t b) {
    for (int h = 0; h < H; ++h) {
      const __m256 d = _mm256_loadu_ps(dx + b * kGemmGroup + h * kHalf);
      for (int r = 0; r < RR; ++r) {
        const __m256 s = _mm256_mul_ps(_mm256_set1_ps(sc[r][b]), d);
        acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r][h]), s, acc[r][h]);
      }
      if constexpr (kMin) {
        const __m256 sx = _mm256_loadu_ps(reinterpret_cast<const float*>(aux) + b * kGemmGroup + h * kHalf);
        for (int r = 0; r < RR; ++r) acc[r][h] = _mm256_fnmadd_ps(_mm256_set1_ps(mn[r][b]), sx, acc[r][h]);
      }
    }
  }

  __attribute__((always_inline)) void store(int64_t r0, const TileOut& out) const {
    alignas(32) float o[RR][kGemmGroup];
    for (int r = 0; r < RR; ++r)
      for (int h = 0; h < H; ++h) _mm256_store_ps(o[r] + h * kHalf, acc[r][h]);
    for (int t = 0; t < out.nt; ++t)
      for (int r = 0; r < RR; ++r) out.y[t * out.y_stride + r0 + r] = o[r][t];
  }
};

inline __m256i broadcast_word(const uint8_t* p) {
  int32_t c;
  std::memcpy(&c, p, 4);
  return _mm256_set1_epi32(c);
}

// vpmaddubsw tiles: codes of kPlanes nibble planes (or one plane of codes <= 63), int16 sums of
// kChunk words per vpmaddwd (see the header comment for the bounds).
template <int B, bool kMin, int kPlanes, int kChunk>
struct MaddubsTile {
  static_assert((B / 4) % kChunk == 0, "chunks tile the block");
  template <int RR, int H>
  static void run(const RowBlock& W, int64_t r0, const uint8_t* group, const GemmGroupLayout& L, const TileOut& out) {
    constexpr int W4 = B / 4;  // 4-byte words per block
    TileState<RR, H, kMin> st(W, r0, group, L);
    for (int64_t b = 0; b < L.nblk; ++b) {
      __m256i isum[RR][H];
      st.start_block(isum, b);
      for (int pl = 0; pl < kPlanes; ++pl) {
        const __m256i widen = _mm256_set1_epi16(pl == 0 ? 1 : 16);  // code = 16 * hi + lo
        for (int c = 0; c < W4; c += kChunk) {
          __m256i part[RR][H];
          for (int r = 0; r < RR; ++r)
            for (int h = 0; h < H; ++h) part[r][h] = _mm256_setzero_si256();
#pragma GCC unroll 8
          for (int w = 0; w < kChunk; ++w) {
            const int64_t word = b * W4 + c + w;
            __m256i xv[H];
            st.load_x(xv, word);
            for (int r = 0; r < RR; ++r) {
              const __m256i cv = broadcast_word(st.code[r] + pl * W.k + 4 * word);
              for (int h = 0; h < H; ++h) {
                part[r][h] = _mm256_add_epi16(part[r][h], _mm256_maddubs_epi16(cv, xv[h]));
                // Keeps the sums in registers word by word: left free, the compiler evaluates
                // the chunk's products first and adds them as a tree, spilling most of them.
                __asm__("" : "+x"(part[r][h]));
              }
            }
          }
          for (int r = 0; r < RR; ++r)
            for (int h = 0; h < H; ++h) isum[r][h] = _mm256_add_epi32(isum[r][h], _mm256_madd_epi16(part[r][h], widen));
        }
      }
      st.finish_block(isum, b);
    }
    st.store(r0, out);
  }
};

// AVX-VNNI tiles: one plane of codes 0..255, vpdpbusd into int32.
template <int B, bool kMin>
struct VnniTile {
  template <int RR, int H>
  __attribute__((target("avxvnni"))) static void run(const RowBlock& W, int64_t r0, const uint8_t* group,
                                                      const GemmGroupLayout& L, const TileOut& out) {
    TileState<RR, H, kMin> st(W, r0, group, L);
    for (int64_t b = 0; b < L.nblk; ++b) {
      __m256i isum[RR][H];
      st.start_block(isum, b);
#pragma GCC unroll 8
      for (int w = 0; w < B / 4; ++w) {
        const int64_t word = b * (B / 4) + w;
        __m256i xv[H];
        st.load_x(xv, word);
        for (int r = 0; r < RR; ++r) {
          const __m256i cv = broadcast_word(st.code[r] + 4 * word);
          for (int h = 0; h < H; ++h) isum[r][h] = _mm256_dpbusd_avx_epi32(isum[r][h], cv, xv[h]);
        }
      }
      st.finish_block(isum, b);
    }
    st.store(r0, out);
  }
};

// One tile function per (rows 1..3, halves 1..2).
struct TileSet {
  TileFn fn[kTileRows][2] = {};  // [rows - 1][halves - 1]
  int planes = 1;                // code planes per row
  explicit operator bool() const { return fn[0][0] != nullptr; }
};

template <class K>
TileSet tile_set(int planes) {
  TileSet s;
  s.fn[0][0] = K::template run<1, 1>;
  s.fn[0][1] = K::template run<1, 2>;
  s.fn[1][0] = K::template run<2, 1>;
  s.fn[1][1] = K::template run<2, 2>;
  s.fn[2][0] = K::template run<3, 1>;
  s.fn[2][1] = K::template run<3, 2>;
  s.planes = planes;
  return s;
}

// The tiles for a format's codes (empty when no variant covers them).
TileSet select_tiles(const UnpackSpec& spec, bool avx_vnni) {
  if (!spec.unpack) return {};
  if (avx_vnni) {
    if (spec.block == 16 && !spec.has_min) return tile_set<VnniTile<16, false>>(1);
    if (spec.block == 32) return spec.has_min ? tile_set<VnniTile<32, true>>(1) : tile_set<VnniTile<32, false>>(1);
    return {};
  }
  if (spec.block == 16) {
    if (!spec.has_min && spec.code_max <= 63) return tile_set<MaddubsTile<16, false, 1, 2>>(1);
    return {};
  }
  if (spec.block != 32) return {};
  if (spec.code_max <= 15)
    return spec.has_min ? tile_set<MaddubsTile<32, true, 1, 8>>(1) : tile_set<MaddubsTile<32, false, 1, 8>>(1);
  if (spec.code_max <= 31)
    return spec.has_min ? tile_set<MaddubsTile<32, true, 1, 4>>(1) : tile_set<MaddubsTile<32, false, 1, 4>>(1);
  if (!spec.has_min) return tile_set<MaddubsTile<32, false, 2, 8>>(2);
  return {};
}

// Codes 0..255 of one row -> low nibbles at codes[0, k), high nibbles at codes[k, 2k);
// k is a multiple of 32.
void split_planes(uint8_t* codes, int64_t k) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int64_t i = 0; i < k; i += 32) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + k + i), _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + i), _mm256_and_si256(v, m4));
  }
}

void gemm_unpacked(const GemmParams& p, bool avx_vnni) {
  const UnpackSpec spec = unpack_spec(p.weight_type);
  const TileSet tiles = select_tiles(spec, avx_vnni);
  const GemmGroupLayout L(p.k, spec.block);
  const int64_t n_groups = (p.n_tokens + kGemmGroup - 1) / kGemmGroup;

  const int64_t code_stride = tiles.planes * p.k;
  const int64_t row_block = gemm_row_block(p.k, tiles.planes, kTileRows);
  const GemmScratch scratch = gemm_scratch(p, L, row_block, code_stride);
  const RowBlock W{.codes = scratch.codes, .scale = scratch.scale, .min = scratch.min, .k = p.k, .nblk = L.nblk,
                   .code_stride = code_stride};

  const auto* wb = static_cast<const uint8_t*>(p.w);
  for (int64_t rb = 0; rb < p.n_rows; rb += row_block) {
    const int64_t nr = std::min(row_block, p.n_rows - rb);
    for (int64_t i = 0; i < nr; ++i) {
      uint8_t* codes = scratch.codes + size_t(i) * size_t(code_stride);
      spec.unpack(wb + size_t(rb + i) * p.row_bytes, p.k, codes, scratch.scale + i * L.nblk, scratch.min + i * L.nblk);
      if (tiles.planes == 2) split_planes(codes, p.k);
    }
    for (int64_t gi = 0; gi < n_groups; ++gi) {
      const int64_t t0 = gi * kGemmGroup;
      const TileOut out{.y = p.y + t0 * p.y_stride + rb, .y_stride = p.y_stride,
                        .nt = int(std::min<int64_t>(kGemmGroup, p.n_tokens - t0))};
      const int halves = out.nt > kHalf ? 2 : 1;
      const uint8_t* group = scratch.packed + size_t(gi) * L.bytes;
      for (int64_t r = 0; r < nr; r += kTileRows) {
        const int rr = int(std::min<int64_t>(kTileRows, nr - r));
        tiles.fn[rr - 1][halves - 1](W, r, group, L, out);
      }
    }
  }
}

void gemm_maddubs(const GemmParams& p) { gemm_unpacked(p, false); }
void gemm_vnni(const GemmParams& p) { gemm_unpacked(p, true); }

}  // namespace

GemmIsaKernels gemm_kernels_variant(QuantType t, bool avx_vnni) {
  if (!select_tiles(unpack_spec(t), avx_vnni)) return {};
  return {.kernel = avx_vnni ? gemm_vnni : gemm_maddubs,
          .packed_bytes = gemm_group_packed_bytes,
          .pack_tokens = gemm_pack_groups};
}

GemmIsaKernels gemm_kernels(QuantType t) {
  return gemm_kernels_variant(t, cpu_features().avx_vnni && !flags().no_avx_vnni);
}

}  // namespace brisk::kernels::avx2
