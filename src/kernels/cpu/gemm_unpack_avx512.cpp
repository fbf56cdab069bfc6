// Weight unpackers of the AVX-512 prefill GEMM: each stored block becomes unsigned codes in
// element order plus a float scale (and minimum) per block of B elements, as gemm_pack.h
// describes. The codes are exact: only the format's integer offset or its float minimum is
// split off, so the integer block sums of the tile kernel equal the reference dot product's.
//
//   format   B   codes                       w
//   Q8_0    32   q + 128                     d * (code - 128)
//   Q4_0    32   4-bit q                     d * (code - 8)
//   Q5_0    32   4-bit q | high bit << 4     d * (code - 16)
//   Q4_1    32   4-bit q                     d * code + m        (min = -m)
//   Q5_1    32   5-bit q                     d * code + m
//   Q4_K    32   4-bit q                     d*sc_j * code - dmin*m_j
//   Q5_K    32   5-bit q                     d*sc_j * code - dmin*m_j
//   Q6_K    16   6-bit q                     d*sc_j * (code - 32)
//   IQ4_NL  32   table value + 128           d * (code - 128)
//   IQ4_XS  32   table value + 128           d*(ls_j - 32) * (code - 128)
#include <immintrin.h>

#include <cstring>

#include "core/fp16.h"
#include "kernels/cpu/gemm_pack.h"
#include "quant/blocks.h"

namespace brisk::kernels::avx512 {
namespace {

using namespace quant;

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

// 16 packed bytes -> 16 low nibbles to out[0..15], 16 high nibbles to out[16..31].
inline void split_nibbles16(const uint8_t* qs, uint8_t* out) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m = _mm_set1_epi8(0x0F);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_and_si128(q, m));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16), _mm_and_si128(_mm_srli_epi16(q, 4), m));
}

// 32 packed bytes -> 32 low nibbles to out[0..31], 32 high nibbles to out[32..63].
inline void split_nibbles32(const uint8_t* qs, uint8_t* out) {
  const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
  const __m256i m = _mm256_set1_epi8(0x0F);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_and_si256(q, m));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32), _mm256_and_si256(_mm256_srli_epi16(q, 4), m));
}

// Sets bit 4 of the 32 codes at out where the matching bit of the 32-bit qh is set.
inline void add_high_bits32(uint32_t qh, uint8_t* out) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(out));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                      _mm256_or_si256(v, _mm256_maskz_mov_epi8(__mmask32(qh), _mm256_set1_epi8(0x10))));
}

void unpack_q8_0(const void* row, int64_t k, uint8_t* codes, float* scale, float*) {
  const auto* b = static_cast<const BlockQ8_0*>(row);
  for (int64_t i = 0; i < k / 32; ++i) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qs));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + 32 * i), _mm256_xor_si256(q, _mm256_set1_epi8(char(0x80))));
    scale[i] = h2f(b[i].d);
  }
}

void unpack_q4_0(const void* row, int64_t k, uint8_t* codes, float* scale, float*) {
  const auto* b = static_cast<const BlockQ4_0*>(row);
  for (int64_t i = 0; i < k / 32; ++i) {
    split_nibbles16(b[i].qs, codes + 32 * i);
    scale[i] = h2f(b[i].d);
  }
}

void unpack_q5_0(const void* row, int64_t k, uint8_t* codes, float* scale, float*) {
  const auto* b = static_cast<const BlockQ5_0*>(row);
  for (int64_t i = 0; i < k / 32; ++i) {
    split_nibbles16(b[i].qs, codes + 32 * i);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    add_high_bits32(qh, codes + 32 * i);
    scale[i] = h2f(b[i].d);
  }
}

void unpack_q4_1(const void* row, int64_t k, uint8_t* codes, float* scale, float* min) {
  const auto* b = static_cast<const BlockQ4_1*>(row);
  for (int64_t i = 0; i < k / 32; ++i) {
    split_nibbles16(b[i].qs, codes + 32 * i);
    scale[i] = h2f(b[i].d);
    min[i] = -h2f(b[i].m);
  }
}

void unpack_q5_1(const void* row, int64_t k, uint8_t* codes, float* scale, float* min) {
  const auto* b = static_cast<const BlockQ5_1*>(row);
  for (int64_t i = 0; i < k / 32; ++i) {
    split_nibbles16(b[i].qs, codes + 32 * i);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    add_high_bits32(qh, codes + 32 * i);
    scale[i] = h2f(b[i].d);
    min[i] = -h2f(b[i].m);
  }
}

// Q4_K / Q5_K: chunk c of 32 bytes holds elements 64c..64c+31 (low nibbles) and 64c+32..+63
// (high nibbles); Q5_K's bit 4 of element e is bit e / 32 of qh[e % 32].
template <class Block>
void unpack_q45_k(const void* row, int64_t k, uint8_t* codes, float* scale, float* min) {
  const auto* b = static_cast<const Block*>(row);
  for (int64_t i = 0; i < k / QK_K; ++i, codes += QK_K, scale += 8, min += 8) {
    const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, mn;
      kquant_scale_min(j, b[i].scales, &sc, &mn);
      scale[j] = d * float(sc);
      min[j] = dmin * float(mn);
    }
    for (int c = 0; c < 4; ++c) split_nibbles32(b[i].qs + 32 * c, codes + 64 * c);
    if constexpr (std::is_same_v<Block, BlockQ5_K>) {
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qh));
      for (int s = 0; s < 8; ++s) {
        const __mmask32 bit = _mm256_test_epi8_mask(qh, _mm256_set1_epi8(char(1 << s)));
        add_high_bits32(uint32_t(bit), codes + 32 * s);
      }
    }
  }
}

