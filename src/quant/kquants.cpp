// K-quants: 256-element super-blocks split into sub-blocks with their own small integer scales
// (and mins), themselves scaled by fp16 super-block factors d (and dmin).
//   Q2_K: 16 x 16 elements, 2-bit q, 4-bit scale and min:  x = d*sc*q - dmin*m
//   Q3_K: 16 x 16 elements, 3-bit q (2 low bits + hmask), 6-bit signed scale: x = d*sc*q
//   Q4_K:  8 x 32 elements, 4-bit q, 6-bit scale and min:  x = d*sc*q - dmin*m
//   Q5_K:  8 x 32 elements, 5-bit q (4 + qh bit), 6-bit scale and min
//   Q6_K: 16 x 16 elements, 6-bit q (4 + 2 bits) - 32, int8 scale: x = d*sc*q
//   Q8_K: fp32 d, int8 q and per-16 sums (the activation format of every K/IQ/TQ dot product)
// The float expression order of each dequantizer matches the GGUF reference (numpy) so that
// results are bit-identical. Dot products work on integers within each sub-block and apply the
// float scales once per super-block (as ggml's reference does).
#include <cstring>

#include "quant/blocks.h"
#include "quant/quant_impl.h"

namespace brisk::quant {
namespace {

// Each decoder writes the 256 integer codes of one block in element order.
void codes_q2_k(const BlockQ2_K& b, uint8_t* q) {
  for (int h = 0; h < 2; ++h)
    for (int s = 0; s < 4; ++s)
      for (int j = 0; j < 32; ++j) q[h * 128 + s * 32 + j] = (b.qs[h * 32 + j] >> (2 * s)) & 3;
}

void codes_q3_k(const BlockQ3_K& b, int8_t* q) {
  for (int h = 0; h < 2; ++h)
    for (int s = 0; s < 4; ++s)
      for (int j = 0; j < 32; ++j) {
        int lo = (b.qs[h * 32 + j] >> (2 * s)) & 3;
        int hbit = (b.hmask[j] >> (h * 4 + s)) & 1;
        q[h * 128 + s * 32 + j] = int8_t(lo - (hbit ? 0 : 4));
      }
}

void codes_q4_k(const BlockQ4_K& b, uint8_t* q) {
  for (int c = 0; c < 4; ++c)
    for (int j = 0; j < 32; ++j) {
      q[c * 64 + j] = b.qs[c * 32 + j] & 15;
      q[c * 64 + 32 + j] = b.qs[c * 32 + j] >> 4;
    }
}

void codes_q5_k(const BlockQ5_K& b, uint8_t* q) {
  for (int c = 0; c < 4; ++c)
    for (int j = 0; j < 32; ++j) {
      q[c * 64 + j] = b.qs[c * 32 + j] & 15;
      q[c * 64 + 32 + j] = b.qs[c * 32 + j] >> 4;
    }
  for (int e = 0; e < QK_K; ++e) q[e] |= ((b.qh[e % 32] >> (e / 32)) & 1) << 4;
}

void codes_q6_k(const BlockQ6_K& b, int8_t* q) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b.ql + h * 64;
    const uint8_t* qh = b.qh + h * 32;
    for (int j = 0; j < 32; ++j) {
      q[h * 128 + j] = int8_t(((ql[j] & 15) | (((qh[j] >> 0) & 3) << 4)) - 32);
      q[h * 128 + 32 + j] = int8_t(((ql[j + 32] & 15) | (((qh[j] >> 2) & 3) << 4)) - 32);
      q[h * 128 + 64 + j] = int8_t(((ql[j] >> 4) | (((qh[j] >> 4) & 3) << 4)) - 32);
      q[h * 128 + 96 + j] = int8_t(((ql[j + 32] >> 4) | (((qh[j] >> 6) & 3) << 4)) - 32);
    }
  }
}

}  // namespace

void dequantize_row_q2_k(const void* src, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ2_K*>(src);
  uint8_t q[QK_K];
  for (int64_t i = 0; i < n / QK_K; ++i, y += QK_K) {
    const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
    codes_q2_k(b[i], q);
    for (int g = 0; g < 16; ++g) {
      const float dl = d * float(b[i].scales[g] & 15), ml = dmin * float(b[i].scales[g] >> 4);
      for (int j = 0; j < 16; ++j) y[g * 16 + j] = dl * float(q[g * 16 + j]) - ml;
    }
  }
}

void dequantize_row_q3_k(const void* src, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ3_K*>(src);
  int8_t q[QK_K];
  for (int64_t i = 0; i < n / QK_K; ++i, y += QK_K) {
    const float d = h2f(b[i].d);
    codes_q3_k(b[i], q);
    for (int g = 0; g < 16; ++g) {
      const float dl = d * float(q3k_scale(g, b[i].scales));
      for (int j = 0; j < 16; ++j) y[g * 16 + j] = dl * float(q[g * 16 + j]);
    }
  }
}

void dequantize_row_q4_k(const void* src, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ4_K*>(src);
  uint8_t q[QK_K];
  for (int64_t i = 0; i < n / QK_K; ++i, y += QK_K) {
    const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
    codes_q4_k(b[i], q);
    for (int g = 0; g < 8; ++g) {
      uint8_t sc, mn;
      kquant_scale_min(g, b[i].scales, &sc, &mn);
      const float dl = d * float(sc), ml = dmin * float(mn);
      for (int j = 0; j < 32; ++j) y[g * 32 + j] = dl * float(q[g * 32 + j]) - ml;
    }
  }
}

