// AVX2 prefill GEMM (see gemm.h) for CPUs without AVX-512 VNNI: the scheme of gemm_avx512.cpp
// on 256-bit registers. The activations are the same packed token groups (gemm_pack.cpp); the
// weights are unpacked a row block at a time by the AVX2 build of the unpackers
// (gemm_unpack_avx2.cpp); a tile of 3 rows x 16 tokens (two ymm halves of 8 tokens) keeps
// exact int32 block sums and converts them once per block, as the AVX-512 tile does.
//
// Two integer multiply-accumulate variants, each in a unit of its own level with the driver of
// gemm_avx2_tiles.inc:
//   AVX-VNNI (gemm_avxvnni.cpp, where the CPU has AVX-VNNI): vpdpbusd on ymm, unsigned codes
//     0..255 x signed int8 activations summed straight into int32; the codes are the AVX-512
//     kernel's.
//   AVX2 (this file): vpmaddubsw (u8 x s8, pairs summed into int16, saturating) + vpmaddwd.
//     To stay exact every code is at most 63 and the int16 pair sums are added in int16 (vpaddw)
//     for a chunk of words short enough that chunk * 2 * code_max * 128 <= 32767, then widened
//     once with vpmaddwd:
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
#define BRISK_GEMM_TILE_NS avx2
#include "kernels/cpu/gemm_avx2_tiles.inc"

namespace brisk::kernels::avx2 {
namespace {

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

// The vpmaddubsw tiles for a format's codes (empty when none covers them).
TileSet select_tiles(const UnpackSpec& spec) {
  if (!spec.unpack) return {};
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

}  // namespace

GemmIsaKernels gemm_kernels(QuantType t) { return kernels_for(t); }

}  // namespace brisk::kernels::avx2
