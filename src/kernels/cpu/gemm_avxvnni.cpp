// AVX-VNNI tiles of the AVX2 prefill GEMM (see gemm_avx2.cpp for the scheme and the bounds):
// one plane of codes 0..255 per row, vpdpbusd (VEX-encoded) of a row's 4 codes against the 4
// activation bytes of 8 tokens straight into int32, so every format takes one pass (the
// vpmaddubsw tiles need two nibble planes for codes above 63). Its own unit, compiled with the
// AVX2 + AVX-VNNI flags and run only where the CPU has AVX-VNNI (not on AMD Zen 4 or Intel Ice
// Lake, which have AVX512-VNNI alone: docs/quant-kernels.md). Single thread, 512 tokens,
// 4864 x 896: ~225 GFLOP/s for every format, against ~180 / ~92 for vpmaddubsw.
#define BRISK_GEMM_TILE_NS avx2_vnni
#include "kernels/cpu/gemm_avx2_tiles.inc"

namespace brisk::kernels::avx2_vnni {
namespace {

// AVX-VNNI tiles: one plane of codes 0..255, vpdpbusd into int32.
template <int B, bool kMin>
struct VnniTile {
  template <int RR, int H>
  static void run(const RowBlock& W, int64_t r0, const uint8_t* group,
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

// The AVX-VNNI tiles for a format's codes (empty when none covers them).
TileSet select_tiles(const UnpackSpec& spec) {
  if (!spec.unpack) return {};
  if (spec.block == 16 && !spec.has_min) return tile_set<VnniTile<16, false>>(1);
  if (spec.block == 32) return spec.has_min ? tile_set<VnniTile<32, true>>(1) : tile_set<VnniTile<32, false>>(1);
  return {};
}

}  // namespace

GemmIsaKernels gemm_kernels(QuantType t) { return kernels_for(t); }

}  // namespace brisk::kernels::avx2_vnni
