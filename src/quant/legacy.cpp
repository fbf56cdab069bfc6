// The original ggml block formats: 32 elements, an fp16 scale d (and min m for the _1 types).
//   Q4_0: x = d * (q - 8),   q in [0,16)      Q4_1: x = d * q + m,  q in [0,16)
//   Q5_0: x = d * (q - 16),  q in [0,32)      Q5_1: x = d * q + m,  q in [0,32)
//   Q8_0: x = d * q,  q in [-127,127]         Q8_1: as Q8_0 plus s = d * sum(q)
// 4/5-bit codes: byte j holds element j (low nibble) and j+16 (high nibble); Q5 high bits are
// bit j of the little-endian uint32 qh. The reference quantizers reproduce the GGUF reference
// (numpy) rounding exactly, including its float64 evaluation of Q4_0/Q5_0 codes.
// Dot products: Q4_0, Q5_0, Q8_0 pair with Q8_0; Q4_1, Q5_1 (and Q8_1) pair with Q8_1, whose
// precomputed s turns the min term into one multiply per block.
#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "quant/quant_impl.h"

namespace brisk::quant {
namespace {

// max |x| over a block, and the signed value that attains it first
struct AbsMax { float amax; float value; };
AbsMax abs_max(const float* x, int n) {
  AbsMax r{0.f, 0.f};
  for (int j = 0; j < n; ++j) {
    float a = std::fabs(x[j]);
    if (a > r.amax) { r.amax = a; r.value = x[j]; }
  }
  return r;
}

// numpy: trunc(float32(float64(x) * float64(id) + off)) clipped to [0, hi]
int code_f64(float x, float id, double off, int hi) {
  float f = float(double(x) * double(id) + off);
  if (!(f >= 0.f)) return 0;
  if (f >= float(hi)) return hi;
  return int(f);
}

// numpy: trunc((x - min) * id + 0.5f) in float32, clipped to [0, hi]
int code_f32(float x, float mn, float id, int hi) {
  float f = (x - mn) * id + 0.5f;
  if (!(f >= 0.f)) return 0;
  if (f >= float(hi)) return hi;
  return int(f);
}

}  // namespace

void dequantize_row_q4_0(const void* src, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < n / QK4_0; ++i, y += QK4_0) {
    const float d = h2f(b[i].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * float(int(b[i].qs[j] & 15) - 8);
      y[j + 16] = d * float(int(b[i].qs[j] >> 4) - 8);
    }
  }
}

void dequantize_row_q4_1(const void* src, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ4_1*>(src);
  for (int64_t i = 0; i < n / QK4_1; ++i, y += QK4_1) {
    const float d = h2f(b[i].d), m = h2f(b[i].m);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * float(b[i].qs[j] & 15) + m;
      y[j + 16] = d * float(b[i].qs[j] >> 4) + m;
    }
  }
}

void dequantize_row_q5_0(const void* src, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ5_0*>(src);
  for (int64_t i = 0; i < n / QK5_0; ++i, y += QK5_0) {
    const float d = h2f(b[i].d);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    for (int j = 0; j < 16; ++j) {
      int lo = (b[i].qs[j] & 15) | (((qh >> j) & 1) << 4);
      int hi = (b[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      y[j] = d * float(lo - 16);
      y[j + 16] = d * float(hi - 16);
    }
  }
}

void dequantize_row_q5_1(const void* src, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ5_1*>(src);
  for (int64_t i = 0; i < n / QK5_1; ++i, y += QK5_1) {
    const float d = h2f(b[i].d), m = h2f(b[i].m);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    for (int j = 0; j < 16; ++j) {
      int lo = (b[i].qs[j] & 15) | (((qh >> j) & 1) << 4);
      int hi = (b[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      y[j] = d * float(lo) + m;
      y[j + 16] = d * float(hi) + m;
    }
  }
}

void dequantize_row_q8_0(const void* src, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / QK8_0; ++i, y += QK8_0) {
    const float d = h2f(b[i].d);
    for (int j = 0; j < QK8_0; ++j) y[j] = float(b[i].qs[j]) * d;
  }
}

void dequantize_row_q8_1(const void* src, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ8_1*>(src);
  for (int64_t i = 0; i < n / QK8_1; ++i, y += QK8_1) {
    const float d = h2f(b[i].d);
    for (int j = 0; j < QK8_1; ++j) y[j] = float(b[i].qs[j]) * d;
  }
}

void quantize_row_q4_0_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < n / QK4_0; ++i, x += QK4_0) {
    const float d = abs_max(x, QK4_0).value / -8.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    b[i].d = f32_to_fp16(d);
    for (int j = 0; j < 16; ++j) {
      int q0 = code_f64(x[j], id, 8.5, 15), q1 = code_f64(x[j + 16], id, 8.5, 15);
      b[i].qs[j] = uint8_t(q0 | (q1 << 4));
    }
  }
}

void quantize_row_q4_1_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ4_1*>(dst);
  for (int64_t i = 0; i < n / QK4_1; ++i, x += QK4_1) {
    float mn = x[0], mx = x[0];
    for (int j = 1; j < QK4_1; ++j) { mn = std::fmin(mn, x[j]); mx = std::fmax(mx, x[j]); }
    const float d = (mx - mn) / 15.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    b[i].d = f32_to_fp16(d);
    b[i].m = f32_to_fp16(mn);
    for (int j = 0; j < 16; ++j) {
      int q0 = code_f32(x[j], mn, id, 15), q1 = code_f32(x[j + 16], mn, id, 15);
      b[i].qs[j] = uint8_t(q0 | (q1 << 4));
    }
  }
}

