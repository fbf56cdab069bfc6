#include "media/audio.h"

#include <sndfile.h>
#include <soxr.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>

#include "core/error.h"

namespace brisk::media {

namespace {

// libsndfile reads the upload through these callbacks (no temporary file).
struct MemoryReader {
  const uint8_t* data = nullptr;
  sf_count_t size = 0;
  sf_count_t pos = 0;
};

sf_count_t mem_length(void* user) { return static_cast<MemoryReader*>(user)->size; }

sf_count_t mem_seek(sf_count_t offset, int whence, void* user) {
  auto* m = static_cast<MemoryReader*>(user);
  sf_count_t base = whence == SEEK_CUR ? m->pos : whence == SEEK_END ? m->size : 0;
  const sf_count_t p = base + offset;
  if (p < 0 || p > m->size) return -1;
  m->pos = p;
  return p;
}

sf_count_t mem_read(void* dst, sf_count_t count, void* user) {
  auto* m = static_cast<MemoryReader*>(user);
  const sf_count_t n = std::max<sf_count_t>(0, std::min(count, m->size - m->pos));
  if (n > 0) std::memcpy(dst, m->data + m->pos, size_t(n));
  m->pos += n;
  return n;
}

sf_count_t mem_write(const void*, sf_count_t, void*) { return 0; }
sf_count_t mem_tell(void* user) { return static_cast<MemoryReader*>(user)->pos; }

uint32_t le32(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }

// A RIFF/WAVE file whose data chunk declares more bytes than follow it was cut short (a
// failed upload); libsndfile would quietly decode the part that is there. Streamed WAVs that
// leave the size at 0 or 0xFFFFFFFF are accepted.
void check_wav_complete(const uint8_t* b, size_t n, const std::string& name) {
  if (n < 12 || std::memcmp(b, "RIFF", 4) != 0 || std::memcmp(b + 8, "WAVE", 4) != 0) return;
  size_t p = 12;
  while (p + 8 <= n) {
    const uint32_t size = le32(b + p + 4);
    if (std::memcmp(b + p, "data", 4) == 0) {
      const size_t have = n - (p + 8);
      BRISK_CHECK(size == 0 || size == 0xFFFFFFFFu || size_t(size) <= have, name,
                  ": truncated WAV file: its data chunk declares ", size, " bytes, the file holds ", have);
      return;
    }
    p += 8 + size_t(size) + (size & 1);
  }
  fail(name, ": truncated WAV file: no data chunk");
}

std::string format_name(int format) {
  SF_FORMAT_INFO major{}, sub{};
  major.format = format & SF_FORMAT_TYPEMASK;
  sub.format = format & SF_FORMAT_SUBMASK;
  std::string s = sf_command(nullptr, SFC_GET_FORMAT_INFO, &major, sizeof major) == 0 && major.name ? major.name : "?";
  if (sf_command(nullptr, SFC_GET_FORMAT_INFO, &sub, sizeof sub) == 0 && sub.name) s += std::string(" / ") + sub.name;
  return s;
}

struct SndfileCloser {
  void operator()(SNDFILE* f) const { sf_close(f); }
};
struct SoxrDeleter {
  void operator()(soxr* s) const { soxr_delete(s); }
};

// Streams mono samples through the resampler into `out`.
class Resampler {
 public:
  Resampler(int32_t rate_in, int32_t rate_out, std::vector<float>* out, const std::string& name)
      : out_(out), name_(name), ratio_(double(rate_out) / rate_in) {
    if (rate_in == rate_out) return;
    soxr_error_t err = nullptr;
    const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    const soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
    soxr_.reset(soxr_create(double(rate_in), double(rate_out), 1, &err, &io, &q, nullptr));
    BRISK_CHECK(soxr_ && !err, name_, ": cannot resample ", rate_in, " Hz to ", rate_out, " Hz: ", err ? err : "soxr_create");
  }

  // in == nullptr flushes.
  void push(const float* in, size_t n) {
    if (!soxr_) {
      if (in) out_->insert(out_->end(), in, in + n);
      return;
    }
    size_t consumed = 0;
    for (;;) {
      const size_t room = size_t(double(n - consumed) * ratio_) + 1024;
      const size_t at = out_->size();
      out_->resize(at + room);
      size_t idone = 0, odone = 0;
      const soxr_error_t err =
          soxr_process(soxr_.get(), in ? in + consumed : nullptr, in ? n - consumed : 0, &idone, out_->data() + at, room, &odone);
      BRISK_CHECK(!err, name_, ": resampling failed: ", err);
      out_->resize(at + odone);
      consumed += idone;
      if (in ? consumed >= n && odone < room : odone == 0) return;
    }
  }

