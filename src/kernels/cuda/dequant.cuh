// The device layout of weights and its decoding, shared by the CUDA kernels. A weight
// [n_out, n_in] is uploaded as up to two planes so that every row of quants starts 16-byte
// aligned and the GEMV reads it with 128-bit loads:
//   F32, F16, BF16, Q4_K,  one plane: the stored rows unchanged (Q4_K blocks are 144 = 9*16
//   Q5_K                   bytes, Q5_K blocks 176 = 11*16)
//   Q8_0                   quants int8 [n_out, n_in], then fp16 scales [n_out, n_in / 32]
//   Q4_0                   nibbles [n_out, n_in / 2] (each block's 16 bytes as stored), then
//                          fp16 scales [n_out, n_in / 32]
//   Q5_0                   nibbles [n_out, n_in / 2] as Q4_0, then 8 bytes a block
//                          [n_out, n_in / 32]: the 32 high bits (qh, as stored), fp16 d, 2 zero
//                          bytes (24 bytes a block against 22 stored: one 128-bit and one 64-bit
//                          load, both aligned)
//   Q6_K                   208-byte blocks (ql[128], qh[64], scales[16]) [n_out, n_in / 256],
//                          then fp16 d [n_out, n_in / 256]
// The scale plane starts at the first multiple of 256 bytes after the quants plane.
// Dev<F>::repack_block turns one stored block into its two parts; Dev<F>::load8(qs_row,
// sc_row, c, out) writes elements [8c, 8c + 8) of a device row as floats (embedding). All are
// __host__ __device__ so that the CPU unit tests check them against the reference
// dequantizers without a GPU.
#pragma once
#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define BRISK_HD __host__ __device__ __forceinline__
#else
#define BRISK_HD inline
#endif

