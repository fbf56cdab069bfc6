// Scalar IEEE half and bfloat16 conversions (bit-exact with the reference numpy/ggml ones:
// round to nearest even, NaN preserved).
#pragma once
#include <cstdint>
#include <cstring>

namespace brisk {

inline float f32_from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t f32_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

inline float fp16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0) {
    if (mant == 0) return f32_from_bits(sign);
    // subnormal: normalize
    exp = 127 - 15 + 1;
    while (!(mant & 0x400)) { mant <<= 1; --exp; }
    mant &= 0x3ff;
    return f32_from_bits(sign | (exp << 23) | (mant << 13));
  }
  if (exp == 31) return f32_from_bits(sign | 0x7f800000u | (mant << 13));
  return f32_from_bits(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

inline uint16_t f32_to_fp16(float f) {
  const uint32_t x = f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00 | ((abs >> 13) & 0x3ff));  // NaN
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00);  // overflow -> inf (incl. rounding)
  if (abs < 0x38800000u) {  // subnormal or zero in half
    if (abs < 0x33000000u) return uint16_t(sign);  // rounds to zero
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7fffff) | 0x800000;
    // value = m * 2^(e-150); half subnormal unit = 2^-24 -> q = m * 2^(e-126)
    const uint32_t rshift = 126 - e;  // >= 1
    uint32_t q = m >> rshift;
    const uint32_t rem = m & ((1u << rshift) - 1);
    const uint32_t halfway = 1u << (rshift - 1);
    if (rem > halfway || (rem == halfway && (q & 1))) ++q;
    return uint16_t(sign | q);
  }
  // normal: rebias exponent and round mantissa to 10 bits (nearest even)
  uint32_t h = ((abs >> 13) - ((127 - 15) << 10));
  const uint32_t rem = abs & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
  return uint16_t(sign | h);
}

inline float bf16_to_f32(uint16_t h) { return f32_from_bits(uint32_t(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 64);  // quiet NaN
  x += 0x7fff + ((x >> 16) & 1);
  return uint16_t(x >> 16);
}

}  // namespace brisk
