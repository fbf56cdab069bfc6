// The log-mel spectrogram of a speech model's front end, computed as transformers'
// WhisperFeatureExtractor does it:
//   1. short audio (at most n_samples) is zero-padded to n_samples (30 s); longer audio is used
//      whole (long-form: its windows are cut from one spectrogram and padded with 0.0 later);
//   2. STFT with a periodic Hann window of n_fft, hop `hop`, frames centred (the signal is
//      reflect-padded by n_fft / 2 on both sides); the last frame is dropped, so n / hop frames;
//   3. power |X[k]|^2 of the n_fft / 2 + 1 bins, through Slaney mel filters (Slaney mel scale,
//      triangles between n_mels + 2 points spaced evenly in mel from 0 Hz to sample_rate / 2,
//      each scaled by 2 / (its width in Hz));
//   4. log10(max(mel, 1e-10)), clamped below at (largest value - 8), then (x + 4) / 4.
// Everything runs in double precision (FFT of media/fft.h); the result is float32
// [n_frames, n_mels] (time-major: one row per frame, the layout the encoder's first
// convolution reads).
#pragma once
#include <cstdint>
#include <vector>

#include "media/fft.h"

namespace brisk::media {

struct LogMelParams {
  int32_t n_mels = 80;          // feature_size / num_mel_bins
  int32_t sample_rate = 16000;
  int32_t n_fft = 400;
  int32_t hop = 160;            // hop_length
  int32_t n_samples = 480000;   // chunk_length * sample_rate: shorter audio is padded to this
};

struct LogMel {
  int32_t n_frames = 0;
  int32_t n_mels = 0;
  std::vector<float> data{};    // [n_frames, n_mels]
  const float* frame(int64_t t) const { return data.data() + t * n_mels; }
};

class LogMelExtractor {
 public:
  explicit LogMelExtractor(const LogMelParams& p);
  const LogMelParams& params() const { return p_; }
  // The filters: [n_mels, n_fft / 2 + 1] (row-major, float64 as transformers keeps them).
  const std::vector<double>& filters() const { return filters_; }
  LogMel compute(const float* samples, int64_t n) const;

 private:
  LogMelParams p_;
  FftPlan fft_;
  std::vector<double> window_;   // [n_fft] periodic Hann
  std::vector<double> filters_;  // [n_mels, n_bins]
  std::vector<int32_t> first_, last_;  // per mel: bins [first, last) where its filter is nonzero
};

}  // namespace brisk::media
