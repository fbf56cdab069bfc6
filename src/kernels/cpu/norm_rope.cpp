// RMS norm and rotary position embedding kernels.
//
// rms_norm: y = x / sqrt(mean(x^2) + eps) * w, over groups of `group` columns (the whole row
// for a layer norm, head_dim for the per-head q/k norm of Qwen3). Sum of squares in double.
//
// rope: rotates pairs of each head's first n_rot dims by theta = pos * inv_freq[i]. "Normal"
// pairing rotates (2i, 2i+1) (GGUF llama after its converter's q/k permutation), NeoX pairing
// rotates (i, i + n_rot/2) (Hugging Face rotate_half). cos/sin are computed once per token
// and applied to every head.
#include <cmath>

#include "kernels/cpu/ops.h"

namespace brisk::cpu {

void rms_norm_rows(const RmsNormArgs& a, int ith, int nth) {
  const int64_t group = a.group > 0 ? a.group : a.x.cols;
  for_each_group(a.x, group, ith, nth, [&](int64_t r, int64_t c0) {
    const float* x = a.x.row(r) + c0;
    float* y = a.out.row(r) + c0;
    const float inv = float(1.0 / std::sqrt(sum_squares(x, group) / double(group) + double(a.eps)));
    if (a.weight) {
      for (int64_t i = 0; i < group; ++i) y[i] = x[i] * inv * a.weight[i];
    } else {
      for (int64_t i = 0; i < group; ++i) y[i] = x[i] * inv;
    }
  });
}

void rope_rows(const RopeArgs& a, int ith, int nth) {
  const RopeTable& tab = *a.table;
  const int32_t half = tab.n_rot / 2;
  int64_t begin, end;
  split_range(a.x.rows, ith, nth, &begin, &end);
  constexpr int kMaxHalf = 512;  // n_rot <= 1024 is checked when the table is built
  float cs[kMaxHalf], sn[kMaxHalf];
  for (int64_t t = begin; t < end; ++t) {
    const double p = double(a.pos[t]);
    for (int32_t i = 0; i < half; ++i) {
      const double theta = p * double(tab.inv_freq[size_t(i)]);
      cs[i] = float(std::cos(theta)) * tab.attn_factor;
      sn[i] = float(std::sin(theta)) * tab.attn_factor;
    }
    float* row = a.x.row(t);
    for (int32_t h = 0; h < a.n_head; ++h) {
      float* x = row + int64_t(h) * a.head_dim;
      for (int32_t i = 0; i < half; ++i) {
        const int32_t i0 = tab.neox ? i : 2 * i;
        const int32_t i1 = tab.neox ? i + half : 2 * i + 1;
        const float x0 = x[i0], x1 = x[i1];
        x[i0] = x0 * cs[i] - x1 * sn[i];
        x[i1] = x0 * sn[i] + x1 * cs[i];
      }
    }
  }
}

}  // namespace brisk::cpu
