// Reference quantizers of the K-quants Q4_K, Q5_K, Q6_K and of the Q8_K activation format,
// following the ggml reference algorithm (no importance matrix):
//  - Q4_K/Q5_K: each 32-element sub-block gets a (scale, min) pair from a weighted
//    least-squares search over candidate inverse scales (weights = rms(sub-block) + |x|);
//    the 8 scales and 8 mins are then quantized to 6 bits against the largest of each.
//  - Q6_K: each 16-element sub-block gets a symmetric scale from a search over 19 candidate
//    inverse scales (weights x^2); scales are quantized to int8 against the largest.
//  - Q8_K: symmetric int8 with an fp32 scale, plus per-16 sums for the dot products.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "quant/quant_impl.h"

namespace brisk::quant {
namespace {

constexpr float kGroupMaxEps = 1e-15f;

// Asymmetric fit of x[0..n) to scale * L + min with L in [0, nmax]. Returns the scale and
// stores -min (>= 0) in *neg_min.
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min,
                    uint8_t* Laux, float rmin, float rdelta, int nstep) {
  float mn = x[0], mx = x[0];
  float sum_w = w[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < mn) mn = x[i];
    if (x[i] > mx) mx = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (mn > 0) mn = 0;
  if (mx == mn) {
    std::fill(L, L + n, uint8_t(0));
    *neg_min = -mn;
    return 0.f;
  }
  float iscale = float(nmax) / (mx - mn);
  float scale = 1.f / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    int l = std::clamp(nearest_int(iscale * (x[i] - mn)), 0, nmax);
    L[i] = uint8_t(l);
    float diff = scale * float(l) + mn - x[i];
    best_error += w[i] * diff * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * float(is) + float(nmax)) / (mx - mn);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = std::clamp(nearest_int(iscale * (x[i] - mn)), 0, nmax);
      Laux[i] = uint8_t(l);
      sum_l += w[i] * float(l);
      sum_l2 += w[i] * float(l) * float(l);
      sum_xl += w[i] * float(l) * x[i];
    }
    float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * float(Laux[i]) + this_min - x[i];
        cur_error += w[i] * diff * diff;
      }
      if (cur_error < best_error) {
        std::copy(Laux, Laux + n, L);
        best_error = cur_error;
        scale = this_scale;
        mn = this_min;
      }
    }
  }
  *neg_min = -mn;
  return scale;
}

// Symmetric fit of x[0..n) to scale * (L - nmax), L in [0, 2*nmax), weights x^2.
float fit_scale_symmetric(int n, int nmax, const float* x, int8_t* L) {
  float mx = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    float ax = std::fabs(x[i]);
    if (ax > amax) { amax = ax; mx = x[i]; }
  }
  if (amax < kGroupMaxEps) {
    std::fill(L, L + n, int8_t(0));
    return 0.f;
  }
  auto code = [&](float iscale, int i) {
    return std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
  };
  float iscale = -float(nmax) / mx;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = code(iscale, i);
    L[i] = int8_t(l + nmax);
    float w = x[i] * x[i];
    sumlx += w * x[i] * float(l);
    suml2 += w * float(l) * float(l);
  }
  float scale = suml2 != 0 ? sumlx / suml2 : 0.f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(float(nmax) + 0.1f * float(is)) / mx;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = code(iscale, i);
      float w = x[i] * x[i];
      sumlx += w * x[i] * float(l);
      suml2 += w * float(l) * float(l);
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = int8_t(nmax + code(iscale, i));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Shared by Q4_K and Q5_K: fills d, dmin, the 12 packed scale bytes and L (codes in [0,nmax]).
void quantize_scales_mins(const float* x, int nmax, float rmin, int nstep, uint16_t* d_out,
                          uint16_t* dmin_out, uint8_t* packed, uint8_t* L) {
  float scales[8], mins[8], weights[32];
  uint8_t Laux[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xb = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xb[l] * xb[l];
    float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xb[l]);
    scales[j] = fit_scale_min(32, nmax, xb, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  std::memset(packed, 0, K_SCALE_SIZE);
  for (int j = 0; j < 8; ++j) {
    uint8_t ls = uint8_t(std::min(63, nearest_int(inv_scale * scales[j])));
    uint8_t lm = uint8_t(std::min(63, nearest_int(inv_min * mins[j])));
    if (j < 4) {
      packed[j] = ls;
      packed[j + 4] = lm;
    } else {
      packed[j + 4] = uint8_t((ls & 0xF) | ((lm & 0xF) << 4));
      packed[j - 4] |= uint8_t((ls >> 4) << 6);
      packed[j] |= uint8_t((lm >> 4) << 6);
    }
  }
  *d_out = f32_to_fp16(max_scale / 63.f);
  *dmin_out = f32_to_fp16(max_min / 63.f);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, mn;
    kquant_scale_min(j, packed, &sc, &mn);
    const float d = h2f(*d_out) * float(sc);
    if (d == 0.f) continue;
    const float dm = h2f(*dmin_out) * float(mn);
    for (int ii = 0; ii < 32; ++ii)
      L[32 * j + ii] = uint8_t(std::clamp(nearest_int((x[32 * j + ii] + dm) / d), 0, nmax));
  }
}

}  // namespace