namespace brisk::cuda {

// Block sizes (elements, bytes) of the device formats.
enum class DevFormat : int { f32, f16, bf16, q8_0, q4_0, q4_k, q6_k, q5_k, q5_0 };

BRISK_HD float half_bits_to_f32(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: renormalize
      exp = 127 - 15 + 1;
      while ((man & 0x400u) == 0) { man <<= 1; --exp; }
      bits = sign | (exp << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
#endif
}

BRISK_HD float bf16_bits_to_f32(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
#endif
}

BRISK_HD uint16_t ld_u16(const uint8_t* p) { return uint16_t(p[0] | (uint16_t(p[1]) << 8)); }

// Q4_K 6-bit scale and min of sub-block j in [0, 8) (the 12-byte packed scales field).
BRISK_HD void q4k_scale_min(int j, const uint8_t* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Device-layout geometry of one weight.
struct DevLayout {
  size_t qs_row = 0;     // bytes per row of the quants plane
  size_t sc_row = 0;     // bytes per row of the scale plane (0: none)
  size_t sc_offset = 0;  // byte offset of the scale plane
  size_t bytes = 0;      // whole device buffer
  int64_t block = 1;     // elements per stored block
  size_t stored_block_bytes = 0;
  bool repacked = false;  // differs from the stored rows
};

BRISK_HD DevLayout dev_layout(DevFormat f, int64_t n_in, int64_t n_out) {
  DevLayout L;
  switch (f) {
    case DevFormat::f32: L.qs_row = size_t(n_in) * 4; L.block = 1; L.stored_block_bytes = 4; break;
    case DevFormat::f16:
    case DevFormat::bf16: L.qs_row = size_t(n_in) * 2; L.block = 1; L.stored_block_bytes = 2; break;
    case DevFormat::q4_k: L.qs_row = size_t(n_in / 256) * 144; L.block = 256; L.stored_block_bytes = 144; break;
    case DevFormat::q5_k: L.qs_row = size_t(n_in / 256) * 176; L.block = 256; L.stored_block_bytes = 176; break;
    case DevFormat::q8_0:
      L.qs_row = size_t(n_in); L.sc_row = size_t(n_in / 32) * 2; L.block = 32; L.stored_block_bytes = 34;
      break;
    case DevFormat::q4_0:
      L.qs_row = size_t(n_in / 2); L.sc_row = size_t(n_in / 32) * 2; L.block = 32; L.stored_block_bytes = 18;
      break;
    case DevFormat::q5_0:
      L.qs_row = size_t(n_in / 2); L.sc_row = size_t(n_in / 32) * 8; L.block = 32; L.stored_block_bytes = 22;
      break;
    case DevFormat::q6_k:
      L.qs_row = size_t(n_in / 256) * 208; L.sc_row = size_t(n_in / 256) * 2; L.block = 256;
      L.stored_block_bytes = 210;
      break;
  }
  L.repacked = L.sc_row != 0;
  const size_t qs_bytes = L.qs_row * size_t(n_out);
  L.sc_offset = L.sc_row ? (qs_bytes + 255) / 256 * 256 : qs_bytes;
  L.bytes = L.sc_offset + L.sc_row * size_t(n_out);
  return L;
}

template <DevFormat F>
struct Dev;

template <>
struct Dev<DevFormat::f32> {
  BRISK_HD static void load8(const uint8_t* row, const uint8_t*, int64_t c, float* o) {
    const float* p = reinterpret_cast<const float*>(row) + 8 * c;
    for (int k = 0; k < 8; ++k) o[k] = p[k];
  }
};

template <>
struct Dev<DevFormat::f16> {
  BRISK_HD static void load8(const uint8_t* row, const uint8_t*, int64_t c, float* o) {
    for (int k = 0; k < 8; ++k) o[k] = half_bits_to_f32(ld_u16(row + 16 * c + 2 * k));
  }
};

template <>
struct Dev<DevFormat::bf16> {
  BRISK_HD static void load8(const uint8_t* row, const uint8_t*, int64_t c, float* o) {
    for (int k = 0; k < 8; ++k) o[k] = bf16_bits_to_f32(ld_u16(row + 16 * c + 2 * k));
  }
};

// Q8_0 stored: 34 bytes per 32 elements: fp16 d, int8 q[32]; x = d * q.
template <>
struct Dev<DevFormat::q8_0> {
  BRISK_HD static void repack_block(const uint8_t* src, uint8_t* qs, uint8_t* sc) {
    sc[0] = src[0];
    sc[1] = src[1];
    for (int k = 0; k < 32; ++k) qs[k] = src[2 + k];
  }
  BRISK_HD static void load8(const uint8_t* row, const uint8_t* sc, int64_t c, float* o) {
    const float d = half_bits_to_f32(ld_u16(sc + 2 * (c >> 2)));
    const int8_t* q = reinterpret_cast<const int8_t*>(row) + 8 * c;
    for (int k = 0; k < 8; ++k) o[k] = d * float(q[k]);
  }
};

// Q4_0 stored: 18 bytes per 32 elements: fp16 d, 16 bytes of nibbles; element j < 16 is the
// low nibble of byte j, element j >= 16 the high nibble of byte j - 16; x = d * (nibble - 8).
template <>
struct Dev<DevFormat::q4_0> {
  BRISK_HD static void repack_block(const uint8_t* src, uint8_t* qs, uint8_t* sc) {
    sc[0] = src[0];
    sc[1] = src[1];
    for (int k = 0; k < 16; ++k) qs[k] = src[2 + k];
  }
  BRISK_HD static void load8(const uint8_t* row, const uint8_t* sc, int64_t c, float* o) {
    const float d = half_bits_to_f32(ld_u16(sc + 2 * (c >> 2)));
    const int sub = int(c & 3);
    const uint8_t* q = row + 16 * (c >> 2) + 8 * (sub & 1);
    const int shift = sub >= 2 ? 4 : 0;
    for (int k = 0; k < 8; ++k) o[k] = d * float(int((q[k] >> shift) & 0xF) - 8);
  }
};

// Q5_0 stored: 22 bytes per 32 elements: fp16 d, qh (4 bytes, little-endian u32), 16 bytes of
// nibbles as Q4_0's; element j takes bit j of qh as its fifth bit (16): x = d * (q - 16). On the
// device the nibbles go to the quants plane, {qh, d, 0} (8 bytes) to the scale plane.
template <>
struct Dev<DevFormat::q5_0> {
  BRISK_HD static void repack_block(const uint8_t* src, uint8_t* qs, uint8_t* sc) {
    for (int k = 0; k < 4; ++k) sc[k] = src[2 + k];
    sc[4] = src[0];
    sc[5] = src[1];
    sc[6] = sc[7] = 0;
    for (int k = 0; k < 16; ++k) qs[k] = src[6 + k];
  }
  BRISK_HD static void load8(const uint8_t* row, const uint8_t* sc, int64_t c, float* o) {
    const uint8_t* s = sc + 8 * (c >> 2);
    const uint32_t qh = uint32_t(s[0]) | uint32_t(s[1]) << 8 | uint32_t(s[2]) << 16 | uint32_t(s[3]) << 24;
    const float d = half_bits_to_f32(ld_u16(s + 4));
    const int sub = int(c & 3);
    const uint8_t* q = row + 16 * (c >> 2) + 8 * (sub & 1);
    const int shift = sub >= 2 ? 4 : 0;
    for (int k = 0; k < 8; ++k) {
      const int j = 8 * sub + k;  // element within the block
      o[k] = d * float(int(((q[k] >> shift) & 0xF) | (((qh >> j) & 1u) << 4)) - 16);
    }
  }
};

// Elements [8c, 8c + 8) of a Q4_K / Q5_K row: blocks of kBlockBytes with fp16 d, fp16 dmin and
// 12 bytes of packed 6-bit scales/mins for 8 sub-blocks of 32, then (Q5_K) qh[32], then 128
// bytes of nibbles. Group j of 64 elements uses nibble bytes [32j, 32j+32): low nibbles are
// sub-block 2j, high nibbles sub-block 2j+1; Q5_K's element e adds bit e / 32 of qh[e % 32] as
// its fifth bit (16). x = d * sc * q - dmin * m.
template <int kBlockBytes, bool kHighBits>
BRISK_HD void kquant4_load8(const uint8_t* row, int64_t c, float* o) {
  const uint8_t* b = row + kBlockBytes * (c >> 5);
  const int e = int(c & 31) * 8;  // element within the block
  const int j = e / 64, within = e % 64, high = within >= 32 ? 1 : 0, l0 = within % 32;
  int sc = 0, m = 0;
  q4k_scale_min(2 * j + high, b + 4, sc, m);
  const float d = half_bits_to_f32(ld_u16(b)) * float(sc);
  const float mn = half_bits_to_f32(ld_u16(b + 2)) * float(m);
  const uint8_t* qh = b + 16 + l0;
  const uint8_t* q = b + (kHighBits ? 48 : 16) + 32 * j + l0;
  const int shift = high ? 4 : 0, hbit = e / 32;
  for (int k = 0; k < 8; ++k) {
    const int v = kHighBits ? ((q[k] >> shift) & 0xF) | (((qh[k] >> hbit) & 1) << 4) : (q[k] >> shift) & 0xF;
    o[k] = d * float(v) - mn;
  }
}

// Q4_K: 256 elements in 144 bytes (no qh). Kept as stored on the device.
template <>
struct Dev<DevFormat::q4_k> {
  BRISK_HD static void load8(const uint8_t* row, const uint8_t*, int64_t c, float* o) { kquant4_load8<144, false>(row, c, o); }
};

// Q5_K: 256 elements in 176 bytes (Q4_K's header, qh[32], Q4_K's nibbles). Kept as stored.
template <>
struct Dev<DevFormat::q5_k> {
  BRISK_HD static void load8(const uint8_t* row, const uint8_t*, int64_t c, float* o) { kquant4_load8<176, true>(row, c, o); }
};

// Q6_K stored: 256 elements in 210 bytes: ql[128] (low 4 bits), qh[64] (high 2 bits), int8
// scales[16], fp16 d; on the device the first 208 bytes stay together and d moves to the
// scale plane. Half h (128 elements) uses ql[64h..], qh[32h..], scales[8h..]; its quarter t
// element l (< 32) is ql[l + 32 (t & 1)] (low nibble for t < 2, else high) with bits
// 2t..2t+1 of qh[l], scale scales[l / 16 + 2t]; x = d * scale * (q - 32).
template <>
struct Dev<DevFormat::q6_k> {
  BRISK_HD static void repack_block(const uint8_t* src, uint8_t* qs, uint8_t* sc) {
    for (int k = 0; k < 208; ++k) qs[k] = src[k];
    sc[0] = src[208];
    sc[1] = src[209];
  }
  BRISK_HD static void load8(const uint8_t* row, const uint8_t* scp, int64_t c, float* o) {
    const uint8_t* b = row + 208 * (c >> 5);
    const int e = int(c & 31) * 8;
    const int h = e / 128, r = e % 128, t = r / 32, l0 = r % 32;
    const uint8_t* ql = b + 64 * h + 32 * (t & 1) + l0;
    const uint8_t* qh = b + 128 + 32 * h + l0;
    const int8_t sc = static_cast<int8_t>(b[192 + 8 * h + l0 / 16 + 2 * t]);
    const float d = half_bits_to_f32(ld_u16(scp + 2 * (c >> 5))) * float(sc);
    const int lshift = t >= 2 ? 4 : 0, hshift = 2 * t;
    for (int k = 0; k < 8; ++k) {
      const int q = int((ql[k] >> lshift) & 0xF) | (int((qh[k] >> hshift) & 3) << 4);
      o[k] = d * float(q - 32);
    }
  }
};

// Repacks stored block `b` of row `r` into the device buffer `dst` of layout L.
template <DevFormat F>
BRISK_HD void repack_block_at(const uint8_t* stored, size_t stored_row_bytes, uint8_t* dst, const DevLayout& L,
                              int64_t r, int64_t b) {
  constexpr int64_t kQsBytes = F == DevFormat::q8_0 ? 32 : F == DevFormat::q4_0 || F == DevFormat::q5_0 ? 16 : 208;
  constexpr int64_t kScBytes = F == DevFormat::q5_0 ? 8 : 2;
  Dev<F>::repack_block(stored + size_t(r) * stored_row_bytes + size_t(b) * L.stored_block_bytes,
                       dst + size_t(r) * L.qs_row + size_t(b * kQsBytes),
                       dst + L.sc_offset + size_t(r) * L.sc_row + size_t(b * kScBytes));
}

}  // namespace brisk::cuda
