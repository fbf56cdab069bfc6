// IQ formats: "importance" quants whose values come from fixed lattices (iq_grids.h) or a
// non-linear 4-bit codebook, with signs stored separately.
//   IQ2_XXS: per 32 elements, 4 grid indices (8 bytes), 4 x 7-bit sign codes, 4-bit scale:
//            x = d * (0.5 + s) / 4 * grid * sign
//   IQ2_XS:  per 8 elements a 9-bit grid index + 7-bit sign code; 4-bit scale per 16
//   IQ2_S:   10-bit grid indices (8 + 2 bits in qh), explicit sign bytes, 4-bit scale per 16
//   IQ3_XXS: per 32 elements 8 grid indices (4 values each), sign codes + 4-bit scale:
//            x = d * (0.5 + s) / 2 * grid * sign
//   IQ3_S:   9-bit grid indices, explicit signs, 4-bit scale per 32: x = d * (1 + 2s) * grid * sign
//   IQ1_S:   11-bit indices into a {-1,0,1} grid, per 32: 3-bit scale + delta sign:
//            x = d * (2s + 1) * (grid + delta), delta = +-1/8
//   IQ1_M:   as IQ1_S with a scale per 16 and delta per 8; the fp16 d is split over the top
//            nibbles of the four scale words
//   IQ4_NL:  32 elements, fp16 d, 4-bit codes into kIQ4NLValues: x = d * v
//   IQ4_XS:  256 elements, 6-bit scale (-32) per 32: x = d * (s - 32) * v
// Dequantizers keep the reference's float expression order (bit-exact). IQ4_NL pairs with Q8_0,
// the others with Q8_K. IQ4 dots are integer per sub-block; the lattice formats' scalar dots
// use the dequantized weights (their SIMD kernels are not written yet).
#include <cstring>

#include "quant/blocks.h"
#include "quant/iq_grids.h"
#include "quant/quant_impl.h"

namespace brisk::quant {
namespace {

inline uint8_t grid_byte(uint64_t g, int j) { return uint8_t(g >> (8 * j)); }
inline float sign_of(uint8_t signs, int j) { return (signs >> j) & 1 ? -1.f : 1.f; }

// Generic scalar dot for the lattice formats: dequantize a block, dot with the Q8_K block.
template <std::size_t kBlockBytes>
void dot_via_dequant(void (*deq)(const void*, float*, int64_t), int64_t n, float* out,
                     const void* w, const void* a) {
  const auto* x = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float buf[QK_K];
  float sum = 0.f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    deq(x + std::size_t(i) * kBlockBytes, buf, QK_K);
    float s = 0.f;
    for (int j = 0; j < QK_K; ++j) s += buf[j] * float(y[i].qs[j]);
    sum += s * y[i].d;
  }
  *out = sum;
}

}  // namespace

void dequantize_row_iq2_xxs(const void* src, float* y, int64_t n) {
  const auto* b = static_cast<const BlockIQ2_XXS*>(src);
  const uint64_t* grid = iq2xxs_grid();
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = h2f(b[i].d);
    for (int ib = 0; ib < QK_K / 32; ++ib, y += 32) {
      uint32_t aux[2];
      std::memcpy(aux, &b[i].qs[4 * ib], 8);
      const float db = d * (0.5f + float(aux[1] >> 28)) * 0.25f;
      for (int l = 0; l < 4; ++l) {
        const uint64_t g = grid[(aux[0] >> (8 * l)) & 255];
        const uint8_t signs = iq_ksigns((aux[1] >> (7 * l)) & 127);
        for (int j = 0; j < 8; ++j) y[8 * l + j] = db * float(grid_byte(g, j)) * sign_of(signs, j);
      }
    }
  }
}

void dequantize_row_iq2_xs(const void* src, float* y, int64_t n) {
  const auto* b = static_cast<const BlockIQ2_XS*>(src);
  const uint64_t* grid = iq2xs_grid();
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = h2f(b[i].d);
    for (int g8 = 0; g8 < QK_K / 8; ++g8, y += 8) {
      const int s = g8 / 2;
      const float db = d * (0.5f + float((b[i].scales[s / 2] >> (4 * (s % 2))) & 15)) * 0.25f;
      const uint16_t q = b[i].qs[g8];
      const uint64_t g = grid[q & 511];
      const uint8_t signs = iq_ksigns(q >> 9);
      for (int j = 0; j < 8; ++j) y[j] = db * float(grid_byte(g, j)) * sign_of(signs, j);
    }
  }
}