void quantize_row_q4_k_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ4_K*>(dst);
  uint8_t L[QK_K];
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
    quantize_scales_mins(x, 15, -1.f, 20, &b[i].d, &b[i].dmin, b[i].scales, L);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l)
        b[i].qs[c * 32 + l] = uint8_t(L[c * 64 + l] | (L[c * 64 + l + 32] << 4));
  }
}

void quantize_row_q5_k_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ5_K*>(dst);
  uint8_t L[QK_K];
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
    quantize_scales_mins(x, 31, -0.5f, 15, &b[i].d, &b[i].dmin, b[i].scales, L);
    std::memset(b[i].qh, 0, sizeof b[i].qh);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) {
        int l1 = L[c * 64 + l], l2 = L[c * 64 + l + 32];
        if (l1 > 15) { l1 -= 16; b[i].qh[l] |= uint8_t(1 << (2 * c)); }
        if (l2 > 15) { l2 -= 16; b[i].qh[l] |= uint8_t(2 << (2 * c)); }
        b[i].qs[c * 32 + l] = uint8_t(l1 | (l2 << 4));
      }
  }
}

void quantize_row_q6_k_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ6_K*>(dst);
  int8_t L[QK_K];
  float scales[16];
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < 16; ++ib) {
      scales[ib] = fit_scale_symmetric(16, 32, x + 16 * ib, L + 16 * ib);
      float abs_scale = std::fabs(scales[ib]);
      if (abs_scale > max_abs_scale) { max_abs_scale = abs_scale; max_scale = scales[ib]; }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&b[i], 0, sizeof(BlockQ6_K));
      continue;
    }
    const float iscale = -128.f / max_scale;
    b[i].d = f32_to_fp16(1.f / iscale);
    for (int ib = 0; ib < 16; ++ib)
      b[i].scales[ib] = int8_t(std::min(127, nearest_int(iscale * scales[ib])));
    for (int j = 0; j < 16; ++j) {
      const float d = h2f(b[i].d) * float(b[i].scales[j]);
      if (d == 0.f) continue;
      for (int ii = 0; ii < 16; ++ii)
        L[16 * j + ii] = int8_t(std::clamp(nearest_int(x[16 * j + ii] / d), -32, 31) + 32);
    }
    for (int h = 0; h < 2; ++h) {
      const int8_t* Lh = L + 128 * h;
      uint8_t* ql = b[i].ql + 64 * h;
      uint8_t* qh = b[i].qh + 32 * h;
      for (int l = 0; l < 32; ++l) {
        int q1 = Lh[l], q2 = Lh[l + 32], q3 = Lh[l + 64], q4 = Lh[l + 96];
        ql[l] = uint8_t((q1 & 0xF) | ((q3 & 0xF) << 4));
        ql[l + 32] = uint8_t((q2 & 0xF) | ((q4 & 0xF) << 4));
        qh[l] = uint8_t((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
      }
    }
  }
}

void quantize_row_q8_k_ref(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
    float mx = 0, amax = 0;
    for (int j = 0; j < QK_K; ++j) {
      float ax = std::fabs(x[j]);
      if (ax > amax) { amax = ax; mx = x[j]; }
    }
    if (amax == 0.f) {
      std::memset(&b[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.f / mx;
    for (int j = 0; j < QK_K; ++j) b[i].qs[j] = int8_t(std::min(127, nearest_int(iscale * x[j])));
    for (int g = 0; g < QK_K / 16; ++g) {
      int s = 0;
      for (int j = 0; j < 16; ++j) s += b[i].qs[16 * g + j];
      b[i].bsums[g] = int16_t(s);
    }
    b[i].d = 1.f / iscale;
  }
}

}  // namespace brisk::quant
