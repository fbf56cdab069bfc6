// Audio in and the speech front end: the FFT against the direct DFT, the log-mel spectrogram
// against transformers' WhisperFeatureExtractor (shared fixture), decoding of WAV (8/16/24/32-bit
// integer, float, any channel count), FLAC, OGG Vorbis / Opus and MP3 written here with
// libsndfile, resampling, and the errors for input that is not (whole) audio.
#include <gtest/gtest.h>
#include <sndfile.h>

#include <cmath>
#include <complex>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "media/audio.h"
#include "media/fft.h"
#include "media/log_mel.h"
#include "model_fixtures.h"
#include "temp_files.h"

namespace brisk::media {
namespace {

using cd = std::complex<double>;

TEST(Fft, MatchesTheDirectDftForManyLengths) {
  std::mt19937 rng(1);
  std::normal_distribution<double> d;
  for (int32_t n : {1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 25, 49, 64, 97, 143, 400, 512, 1000}) {
    std::vector<cd> x(static_cast<size_t>(n)), fast(static_cast<size_t>(n)), slow(static_cast<size_t>(n));
    for (cd& v : x) v = cd(d(rng), d(rng));
    FftPlan(n).forward(x.data(), fast.data());
    dft_reference(x.data(), slow.data(), n);
    double worst = 0.0;
    for (int32_t k = 0; k < n; ++k) worst = std::max(worst, std::abs(fast[size_t(k)] - slow[size_t(k)]));
    EXPECT_LT(worst, 1e-9 * n) << "n = " << n;
  }
  EXPECT_THROW(FftPlan(0), Error);
}

std::vector<float> read_wav16(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> s;
  for (size_t i = 44; i + 1 < b.size(); i += 2) s.push_back(float(int16_t(uint8_t(b[i]) | uint8_t(b[i + 1]) << 8)) / 32768.0f);
  return s;
}

TEST(LogMel, MatchesTransformersOnTheWhisperFixture) {
  REQUIRE_MODEL("wave2/whisper_tiny_random");
  const std::string dir = model_dir("wave2/whisper_tiny_random");
  std::ifstream rf(dir + "/ref.json");
  const nlohmann::json ref = nlohmann::json::parse(rf);
  const Audio a = audio_decode_file(dir + "/input.wav", {});
  EXPECT_EQ(a.sample_rate, 16000);
  EXPECT_EQ(a.source_channels, 1);
  EXPECT_EQ(a.samples, read_wav16(dir + "/input.wav"));  // samples / 32768, exactly
  const LogMelExtractor ex({.n_mels = 128});
  const LogMel m = ex.compute(a.samples.data(), int64_t(a.samples.size()));
  EXPECT_EQ(m.n_frames, ref["mel_shape"][2].get<int>());
  EXPECT_EQ(m.n_mels, ref["mel_shape"][1].get<int>());
  const auto& frames = ref["mel_first_frames"];  // [128][8]
  double worst = 0.0;
  for (int mel = 0; mel < 128; ++mel)
    for (int t = 0; t < 8; ++t)
      worst = std::max(worst, std::fabs(double(m.frame(t)[mel]) - frames[mel][t].get<double>()));
  EXPECT_LT(worst, 1e-4);
}

TEST(LogMel, SlaneyFiltersAndShapes) {
  for (int32_t n_mels : {80, 128}) {
    const LogMelExtractor ex({.n_mels = n_mels});
    const auto& f = ex.filters();
    ASSERT_EQ(f.size(), size_t(n_mels) * 201);
    for (int32_t m = n_mels / 2; m < n_mels; ++m) {
      // Each triangle has unit area in Hz (Slaney normalisation): sum over bins * 40 Hz ~ 1 where
      // the triangle spans several 40 Hz bins (the low, narrow ones fall between bins).
      double area = 0.0;
      for (int k = 0; k < 201; ++k) area += f[size_t(m) * 201 + size_t(k)] * 40.0;
      EXPECT_NEAR(area, 1.0, 0.1) << "mel " << m;
    }
    // 30 s of silence: every value at the clamp, 3000 frames; longer audio keeps its length.
    const std::vector<float> silence(16000, 0.0f);
    const LogMel s = ex.compute(silence.data(), int64_t(silence.size()));
    EXPECT_EQ(s.n_frames, 3000);
    EXPECT_FLOAT_EQ(s.data.front(), s.data.back());
    const std::vector<float> long_audio(16000 * 31 + 77, 0.1f);
    EXPECT_EQ(ex.compute(long_audio.data(), int64_t(long_audio.size())).n_frames, (16000 * 31 + 77) / 160);
  }
}

// A test signal: a sine of `hz` at `rate`, amplitude 0.5, per channel phase-shifted.
std::vector<float> sine(int32_t rate, int32_t channels, double seconds, double hz) {
  const int64_t n = int64_t(seconds * rate);
  std::vector<float> v(static_cast<size_t>(n * channels));
  for (int64_t i = 0; i < n; ++i)
    for (int32_t c = 0; c < channels; ++c) v[size_t(i * channels + c)] = float(0.5 * std::sin(2 * M_PI * hz * double(i) / rate + c));
  return v;
}

std::vector<uint8_t> write_sound(const std::vector<float>& interleaved, int32_t rate, int32_t channels, int format) {
  const std::string path = (testing::process_temp_dir() / ("snd_" + std::to_string(format) + ".bin")).string();
  SF_INFO info{};
  info.samplerate = rate;
  info.channels = channels;
  info.format = format;
  SNDFILE* f = sf_open(path.c_str(), SFM_WRITE, &info);
  if (!f) return {};
  sf_writef_float(f, interleaved.data(), sf_count_t(interleaved.size() / size_t(channels)));
  sf_close(f);
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

double rms_diff(const std::vector<float>& a, const std::vector<float>& b, size_t skip) {
  double s = 0.0;
  size_t n = 0;
  for (size_t i = skip; i + skip < std::min(a.size(), b.size()); ++i, ++n) s += (a[i] - b[i]) * (a[i] - b[i]);
  return n ? std::sqrt(s / double(n)) : 1e9;
}

TEST(AudioDecode, WavOfEverySampleFormatAndChannelCount) {
  const int32_t rate = 16000;
  for (int32_t channels : {1, 2, 6}) {
    const std::vector<float> x = sine(rate, channels, 0.5, 440.0);
    std::vector<float> mono(x.size() / size_t(channels));
    for (size_t i = 0; i < mono.size(); ++i) {
      double s = 0.0;
      for (int32_t c = 0; c < channels; ++c) s += x[i * size_t(channels) + size_t(c)];
      mono[i] = float(s / channels);
    }
    for (auto [sub, tol] : {std::pair{SF_FORMAT_PCM_U8, 1.0 / 64}, {SF_FORMAT_PCM_16, 1.0 / 16384}, {SF_FORMAT_PCM_24, 1e-6},
                            {SF_FORMAT_PCM_32, 1e-7}, {SF_FORMAT_FLOAT, 1e-7}, {SF_FORMAT_DOUBLE, 1e-7}}) {
      const std::vector<uint8_t> bytes = write_sound(x, rate, channels, SF_FORMAT_WAV | sub);
      ASSERT_FALSE(bytes.empty());
      const Audio a = audio_decode(bytes.data(), bytes.size(), "test.wav", {});
      EXPECT_EQ(a.source_channels, channels);
      EXPECT_EQ(a.sample_rate, rate);
      ASSERT_EQ(a.samples.size(), mono.size());
      double worst = 0.0;
      for (size_t i = 0; i < mono.size(); ++i) worst = std::max(worst, std::fabs(double(a.samples[i]) - mono[i]));
      EXPECT_LT(worst, tol) << "channels " << channels << " subtype " << std::hex << sub;
    }
  }
}

TEST(AudioDecode, CompressedFormatsAndResampling) {
  const int32_t rate = 48000;
  const std::vector<float> x = sine(rate, 2, 1.0, 440.0);
  std::vector<float> mono(x.size() / 2);
  for (size_t i = 0; i < mono.size(); ++i) mono[i] = 0.5f * (x[2 * i] + x[2 * i + 1]);
  // The same signal at 16 kHz (what the resampler should give).
  const std::vector<float> at16 = sine(16000, 2, 1.0, 440.0);
  std::vector<float> mono16(at16.size() / 2);
  for (size_t i = 0; i < mono16.size(); ++i) mono16[i] = 0.5f * (at16[2 * i] + at16[2 * i + 1]);
  struct Case {
    const char* name;
    int format;
    double tol;  // RMS difference from the 16 kHz signal (lossy codecs, codec delay)
  };
  for (const Case& c : {Case{"flac", SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 1e-3}, Case{"ogg", SF_FORMAT_OGG | SF_FORMAT_VORBIS, 0.05},
                        Case{"opus", SF_FORMAT_OGG | SF_FORMAT_OPUS, 0.25}, Case{"mp3", SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III, 0.25}}) {
    const std::vector<uint8_t> bytes = write_sound(x, rate, 2, c.format);
    if (bytes.empty()) {
      ADD_FAILURE() << "libsndfile cannot write " << c.name << " here";
      continue;
    }
    const Audio a = audio_decode(bytes.data(), bytes.size(), c.name, {.sample_rate = 16000});
    EXPECT_EQ(a.source_rate, 48000) << c.name;
    EXPECT_EQ(a.source_channels, 2) << c.name;
    EXPECT_NEAR(double(a.samples.size()), 16000.0, 16000.0 * 0.06) << c.name;
    if (std::string(c.name) == "flac") {
      EXPECT_LT(rms_diff(a.samples, mono16, 200), c.tol);
    }
    // Lossy codecs shift the signal by their delay: the level must survive.
    double rms = 0.0;
    for (size_t i = 1000; i + 1000 < a.samples.size(); ++i) rms += double(a.samples[i]) * a.samples[i];
    rms = std::sqrt(rms / double(a.samples.size() - 2000));
    double want = 0.0;
    for (float v : mono16) want += double(v) * v;
    want = std::sqrt(want / double(mono16.size()));
    EXPECT_NEAR(rms, want, want * c.tol + 0.02) << c.name;
  }
  // Resampling alone: 44.1 kHz -> 16 kHz keeps a 1 kHz tone.
  const std::vector<float> s441 = sine(44100, 1, 1.0, 1000.0);
  const std::vector<float> s16 = audio_resample(s441, 44100, 16000);
  EXPECT_NEAR(double(s16.size()), 16000.0, 2.0);
  EXPECT_LT(rms_diff(s16, sine(16000, 1, 1.0, 1000.0), 400), 1e-3);
  EXPECT_EQ(audio_resample(s441, 44100, 44100), s441);
}

TEST(AudioDecode, BadInputIsAClearError) {
  auto expect_error = [](const std::vector<uint8_t>& b, const std::string& needle) {
    try {
      audio_decode(b.data(), b.size(), "upload.wav", {});
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("upload.wav"), std::string::npos) << e.what();
    }
  };
  expect_error({}, "empty audio file");
  const std::string text = "this is plainly not audio, just some text in a file\n";
  expect_error(std::vector<uint8_t>(text.begin(), text.end()), "not a readable audio file");
  std::vector<uint8_t> wav = write_sound(sine(16000, 1, 0.25, 300.0), 16000, 1, SF_FORMAT_WAV | SF_FORMAT_PCM_16);
  ASSERT_GT(wav.size(), 1000u);
  std::vector<uint8_t> cut(wav.begin(), wav.begin() + int64_t(wav.size() / 2));
  expect_error(cut, "truncated WAV");
  std::vector<uint8_t> header_only(wav.begin(), wav.begin() + 20);
  expect_error(header_only, "truncated WAV");
  // A WAV streamed with an unknown length (0xFFFFFFFF) is read to its end.
  std::vector<uint8_t> streamed = wav;
  for (size_t p = 12; p + 8 <= streamed.size();) {
    const uint32_t size = streamed[p + 4] | streamed[p + 5] << 8 | streamed[p + 6] << 16 | uint32_t(streamed[p + 7]) << 24;
    if (std::equal(streamed.begin() + int64_t(p), streamed.begin() + int64_t(p) + 4, "data")) {
      for (int i = 0; i < 4; ++i) streamed[p + 4 + size_t(i)] = 0xFF;
      break;
    }
    p += 8 + size;
  }
  EXPECT_EQ(audio_decode(streamed.data(), streamed.size(), "s.wav", {}).samples.size(), 4000u);
  // Longer than the limit.
  try {
    audio_decode(wav.data(), wav.size(), "long.wav", {.max_seconds = 0.1});
    ADD_FAILURE() << "no error for the length limit";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("longer than the limit"), std::string::npos) << e.what();
  }
  EXPECT_THROW(audio_decode_file("/nonexistent/audio.wav", {}), Error);
}

}  // namespace
}  // namespace brisk::media