void quantize_row_q5_0_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ5_0*>(dst);
  for (int64_t i = 0; i < n / QK5_0; ++i, x += QK5_0) {
    const float d = abs_max(x, QK5_0).value / -16.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    b[i].d = f32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      int q0 = code_f64(x[j], id, 16.5, 31), q1 = code_f64(x[j + 16], id, 16.5, 31);
      b[i].qs[j] = uint8_t((q0 & 15) | ((q1 & 15) << 4));
      qh |= uint32_t(q0 >> 4) << j;
      qh |= uint32_t(q1 >> 4) << (j + 16);
    }
    std::memcpy(b[i].qh, &qh, 4);
  }
}

void quantize_row_q5_1_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ5_1*>(dst);
  for (int64_t i = 0; i < n / QK5_1; ++i, x += QK5_1) {
    float mn = x[0], mx = x[0];
    for (int j = 1; j < QK5_1; ++j) { mn = std::fmin(mn, x[j]); mx = std::fmax(mx, x[j]); }
    const float d = (mx - mn) / 31.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    b[i].d = f32_to_fp16(d);
    b[i].m = f32_to_fp16(mn);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      int q0 = code_f32(x[j], mn, id, 31), q1 = code_f32(x[j + 16], mn, id, 31);
      b[i].qs[j] = uint8_t((q0 & 15) | ((q1 & 15) << 4));
      qh |= uint32_t(q0 >> 4) << j;
      qh |= uint32_t(q1 >> 4) << (j + 16);
    }
    std::memcpy(b[i].qh, &qh, 4);
  }
}

void quantize_row_q8_0_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / QK8_0; ++i, x += QK8_0) {
    const float d = abs_max(x, QK8_0).amax / 127.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    b[i].d = f32_to_fp16(d);
    for (int j = 0; j < QK8_0; ++j) b[i].qs[j] = int8_t(round_clamped(x[j] * id, -128, 127));
  }
}

void quantize_row_q8_1_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_1*>(dst);
  for (int64_t i = 0; i < n / QK8_1; ++i, x += QK8_1) {
    const float d = abs_max(x, QK8_1).amax / 127.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    b[i].d = f32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < QK8_1; ++j) {
      b[i].qs[j] = int8_t(round_clamped(x[j] * id, -128, 127));
      sum += b[i].qs[j];
    }
    b[i].s = f32_to_fp16(float(sum) * d);
  }
}

void vec_dot_q4_0_q8_0(int64_t n, float* out, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ4_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0.f;
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    int sumi = 0;
    for (int j = 0; j < 16; ++j)
      sumi += (int(x[i].qs[j] & 15) - 8) * y[i].qs[j] + (int(x[i].qs[j] >> 4) - 8) * y[i].qs[j + 16];
    sum += float(sumi) * (h2f(x[i].d) * h2f(y[i].d));
  }
  *out = sum;
}

void vec_dot_q4_1_q8_1(int64_t n, float* out, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ4_1*>(w);
  const auto* y = static_cast<const BlockQ8_1*>(a);
  float sum = 0.f;
  for (int64_t i = 0; i < n / QK8_1; ++i) {
    int sumi = 0;
    for (int j = 0; j < 16; ++j)
      sumi += int(x[i].qs[j] & 15) * y[i].qs[j] + int(x[i].qs[j] >> 4) * y[i].qs[j + 16];
    sum += float(sumi) * (h2f(x[i].d) * h2f(y[i].d)) + h2f(x[i].m) * h2f(y[i].s);
  }
  *out = sum;
}

void vec_dot_q5_0_q8_0(int64_t n, float* out, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ5_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0.f;
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, 4);
    int sumi = 0;
    for (int j = 0; j < 16; ++j) {
      int lo = (x[i].qs[j] & 15) | (((qh >> j) & 1) << 4);
      int hi = (x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      sumi += (lo - 16) * y[i].qs[j] + (hi - 16) * y[i].qs[j + 16];
    }
    sum += float(sumi) * (h2f(x[i].d) * h2f(y[i].d));
  }
  *out = sum;
}

void vec_dot_q5_1_q8_1(int64_t n, float* out, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ5_1*>(w);
  const auto* y = static_cast<const BlockQ8_1*>(a);
  float sum = 0.f;
  for (int64_t i = 0; i < n / QK8_1; ++i) {
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, 4);
    int sumi = 0;
    for (int j = 0; j < 16; ++j) {
      int lo = (x[i].qs[j] & 15) | (((qh >> j) & 1) << 4);
      int hi = (x[i].qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      sumi += lo * y[i].qs[j] + hi * y[i].qs[j + 16];
    }
    sum += float(sumi) * (h2f(x[i].d) * h2f(y[i].d)) + h2f(x[i].m) * h2f(y[i].s);
  }
  *out = sum;
}

void vec_dot_q8_0_q8_0(int64_t n, float* out, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ8_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0.f;
  for (int64_t i = 0; i < n / QK8_0; ++i) {
    int sumi = 0;
    for (int j = 0; j < QK8_0; ++j) sumi += int(x[i].qs[j]) * y[i].qs[j];
    sum += float(sumi) * (h2f(x[i].d) * h2f(y[i].d));
  }
  *out = sum;
}

void vec_dot_q8_1_q8_1(int64_t n, float* out, const void* w, const void* a) {
  const auto* x = static_cast<const BlockQ8_1*>(w);
  const auto* y = static_cast<const BlockQ8_1*>(a);
  float sum = 0.f;
  for (int64_t i = 0; i < n / QK8_1; ++i) {
    int sumi = 0;
    for (int j = 0; j < QK8_1; ++j) sumi += int(x[i].qs[j]) * y[i].qs[j];
    sum += float(sumi) * (h2f(x[i].d) * h2f(y[i].d));
  }
  *out = sum;
}

}  // namespace brisk::quant