// Q6_K: half h (128 elements) from ql[64h..64h+63] and qh[32h..32h+31]:
//   e = 128h + 32s + j:  low 4 bits from ql[64h + 32(s&1) + j] (>> 4 when s >= 2),
//                        high 2 bits = (qh[32h + j] >> 2s) & 3.
void unpack_q6_k(const void* row, int64_t k, uint8_t* codes, float* scale, float*) {
  const auto* b = static_cast<const BlockQ6_K*>(row);
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
  for (int64_t i = 0; i < k / QK_K; ++i, codes += QK_K, scale += 16) {
    const float d = h2f(b[i].d);
    for (int j = 0; j < 16; ++j) scale[j] = d * float(b[i].scales[j]);
    for (int h = 0; h < 2; ++h) {
      const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].ql + 64 * h));
      const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].ql + 64 * h + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[i].qh + 32 * h));
      const __m256i lo[4] = {_mm256_and_si256(l0, m4), _mm256_and_si256(l1, m4),
                             _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                             _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4)};
      for (int s = 0; s < 4; ++s) {
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * s), m2);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + 128 * h + 32 * s),
                            _mm256_or_si256(lo[s], _mm256_slli_epi16(hi, 4)));
      }
    }
  }
}

// IQ4_NL / IQ4_XS: 4-bit indices into kIQ4NLValues, looked up as value + 128 with one pshufb.
inline void iq4_codes16(const uint8_t* qs, uint8_t* out) {
  alignas(16) static const uint8_t kTable[16] = {
      uint8_t(kIQ4NLValues[0] + 128),  uint8_t(kIQ4NLValues[1] + 128),  uint8_t(kIQ4NLValues[2] + 128),
      uint8_t(kIQ4NLValues[3] + 128),  uint8_t(kIQ4NLValues[4] + 128),  uint8_t(kIQ4NLValues[5] + 128),
      uint8_t(kIQ4NLValues[6] + 128),  uint8_t(kIQ4NLValues[7] + 128),  uint8_t(kIQ4NLValues[8] + 128),
      uint8_t(kIQ4NLValues[9] + 128),  uint8_t(kIQ4NLValues[10] + 128), uint8_t(kIQ4NLValues[11] + 128),
      uint8_t(kIQ4NLValues[12] + 128), uint8_t(kIQ4NLValues[13] + 128), uint8_t(kIQ4NLValues[14] + 128),
      uint8_t(kIQ4NLValues[15] + 128)};
  const __m128i t = _mm_load_si128(reinterpret_cast<const __m128i*>(kTable));
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m = _mm_set1_epi8(0x0F);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_shuffle_epi8(t, _mm_and_si128(q, m)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16), _mm_shuffle_epi8(t, _mm_and_si128(_mm_srli_epi16(q, 4), m)));
}

void unpack_iq4_nl(const void* row, int64_t k, uint8_t* codes, float* scale, float*) {
  const auto* b = static_cast<const BlockIQ4_NL*>(row);
  for (int64_t i = 0; i < k / 32; ++i) {
    iq4_codes16(b[i].qs, codes + 32 * i);
    scale[i] = h2f(b[i].d);
  }
}

void unpack_iq4_xs(const void* row, int64_t k, uint8_t* codes, float* scale, float*) {
  const auto* b = static_cast<const BlockIQ4_XS*>(row);
  for (int64_t i = 0; i < k / QK_K; ++i, codes += QK_K, scale += 8) {
    const float d = h2f(b[i].d);
    for (int j = 0; j < 8; ++j) {
      const int ls = ((b[i].scales_l[j / 2] >> (4 * (j % 2))) & 15) | (((b[i].scales_h >> (2 * j)) & 3) << 4);
      scale[j] = d * float(ls - 32);
      iq4_codes16(b[i].qs + 16 * j, codes + 32 * j);
    }
  }
}

}  // namespace

UnpackSpec unpack_spec(QuantType t) {
  switch (t) {
    case QuantType::Q8_0: return {.unpack = unpack_q8_0, .block = 32, .offset = 128};
    case QuantType::Q4_0: return {.unpack = unpack_q4_0, .block = 32, .offset = 8};
    case QuantType::Q5_0: return {.unpack = unpack_q5_0, .block = 32, .offset = 16};
    case QuantType::Q4_1: return {.unpack = unpack_q4_1, .block = 32, .has_min = true};
    case QuantType::Q5_1: return {.unpack = unpack_q5_1, .block = 32, .has_min = true};
    case QuantType::Q4_K: return {.unpack = unpack_q45_k<BlockQ4_K>, .block = 32, .has_min = true};
    case QuantType::Q5_K: return {.unpack = unpack_q45_k<BlockQ5_K>, .block = 32, .has_min = true};
    case QuantType::Q6_K: return {.unpack = unpack_q6_k, .block = 16, .offset = 32};
    case QuantType::IQ4_NL: return {.unpack = unpack_iq4_nl, .block = 32, .offset = 128};
    case QuantType::IQ4_XS: return {.unpack = unpack_iq4_xs, .block = 32, .offset = 128};
    default: return {};
  }
}

}  // namespace brisk::kernels::avx512