void dequantize_row_iq2_s(const void* src, float* y, int64_t n) {
  const auto* b = static_cast<const BlockIQ2_S*>(src);
  const uint64_t* grid = iq2s_grid();
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = h2f(b[i].d);
    const uint8_t* signs = b[i].qs + QK_K / 8;
    for (int g8 = 0; g8 < QK_K / 8; ++g8, y += 8) {
      const int s = g8 / 2;
      const float db = d * (0.5f + float((b[i].scales[s / 2] >> (4 * (s % 2))) & 15)) * 0.25f;
      const int idx = b[i].qs[g8] | (((b[i].qh[g8 / 4] >> (2 * (g8 % 4))) & 3) << 8);
      const uint64_t g = grid[idx];
      for (int j = 0; j < 8; ++j) y[j] = db * float(grid_byte(g, j)) * sign_of(signs[g8], j);
    }
  }
}

void dequantize_row_iq3_xxs(const void* src, float* y, int64_t n) {
  const auto* b = static_cast<const BlockIQ3_XXS*>(src);
  const uint32_t* grid = iq3xxs_grid();
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = h2f(b[i].d);
    const uint8_t* qs = b[i].qs;
    for (int ib = 0; ib < QK_K / 32; ++ib, y += 32) {
      uint32_t aux;
      std::memcpy(&aux, b[i].qs + QK_K / 4 + 4 * ib, 4);
      const float db = d * (0.5f + float(aux >> 28)) * 0.5f;
      for (int l = 0; l < 4; ++l) {
        const uint8_t signs = iq_ksigns((aux >> (7 * l)) & 127);
        const uint32_t g1 = grid[qs[8 * ib + 2 * l]], g2 = grid[qs[8 * ib + 2 * l + 1]];
        for (int j = 0; j < 4; ++j) {
          y[8 * l + j] = db * float(uint8_t(g1 >> (8 * j))) * sign_of(signs, j);
          y[8 * l + 4 + j] = db * float(uint8_t(g2 >> (8 * j))) * sign_of(signs, j + 4);
        }
      }
    }
  }
}

void dequantize_row_iq3_s(const void* src, float* y, int64_t n) {
  const auto* b = static_cast<const BlockIQ3_S*>(src);
  const uint32_t* grid = iq3s_grid();
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = h2f(b[i].d);
    for (int ib = 0; ib < QK_K / 32; ++ib) {
      const float db = d * float(1 + 2 * ((b[i].scales[ib / 2] >> (4 * (ib % 2))) & 15));
      for (int g4 = 8 * ib; g4 < 8 * ib + 8; ++g4, y += 4) {
        const int idx = b[i].qs[g4] | (((b[i].qh[g4 / 8] >> (g4 % 8)) & 1) << 8);
        const uint32_t g = grid[idx];
        const uint8_t signs = b[i].signs[g4 / 2];
        for (int j = 0; j < 4; ++j)
          y[j] = db * float(uint8_t(g >> (8 * j))) * sign_of(signs, 4 * (g4 % 2) + j);
      }
    }
  }
}

void dequantize_row_iq1_s(const void* src, float* y, int64_t n) {
  const auto* b = static_cast<const BlockIQ1_S*>(src);
  const uint64_t* grid = iq1s_grid();
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = h2f(b[i].d);
    for (int ib = 0; ib < QK_K / 32; ++ib) {
      const uint16_t qh = b[i].qh[ib];
      const float dl = d * float(2 * ((qh >> 12) & 7) + 1);
      const float delta = qh & 0x8000 ? -0.125f : 0.125f;
      for (int l = 0; l < 4; ++l, y += 8) {
        const uint64_t g = grid[b[i].qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)];
        for (int j = 0; j < 8; ++j) y[j] = dl * (float(int8_t(grid_byte(g, j))) + delta);
      }
    }
  }
}

void dequantize_row_iq1_m(const void* src, float* y, int64_t n) {
  const auto* b = static_cast<const BlockIQ1_M*>(src);
  const uint64_t* grid = iq1s_grid();
  for (int64_t i = 0; i < n / QK_K; ++i) {
    uint16_t sc[4];
    std::memcpy(sc, b[i].scales, 8);
    const uint16_t d_bits = uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                     ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
    const float d = h2f(d_bits);
    for (int g8 = 0; g8 < QK_K / 8; ++g8, y += 8) {
      const int s16 = g8 / 2;
      const float dl = d * float(2 * ((sc[s16 / 4] >> (3 * (s16 % 4))) & 7) + 1);
      const int qh = (b[i].qh[g8 / 2] >> (4 * (g8 % 2))) & 15;
      const float delta = qh & 8 ? -0.125f : 0.125f;
      const uint64_t g = grid[b[i].qs[g8] | ((qh & 7) << 8)];
      for (int j = 0; j < 8; ++j) y[j] = dl * (float(int8_t(grid_byte(g, j))) + delta);
    }
  }
}

