// libFuzzer target: audio uploads. The input is an uploaded file: decoded to mono and resampled to
// 16 kHz (media/audio.h: libsndfile for WAV / FLAC / MP3 / OGG, the truncated-WAV check, libsoxr),
// and when that succeeds with at most 2 s of audio, its log-mel spectrogram (the values must be
// finite). The same bytes also drive the audio routes' form handling: the first byte picks a
// chunk size, the rest is read as lines "name=value" fed part by part and chunk by chunk into
// AudioForm (bounded to 4 KiB of file) and validated by audio_request_parse. brisk::Error and
// HttpError are the only acceptable failures.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "media/audio.h"
#include "media/log_mel.h"
#include "server/audio_request.h"
#include "server/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace brisk;
  if (size > (1u << 20)) return 0;
  try {
    const media::Audio a = media::audio_decode(data, size, "fuzz.wav", {.sample_rate = 16000, .max_seconds = 60.0});
    if (a.samples.size() <= 32000) {
      static const media::LogMelExtractor mel({.n_mels = 80});
      const media::LogMel m = mel.compute(a.samples.data(), int64_t(a.samples.size()));
      for (float v : m.data)
        if (!std::isfinite(v)) std::abort();
    }
  } catch (const Error&) {
  }
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 17;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  server::AudioForm form(4096);
  try {
    bool ok = true;
    size_t start = 0;
    while (ok && start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      const std::string line = text.substr(start, end - start);
      const size_t eq = line.find('=');
      const std::string name = line.substr(0, eq), value = eq == std::string::npos ? "" : line.substr(eq + 1);
      ok = form.begin_part(name, name == "file" ? "f.wav" : "");
      for (size_t p = 0; ok && p < value.size(); p += chunk) ok = form.data(value.data() + p, std::min(chunk, value.size() - p));
      start = end + 1;
    }
    if (!ok) form.fail_upload();
    const server::AudioRequest r = server::audio_request_parse(form);
    volatile size_t sink = r.model.size() + r.language.size() + r.prompt.size() + size_t(r.format);
    (void)sink;
  } catch (const server::HttpError&) {
  } catch (const Error&) {
  }
  return 0;
}