void dequantize_row_q5_k(const void* src, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ5_K*>(src);
  uint8_t q[QK_K];
  for (int64_t i = 0; i < n / QK_K; ++i, y += QK_K) {
    const float d = h2f(b[i].d), dmin = h2f(b[i].dmin);
    codes_q5_k(b[i], q);
    for (int g = 0; g < 8; ++g) {
      uint8_t sc, mn;
      kquant_scale_min(g, b[i].scales, &sc, &mn);
      const float dl = d * float(sc), ml = dmin * float(mn);
      for (int j = 0; j < 32; ++j) y[g * 32 + j] = dl * float(q[g * 32 + j]) - ml;
    }
  }
}

void dequantize_row_q6_k(const void* src, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ6_K*>(src);
  int8_t q[QK_K];
  for (int64_t i = 0; i < n / QK_K; ++i, y += QK_K) {
    const float d = h2f(b[i].d);
    codes_q6_k(b[i], q);
    for (int g = 0; g < 16; ++g) {
      const float dl = d * float(b[i].scales[g]);
      for (int j = 0; j < 16; ++j) y[g * 16 + j] = dl * float(q[g * 16 + j]);
    }
  }
}

void dequantize_row_q8_k(const void* src, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ8_K*>(src);
  for (int64_t i = 0; i < n / QK_K; ++i, y += QK_K) {
    float d;
    std::memcpy(&d, &b[i].d, 4);
    for (int j = 0; j < QK_K; ++j) y[j] = d * float(b[i].qs[j]);
  }
}

void vec_dot_q2_k_q8_k(int64_t n, float* out, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ2_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  uint8_t q[QK_K];
  float sum = 0.f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    codes_q2_k(x[i], q);
    int isum = 0, msum = 0;
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int j = 0; j < 16; ++j) s += int(q[g * 16 + j]) * y[i].qs[g * 16 + j];
      isum += (x[i].scales[g] & 15) * s;
      msum += (x[i].scales[g] >> 4) * y[i].bsums[g];
    }
    sum += h2f(x[i].d) * y[i].d * float(isum) - h2f(x[i].dmin) * y[i].d * float(msum);
  }
  *out = sum;
}

void vec_dot_q3_k_q8_k(int64_t n, float* out, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ3_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  int8_t q[QK_K];
  float sum = 0.f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    codes_q3_k(x[i], q);
    int isum = 0;
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int j = 0; j < 16; ++j) s += int(q[g * 16 + j]) * y[i].qs[g * 16 + j];
      isum += q3k_scale(g, x[i].scales) * s;
    }
    sum += h2f(x[i].d) * y[i].d * float(isum);
  }
  *out = sum;
}

void vec_dot_q4_k_q8_k(int64_t n, float* out, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ4_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  uint8_t q[QK_K];
  float sum = 0.f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    codes_q4_k(x[i], q);
    int isum = 0, msum = 0;
    for (int g = 0; g < 8; ++g) {
      uint8_t sc, mn;
      kquant_scale_min(g, x[i].scales, &sc, &mn);
      int s = 0;
      for (int j = 0; j < 32; ++j) s += int(q[g * 32 + j]) * y[i].qs[g * 32 + j];
      isum += sc * s;
      msum += mn * (y[i].bsums[2 * g] + y[i].bsums[2 * g + 1]);
    }
    sum += h2f(x[i].d) * y[i].d * float(isum) - h2f(x[i].dmin) * y[i].d * float(msum);
  }
  *out = sum;
}

void vec_dot_q5_k_q8_k(int64_t n, float* out, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ5_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  uint8_t q[QK_K];
  float sum = 0.f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    codes_q5_k(x[i], q);
    int isum = 0, msum = 0;
    for (int g = 0; g < 8; ++g) {
      uint8_t sc, mn;
      kquant_scale_min(g, x[i].scales, &sc, &mn);
      int s = 0;
      for (int j = 0; j < 32; ++j) s += int(q[g * 32 + j]) * y[i].qs[g * 32 + j];
      isum += sc * s;
      msum += mn * (y[i].bsums[2 * g] + y[i].bsums[2 * g + 1]);
    }
    sum += h2f(x[i].d) * y[i].d * float(isum) - h2f(x[i].dmin) * y[i].d * float(msum);
  }
  *out = sum;
}

void vec_dot_q6_k_q8_k(int64_t n, float* out, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ6_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  int8_t q[QK_K];
  float sum = 0.f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    codes_q6_k(x[i], q);
    int isum = 0;
    for (int g = 0; g < 16; ++g) {
      int s = 0;
      for (int j = 0; j < 16; ++j) s += int(q[g * 16 + j]) * y[i].qs[g * 16 + j];
      isum += x[i].scales[g] * s;
    }
    sum += h2f(x[i].d) * y[i].d * float(isum);
  }
  *out = sum;
}

void vec_dot_q8_k_q8_k(int64_t n, float* out, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ8_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0.f;
  for (int64_t i = 0; i < n / QK_K; ++i) {
    int isum = 0;
    for (int j = 0; j < QK_K; ++j) isum += int(x[i].qs[j]) * y[i].qs[j];
    sum += x[i].d * y[i].d * float(isum);
  }
  *out = sum;
}

}  // namespace brisk::quant
