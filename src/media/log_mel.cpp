#include "media/log_mel.h"

#include <algorithm>
#include <cmath>
#include <complex>

#include "core/error.h"

namespace brisk::media {

namespace {

// The Slaney mel scale: linear below 1 kHz (3 mels per 200 Hz), logarithmic above (27 mels per
// factor 6.4).
constexpr double kMinLogHz = 1000.0;
constexpr double kMinLogMel = 15.0;
const double kLogStep = 27.0 / std::log(6.4);

double hz_to_mel(double hz) { return hz < kMinLogHz ? 3.0 * hz / 200.0 : kMinLogMel + std::log(hz / kMinLogHz) * kLogStep; }
double mel_to_hz(double mel) { return mel < kMinLogMel ? 200.0 * mel / 3.0 : kMinLogHz * std::exp((mel - kMinLogMel) / kLogStep); }

// numpy.linspace(a, b, n)[i]
double linspace(double a, double b, int32_t n, int32_t i) {
  if (i == n - 1) return b;
  return a + (b - a) / double(n - 1) * double(i);
}

}  // namespace

LogMelExtractor::LogMelExtractor(const LogMelParams& p) : p_(p), fft_(p.n_fft) {
  BRISK_CHECK(p.n_mels >= 1 && p.n_mels <= 1024 && p.n_fft >= 8 && p.n_fft <= 65536 && p.hop >= 1 && p.hop <= p.n_fft &&
                  p.sample_rate >= 1000 && p.n_samples >= 0,
              "log-mel: unsupported parameters (n_mels ", p.n_mels, ", n_fft ", p.n_fft, ", hop ", p.hop, ", rate ",
              p.sample_rate, ")");
  window_.resize(size_t(p.n_fft));
  for (int32_t i = 0; i < p.n_fft; ++i) window_[size_t(i)] = 0.5 - 0.5 * std::cos(2.0 * M_PI * double(i) / double(p.n_fft));
  const int32_t n_bins = p.n_fft / 2 + 1;
  std::vector<double> fft_freq(static_cast<size_t>(n_bins)), edge(static_cast<size_t>(p.n_mels + 2));
  for (int32_t k = 0; k < n_bins; ++k) fft_freq[size_t(k)] = linspace(0.0, p.sample_rate / 2.0, n_bins, k);
  const double mel_lo = hz_to_mel(0.0), mel_hi = hz_to_mel(p.sample_rate / 2.0);
  for (int32_t i = 0; i < p.n_mels + 2; ++i) edge[size_t(i)] = mel_to_hz(linspace(mel_lo, mel_hi, p.n_mels + 2, i));
  filters_.assign(size_t(p.n_mels) * size_t(n_bins), 0.0);
  first_.assign(size_t(p.n_mels), n_bins);
  last_.assign(size_t(p.n_mels), 0);
  for (int32_t m = 0; m < p.n_mels; ++m) {
    const double lo = edge[size_t(m)], mid = edge[size_t(m + 1)], hi = edge[size_t(m + 2)];
    const double norm = 2.0 / (hi - lo);
    for (int32_t k = 0; k < n_bins; ++k) {
      const double down = -(lo - fft_freq[size_t(k)]) / (mid - lo);
      const double up = (hi - fft_freq[size_t(k)]) / (hi - mid);
      const double w = std::max(0.0, std::min(down, up)) * norm;
      filters_[size_t(m) * size_t(n_bins) + size_t(k)] = w;
      if (w != 0.0) {
        first_[size_t(m)] = std::min(first_[size_t(m)], k);
        last_[size_t(m)] = k + 1;
      }
    }
    if (last_[size_t(m)] == 0) first_[size_t(m)] = 0;
  }
}

LogMel LogMelExtractor::compute(const float* samples, int64_t n) const {
  const int32_t n_fft = p_.n_fft, hop = p_.hop, half = n_fft / 2, n_bins = n_fft / 2 + 1;
  BRISK_CHECK(n >= 0 && n <= (int64_t(1) << 36), "log-mel: ", n, " samples out of range");
  const int64_t len = std::max<int64_t>(n, p_.n_samples);  // zero-padded to 30 s when shorter
  BRISK_CHECK(len > half, "log-mel: ", len, " samples are too few for a window of ", n_fft,
              " (reflect padding needs more than ", half, ")");
  auto sample = [&](int64_t i) -> double {  // the padded signal, reflected at both ends
    if (i < 0) i = -i;
    if (i >= len) i = 2 * (len - 1) - i;
    return i < n ? double(samples[i]) : 0.0;
  };
  const int64_t n_frames = len / hop;  // 1 + len / hop centred frames, the last one dropped
  BRISK_CHECK(n_frames <= INT32_MAX, "log-mel: too many frames");
  LogMel out;
  out.n_frames = int32_t(n_frames);
  out.n_mels = p_.n_mels;
  out.data.resize(size_t(n_frames) * size_t(p_.n_mels));
  std::vector<std::complex<double>> in(static_cast<size_t>(n_fft)), spec(static_cast<size_t>(n_fft));
  std::vector<double> power(static_cast<size_t>(n_bins)), logs(out.data.size());
  double max_log = -HUGE_VAL;
  for (int64_t t = 0; t < n_frames; ++t) {
    const int64_t start = t * hop - half;
    for (int32_t i = 0; i < n_fft; ++i) in[size_t(i)] = sample(start + i) * window_[size_t(i)];
    fft_.forward(in.data(), spec.data());
    for (int32_t k = 0; k < n_bins; ++k) power[size_t(k)] = std::norm(spec[size_t(k)]);
    for (int32_t m = 0; m < p_.n_mels; ++m) {
      const double* f = filters_.data() + size_t(m) * size_t(n_bins);
      double s = 0.0;
      for (int32_t k = first_[size_t(m)]; k < last_[size_t(m)]; ++k) s += f[k] * power[size_t(k)];
      const double v = std::log10(std::max(s, 1e-10));
      logs[size_t(t) * size_t(p_.n_mels) + size_t(m)] = v;
      max_log = std::max(max_log, v);
    }
  }
  for (size_t i = 0; i < logs.size(); ++i) out.data[i] = float((std::max(logs[i], max_log - 8.0) + 4.0) / 4.0);
  return out;
}

}  // namespace brisk::media
