// Lattice codebooks of the IQ formats (the formats' published constants; see iq_grids.cpp).
// Each entry packs one group of grid values, element k in byte k (little-endian):
//   IQ2_XXS (256 x 8), IQ2_XS (512 x 8), IQ2_S (1024 x 8): values 0x08, 0x19, 0x2b
//   IQ3_XXS (256 x 4): values 0x04..0x3e;  IQ3_S (512 x 4): odd values 0x01..0x0f
//   IQ1_S / IQ1_M (2048 x 8): int8 values -1, 0, 1
#pragma once
#include <cstdint>

namespace brisk::quant {

const uint64_t* iq2xxs_grid();
const uint64_t* iq2xs_grid();
const uint64_t* iq2s_grid();
const uint32_t* iq3xxs_grid();
const uint32_t* iq3s_grid();
const uint64_t* iq1s_grid();

// IQ2/IQ3 sign byte for a 7-bit index: bit 7 is the parity of the other seven (an even
// number of negatives per group of 8).
inline uint8_t iq_ksigns(uint32_t i7) {
  return uint8_t(i7 | (uint32_t(__builtin_parity(i7)) << 7));
}

// Sign patterns as bytes for SIMD kernels: entry i (7-bit sign index) holds 8 bytes, byte j =
// 0xFF (-1) when bit j of iq_ksigns(i) is set, else 0x01 (+1).
const uint64_t* iq_sign_bytes();

// For tests: the packed code of entry i, element 0 in the lowest bits (2 bits per element for
// the 3-valued grids, 4 for the 8-valued ones); the codebooks are sorted by this key.
uint32_t iq_grid_key(int which, int i);
inline constexpr int kIqGridCount = 6;
int iq_grid_size(int which);

}  // namespace brisk::quant
