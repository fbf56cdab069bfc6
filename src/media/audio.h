// Audio in: decode a file or an in-memory upload (WAV 8/16/24/32-bit integer and 32/64-bit
// float, FLAC, MP3, OGG Vorbis / Opus, and the other containers libsndfile reads) to float32
// samples, mix every channel to mono (the mean of the channels), and resample to the rate a
// model wants with libsoxr (its high-quality setting), chunk by chunk, so that a long stereo
// file is never held at its own rate. Integer samples are scaled to [-1, 1) by 2^(bits-1)
// (16-bit: x / 32768), as transformers' feature extractor expects them. Bytes that are not
// audio, an empty input, a WAV whose data chunk is cut short and audio longer than the limit
// are brisk::Error naming the source.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace brisk::media {

struct AudioLoadOptions {
  int32_t sample_rate = 0;       // output rate in Hz; 0: the file's own
  double max_seconds = 4 * 3600.0;  // longer audio is an error
};

struct Audio {
  std::vector<float> samples{};  // [n] mono, at sample_rate
  int32_t sample_rate = 0;     // Hz
  int32_t source_rate = 0;     // the file's rate
  int32_t source_channels = 0; // the file's channels before mixing
  std::string format{};        // e.g. "WAV / PCM 16"
  double seconds() const { return sample_rate > 0 ? double(samples.size()) / sample_rate : 0.0; }
};

// Decodes `bytes` (a whole file in memory); `name` is used in error messages.
Audio audio_decode(const uint8_t* bytes, size_t n, const std::string& name, const AudioLoadOptions& options);
// Reads and decodes a file.
Audio audio_decode_file(const std::string& path, const AudioLoadOptions& options);
// Resamples mono samples from rate_in to rate_out (libsoxr, high quality); the input unchanged
// when the rates are equal.
std::vector<float> audio_resample(const std::vector<float>& in, int32_t rate_in, int32_t rate_out);

}  // namespace brisk::media
