// Byte layouts of the GGUF block formats (as ggml defines them). All fields are little-endian;
// `uint16_t d` fields hold IEEE half (fp16) scales. Structs are packed so that sizeof() equals
// the on-disk block size; the static_asserts tie them to quant/types.cpp's table.
#pragma once
#include <cstdint>

#include "core/fp16.h"

namespace brisk::quant {

inline constexpr int QK4_0 = 32, QK4_1 = 32, QK5_0 = 32, QK5_1 = 32, QK8_0 = 32, QK8_1 = 32;
inline constexpr int QK4_NL = 32, QK_MXFP4 = 32;
inline constexpr int QK_K = 256;       // super-block size of the K-, IQ- and TQ-quants
inline constexpr int K_SCALE_SIZE = 12;

#pragma pack(push, 1)
struct BlockQ4_0 { uint16_t d; uint8_t qs[QK4_0 / 2]; };                 // 18 B
struct BlockQ4_1 { uint16_t d; uint16_t m; uint8_t qs[QK4_1 / 2]; };     // 20 B
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; };  // 22 B
struct BlockQ5_1 { uint16_t d; uint16_t m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; };  // 24 B
struct BlockQ8_0 { uint16_t d; int8_t qs[QK8_0]; };                      // 34 B
struct BlockQ8_1 { uint16_t d; uint16_t s; int8_t qs[QK8_1]; };          // 36 B; s = d * sum(qs)

struct BlockQ2_K { uint8_t scales[QK_K / 16]; uint8_t qs[QK_K / 4]; uint16_t d; uint16_t dmin; };
struct BlockQ3_K { uint8_t hmask[QK_K / 8]; uint8_t qs[QK_K / 4]; uint8_t scales[12]; uint16_t d; };
struct BlockQ4_K { uint16_t d; uint16_t dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qs[QK_K / 2]; };
struct BlockQ5_K {
  uint16_t d; uint16_t dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2];
};
struct BlockQ6_K { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; uint16_t d; };
// Activation format of the K/IQ/TQ dot products. d is fp32; bsums[i] = sum of qs[16i..16i+16).
struct BlockQ8_K { float d; int8_t qs[QK_K]; int16_t bsums[QK_K / 16]; };

struct BlockIQ2_XXS { uint16_t d; uint16_t qs[QK_K / 8]; };
struct BlockIQ2_XS { uint16_t d; uint16_t qs[QK_K / 8]; uint8_t scales[QK_K / 32]; };
struct BlockIQ2_S { uint16_t d; uint8_t qs[QK_K / 4]; uint8_t qh[QK_K / 32]; uint8_t scales[QK_K / 32]; };
struct BlockIQ3_XXS { uint16_t d; uint8_t qs[3 * QK_K / 8]; };
struct BlockIQ3_S {
  uint16_t d; uint8_t qs[QK_K / 4]; uint8_t qh[QK_K / 32]; uint8_t signs[QK_K / 8]; uint8_t scales[QK_K / 64];
};
struct BlockIQ1_S { uint16_t d; uint8_t qs[QK_K / 8]; uint16_t qh[QK_K / 32]; };
struct BlockIQ1_M { uint8_t qs[QK_K / 8]; uint8_t qh[QK_K / 16]; uint8_t scales[QK_K / 32]; };
struct BlockIQ4_NL { uint16_t d; uint8_t qs[QK4_NL / 2]; };
struct BlockIQ4_XS { uint16_t d; uint16_t scales_h; uint8_t scales_l[QK_K / 64]; uint8_t qs[QK_K / 2]; };

struct BlockTQ1_0 { uint8_t qs[(QK_K - 4 * QK_K / 64) / 5]; uint8_t qh[QK_K / 64]; uint16_t d; };
struct BlockTQ2_0 { uint8_t qs[QK_K / 4]; uint16_t d; };
// e: E8M0 shared exponent; qs: E2M1 codes, low nibble = element j, high nibble = element j+16.
struct BlockMXFP4 { uint8_t e; uint8_t qs[QK_MXFP4 / 2]; };
#pragma pack(pop)

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockIQ2_XXS) == 66 && sizeof(BlockIQ2_XS) == 74 && sizeof(BlockIQ2_S) == 82);
static_assert(sizeof(BlockIQ3_XXS) == 98 && sizeof(BlockIQ3_S) == 110);
static_assert(sizeof(BlockIQ1_S) == 50 && sizeof(BlockIQ1_M) == 56);
static_assert(sizeof(BlockIQ4_NL) == 18 && sizeof(BlockIQ4_XS) == 136);
static_assert(sizeof(BlockTQ1_0) == 54 && sizeof(BlockTQ2_0) == 66 && sizeof(BlockMXFP4) == 17);

inline float h2f(uint16_t h) { return fp16_to_f32(h); }

// Round to nearest, ties to even (the ggml `nearest_int` helper; valid for |x| < 2^22).
inline int nearest_int(float x) {
  float v = x + 12582912.f;
  uint32_t u = f32_bits(v);
  return int(u & 0x007fffff) - 0x00400000;
}

// roundf (half away from zero) to an integer clamped to [lo, hi]; NaN gives 0. Keeps the float
// -> int conversion defined for non-finite input (a finite in-range value is unaffected).
inline int round_clamped(float v, int lo, int hi) {
  const float r = __builtin_roundf(v);
  if (!(r == r)) return 0;
  if (r < float(lo)) return lo;
  if (r > float(hi)) return hi;
  return int(r);
}

// The 4-bit non-linear codebook of IQ4_NL / IQ4_XS (the format's published constants).
inline constexpr int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
// E2M1 code -> value times two (the MXFP4 format's published constants).
inline constexpr int8_t kMXFP4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// E8M0 exponent -> 2^(e-127) / 2 as float (the half compensates for the doubled E2M1 table).
inline float e8m0_to_f32_half(uint8_t e) {
  uint32_t bits = e < 2 ? (0x00200000u << e) : (uint32_t(e - 1) << 23);
  return f32_from_bits(bits);
}

}  // namespace brisk::quant

namespace brisk::quant {

// Q4_K / Q5_K: 8 six-bit scales and 8 six-bit mins packed in 12 bytes. j in [0,8).
inline void kquant_scale_min(int j, const uint8_t* q, uint8_t* sc, uint8_t* mn) {
  if (j < 4) {
    *sc = q[j] & 63;
    *mn = q[j + 4] & 63;
  } else {
    *sc = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *mn = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Q3_K: 16 six-bit scales (stored +32) packed in 12 bytes; returns the signed scale i in [0,16).
inline int q3k_scale(int i, const uint8_t* s) {
  int lo = i < 8 ? (s[i] & 0xF) : (s[i - 8] >> 4);
  int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
  return (lo | (hi << 4)) - 32;
}

}  // namespace brisk::quant