 private:
  std::vector<float>* out_;
  std::string name_;
  double ratio_;
  std::unique_ptr<soxr, SoxrDeleter> soxr_;
};

}  // namespace

Audio audio_decode(const uint8_t* bytes, size_t n, const std::string& name, const AudioLoadOptions& o) {
  BRISK_CHECK(n > 0, name, ": empty audio file");
  BRISK_CHECK(o.sample_rate >= 0 && o.sample_rate <= 1000000, "audio: output rate ", o.sample_rate, " out of range");
  check_wav_complete(bytes, n, name);
  MemoryReader reader{.data = bytes, .size = sf_count_t(n), .pos = 0};
  SF_VIRTUAL_IO io{.get_filelen = mem_length, .seek = mem_seek, .read = mem_read, .write = mem_write, .tell = mem_tell};
  SF_INFO info{};
  std::unique_ptr<SNDFILE, SndfileCloser> file(sf_open_virtual(&io, SFM_READ, &info, &reader));
  BRISK_CHECK(file != nullptr, name, ": not a readable audio file (", sf_strerror(nullptr),
              "; WAV, FLAC, MP3, OGG Vorbis / Opus are read)");
  BRISK_CHECK(info.channels >= 1 && info.channels <= 1024 && info.samplerate >= 1 && info.samplerate <= 1000000, name,
              ": unsupported audio layout (", info.channels, " channels at ", info.samplerate, " Hz)");
  // Integers scale by 2^(bits-1) (libsndfile's default normalisation); float data is kept as
  // it is, with no clipping.
  sf_command(file.get(), SFC_SET_NORM_FLOAT, nullptr, SF_TRUE);

  Audio a;
  a.source_rate = info.samplerate;
  a.source_channels = info.channels;
  a.sample_rate = o.sample_rate > 0 ? o.sample_rate : info.samplerate;
  a.format = format_name(info.format);
  const double max_frames = o.max_seconds * info.samplerate;
  Resampler rs(info.samplerate, a.sample_rate, &a.samples, name);
  constexpr sf_count_t kChunk = 16384;  // frames per read
  std::vector<float> inter(static_cast<size_t>(kChunk) * static_cast<size_t>(info.channels));
  std::vector<float> mono(static_cast<size_t>(kChunk));
  double total = 0.0;
  for (;;) {
    const sf_count_t got = sf_readf_float(file.get(), inter.data(), kChunk);
    if (got <= 0) break;
    total += double(got);
    BRISK_CHECK(total <= max_frames, name, ": audio longer than the limit of ", o.max_seconds, " s");
    const float inv = 1.0f / float(info.channels);
    for (sf_count_t i = 0; i < got; ++i) {
      const float* f = inter.data() + size_t(i) * size_t(info.channels);
      float s = 0.0f;
      for (int c = 0; c < info.channels; ++c) s += f[c];
      mono[size_t(i)] = info.channels == 1 ? s : s * inv;
    }
    rs.push(mono.data(), size_t(got));
  }
  BRISK_CHECK(sf_error(file.get()) == SF_ERR_NO_ERROR, name, ": decoding failed: ", sf_strerror(file.get()));
  BRISK_CHECK(total > 0, name, ": the audio file holds no samples");
  rs.push(nullptr, 0);
  for (float v : a.samples) BRISK_CHECK(std::isfinite(v), name, ": audio holds a non-finite sample");
  return a;
}

Audio audio_decode_file(const std::string& path, const AudioLoadOptions& o) {
  std::ifstream in(path, std::ios::binary);
  BRISK_CHECK(in.good(), "cannot open audio file ", path);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return audio_decode(bytes.data(), bytes.size(), path, o);
}

std::vector<float> audio_resample(const std::vector<float>& in, int32_t rate_in, int32_t rate_out) {
  BRISK_CHECK(rate_in > 0 && rate_out > 0, "audio_resample: rates must be positive");
  std::vector<float> out;
  Resampler rs(rate_in, rate_out, &out, "audio_resample");
  rs.push(in.data(), in.size());
  rs.push(nullptr, 0);
  return out;
}

}  // namespace brisk::media
