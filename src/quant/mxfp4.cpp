// MXFP4 (OCP microscaling): 32 E2M1 values sharing one E8M0 exponent e. Codes index the doubled
// E2M1 table kMXFP4Values, so the scale is 2^(e-127) / 2. Byte j: element j (low nibble),
// element j+16 (high nibble).
// Reference quantizer (as the GGUF numpy one): e = floor(log2(max|x|)) - 2 + 127, then each
// element takes the code of least |d*v - x| (first such code on ties). Pairs with Q8_0.
#include <cmath>

#include "quant/blocks.h"
#include "quant/quant_impl.h"

namespace brisk::quant {

void dequantize_row_mxfp4(const void* src, float* y, int64_t n) {
  const auto* b = static_cast<const BlockMXFP4*>(src);
  for (int64_t i = 0; i < n / QK_MXFP4; ++i, y += QK_MXFP4) {
    const float d = e8m0_to_f32_half(b[i].e);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * float(kMXFP4Values[b[i].qs[j] & 15]);
      y[j + 16] = d * float(kMXFP4Values[b[i].qs[j] >> 4]);
    }
  }
}

void quantize_row_mxfp4_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockMXFP4*>(dst);
  for (int64_t i = 0; i < n / QK_MXFP4; ++i, x += QK_MXFP4) {
    float amax = 0;
    for (int j = 0; j < QK_MXFP4; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    int e = 0;
    if (amax > 0) {
      float ef = std::floor(std::log2(amax)) - 2.f + 127.f;
      e = ef < 0.f ? 0 : ef > 255.f ? 255 : int(ef);
    }
    b[i].e = uint8_t(e);
    const float d = e8m0_to_f32_half(b[i].e);
    uint8_t code[QK_MXFP4];
    for (int j = 0; j < QK_MXFP4; ++j) {
      int best = 0;
      float best_err = std::fabs(d * float(kMXFP4Values[0]) - x[j]);
      for (int k = 1; k < 16; ++k) {
        float err = std::fabs(d * float(kMXFP4Values[k]) - x[j]);
        if (err < best_err) { best_err = err; best = k; }
      }
      code[j] = uint8_t(best);
    }
    for (int j = 0; j < 16; ++j) b[i].qs[j] = uint8_t(code[j] | (code[j + 16] << 4));
  }
}

void vec_dot_mxfp4_q8_0(int64_t n, float* out, const void* w, const void* a) {
  const auto* x = static_cast<const BlockMXFP4*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0.f;
  for (int64_t i = 0; i < n / QK_MXFP4; ++i) {
    int sumi = 0;
    for (int j = 0; j < 16; ++j)
      sumi += kMXFP4Values[x[i].qs[j] & 15] * y[i].qs[j] + kMXFP4Values[x[i].qs[j] >> 4] * y[i].qs[j + 16];
    sum += e8m0_to_f32_half(x[i].e) * h2f(y[i].d) * float(sumi);
  }
  *out = sum;
}

}  // namespace brisk::quant