void dequantize_row_iq4_nl(const void* src, float* y, int64_t n) {
  const auto* b = static_cast<const BlockIQ4_NL*>(src);
  for (int64_t i = 0; i < n / QK4_NL; ++i, y += QK4_NL) {
    const float d = h2f(b[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * float(kIQ4NLValues[b[i].qs[j] & 15]);
      y[j + 16] = d * float(kIQ4NLValues[b[i].qs[j] >> 4]);
    }
  }
}

namespace {
inline int iq4_xs_scale(const BlockIQ4_XS& b, int ib) {
  return (((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | (((b.scales_h >> (2 * ib)) & 3) << 4)) - 32;
}
}  // namespace

void dequantize_row_iq4_xs(const void* src, float* y, int64_t n) {
  const auto* b = static_cast<const BlockIQ4_XS*>(src);
  for (int64_t i = 0; i < n / QK_K; ++i) {
    const float d = h2f(b[i].d);
    for (int ib = 0; ib < QK_K / 32; ++ib, y += 32) {
      const float dl = d * float(iq4_xs_scale(b[i], ib));
      const uint8_t* qs = b[i].qs + 16 * ib;
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * float(kIQ4NLValues[qs[j] & 15]);
        y[j + 16] = dl * float(kIQ4NLValues[qs[j] >> 4]);
      }
    }
  }
}

void vec_dot_iq2_xxs_q8_k(int64_t n, float* out, const void* w, const void* a) {
  dot_via_dequant<sizeof(BlockIQ2_XXS)>(dequantize_row_iq2_xxs, n, out, w, a);
}
void vec_dot_iq2_xs_q8_k(int64_t n, float* out, const void* w, const void* a) {
  dot_via_dequant<sizeof(BlockIQ2_XS)>(dequantize_row_iq2_xs, n, out, w, a);
}
void vec_dot_iq2_s_q8_k(int64_t n, float* out, const void* w, const void* a) {
  dot_via_dequant<sizeof(BlockIQ2_S)>(dequantize_row_iq2_s, n, out, w, a);
}
void vec_dot_iq3_xxs_q8_k(int64_t n, float* out, const void* w, const void* a) {
  dot_via_dequant<sizeof(BlockIQ3_XXS)>(dequantize_row_iq3_xxs, n, out, w, a);
}
void vec_dot_iq3_s_q8_k(int64_t n, float* out, const void* w, const void* a) {
  dot_via_dequant<sizeof(BlockIQ3_S)>(dequantize_row_iq3_s, n, out, w, a);
}
void vec_dot_iq1_s_q8_k(int64_t n, float* out, const void* w, const void* a) {
  dot_via_dequant<sizeof(BlockIQ1_S)>(dequantize_row_iq1_s, n, out, w, a);
}
void vec_dot_iq1_m_q8_k(int64_t n, float* out, const void* w, const void* a) {
  dot_via_dequant<sizeof(BlockIQ1_M)>(dequantize_row_iq1_m, n, out, w, a);
}

void vec_dot_iq4_nl_q8_0(int64_t n, float* out, const void* w, const void* a) {
  const auto* x = static_cast<const BlockIQ4_NL*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0.f;
  for (int64_t i = 0; i < n / QK4_NL; ++i) {
    int sumi = 0;
    for (int j = 0; j < 16; ++j)
      sumi += kIQ4NLValues[x[i].qs[j] & 15] * y[i].qs[j] + kIQ4NLValues[x[i].qs[j] >> 4] * y[i].qs[j + 16];
    sum += float(sumi) * (h2f(x[i].d) * h2f(y[i].d));
  }
  *out = sum;
}

void vec_dot_iq4_xs_q8_k(int64_t n, float* out, const void* w, const void* a) {
  const auto* x = static_cast<const BlockIQ4_XS*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0.f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    int isum = 0;
    for (int ib = 0; ib < QK_K / 32; ++ib) {
      const uint8_t* qs = x[i].qs + 16 * ib;
      const int8_t* q8 = y[i].qs + 32 * ib;
      int s = 0;
      for (int j = 0; j < 16; ++j)
        s += kIQ4NLValues[qs[j] & 15] * q8[j] + kIQ4NLValues[qs[j] >> 4] * q8[j + 16];
      isum += iq4_xs_scale(x[i], ib) * s;
    }
    sum += h2f(x[i].d) * y[i].d * float(isum);
  }
  *out = sum;
}

}  // namespace brisk::quant
