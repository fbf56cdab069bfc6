// Ternary formats (weights in {-1, 0, 1} times one fp16 scale per 256 elements).
//   TQ2_0: 2 bits per element: byte h*32+j holds elements h*128 + s*32 + j in bits 2s..2s+1,
//          code c in {0,1,2} means c - 1.
//   TQ1_0: 1.6 bits per element: 5 trits per byte as a fixed-point base-3 fraction
//          (byte = ceil(t * 256 / 243), t = sum of trits * 3^k), read back by multiplying by
//          3^n (mod 256) and taking the top trit: ((byte * 3) >> 8). qs[0..32) hold elements
//          n*32+j, qs[32..48) elements 160+n*16+j, qh[0..4) elements 240+n*4+j (4 trits).
// Reference quantizer: d = max|x|, code = round(x/d) + 1 (half away from zero).
#include <cmath>

#include "quant/blocks.h"
#include "quant/quant_impl.h"

namespace brisk::quant {
namespace {

constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};

// Element-order trits (-1, 0, 1) of one TQ1_0 block.
void trits_tq1_0(const BlockTQ1_0& b, int8_t* t) {
  auto trit = [](uint8_t byte, int n) { return int8_t(((uint16_t(uint8_t(byte * kPow3[n])) * 3) >> 8) - 1); };
  for (int n = 0; n < 5; ++n)
    for (int j = 0; j < 32; ++j) t[n * 32 + j] = trit(b.qs[j], n);
  for (int n = 0; n < 5; ++n)
    for (int j = 0; j < 16; ++j) t[160 + n * 16 + j] = trit(b.qs[32 + j], n);
  for (int n = 0; n < 4; ++n)
    for (int j = 0; j < 4; ++j) t[240 + n * 4 + j] = trit(b.qh[j], n);
}

void trits_tq2_0(const BlockTQ2_0& b, int8_t* t) {
  for (int h = 0; h < 2; ++h)
    for (int s = 0; s < 4; ++s)
      for (int j = 0; j < 32; ++j) t[h * 128 + s * 32 + j] = int8_t(((b.qs[h * 32 + j] >> (2 * s)) & 3) - 1);
}

// codes in {0,1,2}; returns the scale d = max|x|
float ternary_codes(const float* x, uint8_t* q) {
  float amax = 0;
  for (int j = 0; j < QK_K; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float id = amax != 0.f ? 1.f / amax : 0.f;
  for (int j = 0; j < QK_K; ++j) q[j] = uint8_t(round_clamped(x[j] * id, -1, 1) + 1);
  return amax;
}

uint8_t pack_trits(const uint8_t* q, int stride, int count) {
  static constexpr int kWeights[5] = {81, 27, 9, 3, 1};
  int sum = 0;
  for (int n = 0; n < count; ++n) sum += q[n * stride] * kWeights[n];
  return uint8_t((sum * 256 + 242) / 243);
}

}  // namespace

void dequantize_row_tq1_0(const void* src, float* y, int64_t n) {
  const auto* b = static_cast<const BlockTQ1_0*>(src);
  int8_t t[QK_K];
  for (int64_t i = 0; i < n / QK_K; ++i, y += QK_K) {
    const float d = h2f(b[i].d);
    trits_tq1_0(b[i], t);
    for (int j = 0; j < QK_K; ++j) y[j] = d * float(t[j]);
  }
}

void dequantize_row_tq2_0(const void* src, float* y, int64_t n) {
  const auto* b = static_cast<const BlockTQ2_0*>(src);
  int8_t t[QK_K];
  for (int64_t i = 0; i < n / QK_K; ++i, y += QK_K) {
    const float d = h2f(b[i].d);
    trits_tq2_0(b[i], t);
    for (int j = 0; j < QK_K; ++j) y[j] = d * float(t[j]);
  }
}

void quantize_row_tq1_0_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockTQ1_0*>(dst);
  uint8_t q[QK_K];
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
    b[i].d = f32_to_fp16(ternary_codes(x, q));
    for (int j = 0; j < 32; ++j) b[i].qs[j] = pack_trits(q + j, 32, 5);
    for (int j = 0; j < 16; ++j) b[i].qs[32 + j] = pack_trits(q + 160 + j, 16, 5);
    for (int j = 0; j < 4; ++j) b[i].qh[j] = pack_trits(q + 240 + j, 4, 4);
  }
}

void quantize_row_tq2_0_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockTQ2_0*>(dst);
  uint8_t q[QK_K];
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
    b[i].d = f32_to_fp16(ternary_codes(x, q));
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 32; ++j) {
        const uint8_t* qq = q + h * 128 + j;
        b[i].qs[h * 32 + j] = uint8_t(qq[0] | (qq[32] << 2) | (qq[64] << 4) | (qq[96] << 6));
      }
  }
}

void vec_dot_tq1_0_q8_k(int64_t n, float* out, const void* w, const void* a) {
  const auto* x = static_cast<const BlockTQ1_0*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  int8_t t[QK_K];
  float sum = 0.f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    trits_tq1_0(x[i], t);
    int isum = 0;
    for (int j = 0; j < QK_K; ++j) isum += t[j] * y[i].qs[j];
    sum += h2f(x[i].d) * y[i].d * float(isum);
  }
  *out = sum;
}

void vec_dot_tq2_0_q8_k(int64_t n, float* out, const void* w, const void* a) {
  const auto* x = static_cast<const BlockTQ2_0*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  int8_t t[QK_K];
  float sum = 0.f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    trits_tq2_0(x[i], t);
    int isum = 0;
    for (int j = 0; j < QK_K; ++j) isum += t[j] * y[i].qs[j];
    sum += h2f(x[i].d) * y[i].d * float(isum);
  }
  *out = sum;
}

}  // namespace brisk::quant
