// Frequencies follow transformers' rope initialization functions (modeling_rope_utils):
//   default: inv_freq[i] = theta^(-2i/n_rot)
//   linear:  inv_freq / factor
//   llama3:  wavelengths above original_ctx/low_freq_factor are divided by factor, below
//            original_ctx/high_freq_factor kept, in between smoothly interpolated
//   yarn:    per-pair blend of interpolated (inv_freq/factor) and extrapolated frequencies
//            over the correction range [low, high] from beta_fast/beta_slow, and cos/sin
//            scaled by attention_factor (0.1 ln(factor) + 1 unless given)
//   proportional (Gemma 4 full attention): n_rot is the whole head; the first
//            floor(proportion * n_rot / 2) pairs have inv_freq[i] = theta^(-2i/n_rot), the
//            others frequency 0 (not rotated); all divided by factor
#include "models/rope_scaling.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace brisk {

namespace {

double yarn_get_mscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

double yarn_correction_dim(double rotations, int dim, double base, double max_pos) {
  return (dim * std::log(max_pos / (rotations * 2.0 * M_PI))) / (2.0 * std::log(base));
}

}  // namespace

RopeTable rope_table_build(const RopeBuildParams& p) {
  BRISK_CHECK(p.n_rot > 0 && p.n_rot % 2 == 0 && p.n_rot <= 1024, "rope: rotary dimension ",
              p.n_rot, " must be even and in (0, 1024]");
  BRISK_CHECK(p.theta > 0.0f, "rope: base theta must be positive, got ", p.theta);
  const int half = p.n_rot / 2;
  BRISK_CHECK(p.freq_factors.empty() || p.freq_factors.size() == size_t(half),
              "rope: rope_freqs has ", p.freq_factors.size(), " entries, expected ", half);
  RopeTable tab;
  tab.n_rot = p.n_rot;
  tab.neox = p.neox;
  tab.inv_freq.resize(size_t(half));
  std::vector<double> base(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) base[size_t(i)] = std::pow(double(p.theta), -2.0 * i / p.n_rot);

  const RopeScaling& s = p.scaling;
  const double factor = s.factor;
  const double orig = s.original_ctx > 0 ? s.original_ctx : p.n_ctx_train;
  if (s.type == "default" || s.type.empty() || s.type == "none") {
    // unchanged
  } else if (s.type == "linear") {
    BRISK_CHECK(factor > 0, "rope: linear scaling needs a positive factor");
    for (double& f : base) f /= factor;
  } else if (s.type == "llama3") {
    BRISK_CHECK(factor > 0 && orig > 0 && s.high_freq_factor > s.low_freq_factor,
                "rope: llama3 scaling needs factor, original_max_position_embeddings and "
                "high_freq_factor > low_freq_factor");
    const double low_wavelen = orig / s.low_freq_factor;
    const double high_wavelen = orig / s.high_freq_factor;
    for (double& f : base) {
      const double wavelen = 2.0 * M_PI / f;
      if (wavelen < high_wavelen) continue;
      if (wavelen > low_wavelen) {
        f /= factor;
      } else {
        const double smooth = (orig / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = (1.0 - smooth) * f / factor + smooth * f;
      }
    }
  } else if (s.type == "yarn") {
    BRISK_CHECK(factor > 0 && orig > 0, "rope: yarn scaling needs factor and original context");
    double attn = s.attention_factor;
    if (attn <= 0.0) {
      attn = (s.mscale > 0 && s.mscale_all_dim > 0)
                 ? yarn_get_mscale(factor, s.mscale) / yarn_get_mscale(factor, s.mscale_all_dim)
                 : yarn_get_mscale(factor, 1.0);
    }
    double low = std::floor(yarn_correction_dim(s.beta_fast, p.n_rot, p.theta, orig));
    double high = std::ceil(yarn_correction_dim(s.beta_slow, p.n_rot, p.theta, orig));
    low = std::max(low, 0.0);
    high = std::min(high, double(p.n_rot - 1));
    if (low == high) high += 0.001;
    for (int i = 0; i < half; ++i) {
      const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
      const double extrapolation = 1.0 - ramp;
      const double f = base[size_t(i)];
      base[size_t(i)] = (f / factor) * (1.0 - extrapolation) + f * extrapolation;
    }
    tab.attn_factor = float(attn);
  } else if (s.type == "proportional") {
    BRISK_CHECK(factor > 0 && p.proportion > 0.0f && p.proportion <= 1.0f,
                "rope: proportional rope needs a positive factor and a rotated fraction in (0, 1], got ",
                p.proportion);
    const int angles = int(std::floor(double(p.proportion) * p.n_rot / 2.0));
    for (int i = 0; i < half; ++i) base[size_t(i)] = i < angles ? base[size_t(i)] / factor : 0.0;
  } else {
    fail("rope: unsupported rope scaling type '", s.type, "'");
  }
  for (int i = 0; i < half; ++i) {
    double f = base[size_t(i)];
    if (!p.freq_factors.empty()) {
      BRISK_CHECK(p.freq_factors[size_t(i)] > 0.0f, "rope: rope_freqs[", i, "] is not positive");
      f /= p.freq_factors[size_t(i)];
    }
    tab.inv_freq[size_t(i)] = float(f);
  }
  return tab;
}

}  // namespace brisk
