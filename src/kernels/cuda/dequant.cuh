// Weight decoding shared by the CUDA kernels: load8<T>(row, c, out) writes elements
// [8c, 8c + 8) of one stored weight row as floats. Every block format used on the device
// (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K) splits into aligned groups of 8 that share one
// scale, so a warp lane decodes one group per step. The functions are __host__ __device__ so
// that the CPU unit tests check them against the reference dequantizers without a GPU.
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
enum class DevFormat : int { f32, f16, bf16, q8_0, q4_0, q4_k, q6_k };

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

template <DevFormat F>
struct Fmt;

template <>
struct Fmt<DevFormat::f32> {
  static constexpr int kBlock = 8, kBytes = 32;
  BRISK_HD static void load8(const uint8_t* row, int64_t c, float* o) {
    const float* p = reinterpret_cast<const float*>(row) + 8 * c;
#if defined(__CUDA_ARCH__)
    const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
    o[0] = a.x; o[1] = a.y; o[2] = a.z; o[3] = a.w; o[4] = b.x; o[5] = b.y; o[6] = b.z; o[7] = b.w;
#else
    for (int k = 0; k < 8; ++k) o[k] = p[k];
#endif
  }
};

template <>
struct Fmt<DevFormat::f16> {
  static constexpr int kBlock = 8, kBytes = 16;
  BRISK_HD static void load8(const uint8_t* row, int64_t c, float* o) {
    const uint8_t* p = row + 16 * c;
#if defined(__CUDA_ARCH__)
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
    for (int k = 0; k < 4; ++k) {
      o[2 * k] = half_bits_to_f32(uint16_t(w[k] & 0xffffu));
      o[2 * k + 1] = half_bits_to_f32(uint16_t(w[k] >> 16));
    }
#else
    for (int k = 0; k < 8; ++k) o[k] = half_bits_to_f32(ld_u16(p + 2 * k));
#endif
  }
};

template <>
struct Fmt<DevFormat::bf16> {
  static constexpr int kBlock = 8, kBytes = 16;
  BRISK_HD static void load8(const uint8_t* row, int64_t c, float* o) {
    const uint8_t* p = row + 16 * c;
#if defined(__CUDA_ARCH__)
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
    for (int k = 0; k < 4; ++k) {
      o[2 * k] = __uint_as_float(w[k] << 16);
      o[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
    }
#else
    for (int k = 0; k < 8; ++k) o[k] = bf16_bits_to_f32(ld_u16(p + 2 * k));
#endif
  }
};

// Q8_0: 32 elements in 34 bytes: fp16 scale d, int8 q[32]; x = d * q.
template <>
struct Fmt<DevFormat::q8_0> {
  static constexpr int kBlock = 32, kBytes = 34;
  BRISK_HD static void load8(const uint8_t* row, int64_t c, float* o) {
    const uint8_t* b = row + 34 * (c >> 2);
    const float d = half_bits_to_f32(ld_u16(b));
#if defined(__CUDA_ARCH__)
    // Blocks are 2-byte aligned: four 16-bit loads instead of eight byte loads.
    const uint16_t* q16 = reinterpret_cast<const uint16_t*>(b + 2 + 8 * (c & 3));
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint16_t u = q16[k];
      o[2 * k] = d * float(int8_t(u & 0xff));
      o[2 * k + 1] = d * float(int8_t(u >> 8));
    }
#else
    const int8_t* q = reinterpret_cast<const int8_t*>(b + 2 + 8 * (c & 3));
    for (int k = 0; k < 8; ++k) o[k] = d * float(q[k]);
#endif
  }
};

// Q4_0: 32 elements in 18 bytes: fp16 scale d, 16 bytes of nibbles; element j < 16 is the low
// nibble of byte j, element j >= 16 the high nibble of byte j - 16; x = d * (nibble - 8).
template <>
struct Fmt<DevFormat::q4_0> {
  static constexpr int kBlock = 32, kBytes = 18;
  BRISK_HD static void load8(const uint8_t* row, int64_t c, float* o) {
    const uint8_t* b = row + 18 * (c >> 2);
    const float d = half_bits_to_f32(ld_u16(b));
    const int sub = int(c & 3);
    const uint8_t* q = b + 2 + 8 * (sub & 1);
    const int shift = sub >= 2 ? 4 : 0;
    for (int k = 0; k < 8; ++k) o[k] = d * float(int((q[k] >> shift) & 0xF) - 8);
  }
};

// Q4_K: 256 elements in 144 bytes: fp16 d, fp16 dmin, 12 bytes of packed 6-bit scales/mins
// for 8 sub-blocks of 32, 128 bytes of nibbles. Group j of 64 elements uses bytes
// qs[32j, 32j+32): low nibbles are sub-block 2j, high nibbles sub-block 2j+1;
// x = d * sc * nibble - dmin * m.
template <>
struct Fmt<DevFormat::q4_k> {
  static constexpr int kBlock = 256, kBytes = 144;
  BRISK_HD static void load8(const uint8_t* row, int64_t c, float* o) {
    const uint8_t* b = row + 144 * (c >> 5);
    const int e = int(c & 31) * 8;  // element within the block
    const int j = e / 64, within = e % 64, high = within >= 32 ? 1 : 0, l0 = within % 32;
    int sc = 0, m = 0;
    q4k_scale_min(2 * j + high, b + 4, sc, m);
    const float d = half_bits_to_f32(ld_u16(b)) * float(sc);
    const float mn = half_bits_to_f32(ld_u16(b + 2)) * float(m);
    const uint8_t* q = b + 16 + 32 * j + l0;
    const int shift = high ? 4 : 0;
    for (int k = 0; k < 8; ++k) o[k] = d * float((q[k] >> shift) & 0xF) - mn;
  }
};

// Q6_K: 256 elements in 210 bytes: ql[128] (low 4 bits), qh[64] (high 2 bits), int8
// scales[16], fp16 d. Half h (128 elements) uses ql[64h..], qh[32h..], scales[8h..]; its
// quarter t element l (< 32) is ql[l + 32 (t & 1)] (low nibble for t < 2, else high) with
// bits 2t..2t+1 of qh[l], scale scales[l / 16 + 2t]; x = d * scale * (q - 32).
template <>
struct Fmt<DevFormat::q6_k> {
  static constexpr int kBlock = 256, kBytes = 210;
  BRISK_HD static void load8(const uint8_t* row, int64_t c, float* o) {
    const uint8_t* b = row + 210 * (c >> 5);
    const int e = int(c & 31) * 8;
    const int h = e / 128, r = e % 128, t = r / 32, l0 = r % 32;
    const uint8_t* ql = b + 64 * h + 32 * (t & 1) + l0;
    const uint8_t* qh = b + 128 + 32 * h + l0;
    const int8_t sc = static_cast<int8_t>(b[192 + 8 * h + l0 / 16 + 2 * t]);
    const float d = half_bits_to_f32(ld_u16(b + 208)) * float(sc);
    const int lshift = t >= 2 ? 4 : 0, hshift = 2 * t;
    for (int k = 0; k < 8; ++k) {
      const int q = int((ql[k] >> lshift) & 0xF) | (int((qh[k] >> hshift) & 3) << 4);
      o[k] = d * float(q - 32);
    }
  }
};

}  // namespace brisk::cuda
