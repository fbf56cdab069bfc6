// The multipart form of OpenAI's audio routes (POST /v1/audio/transcriptions and
// /v1/audio/translations), gathered part by part as the transport streams it (AudioForm: the
// `file` part into a buffer bounded by the upload limit, each text field bounded too) and
// validated into an AudioRequest (fields: model, language, prompt, response_format json | text |
// srt | vtt | verbose_json, temperature in [0, 1], timestamp_granularities[] word | segment,
// stream). Errors are HttpError 400 naming the field, 413 for an upload over the limit.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/transcript_format.h"

namespace brisk::server {

class AudioForm {
 public:
  explicit AudioForm(size_t max_file_bytes) : max_file_(max_file_bytes) {}
  // A part begins (its Content-Disposition name and filename); false stops the upload.
  bool begin_part(const std::string& name, const std::string& filename);
  // Bytes of the current part; false stops the upload (over a limit).
  bool data(const char* p, size_t n);
  // After the transport gave up (a false from above, or a malformed body): the HttpError to
  // answer with.
  [[noreturn]] void fail_upload() const;

  bool has_file() const { return has_file_; }
  const std::vector<uint8_t>& file() const { return file_; }
  const std::string& file_name() const { return file_name_; }
  const std::vector<std::pair<std::string, std::string>>& fields() const { return fields_; }

  static constexpr size_t kMaxField = 64 * 1024;
  static constexpr size_t kMaxParts = 64;

 private:
  size_t max_file_;
  bool has_file_ = false, in_file_ = false, too_large_ = false;
  std::string error_;
  std::vector<uint8_t> file_;
  std::string file_name_;
  std::vector<std::pair<std::string, std::string>> fields_;  // text fields in order (repeats kept)
};

struct AudioRequest {
  std::string model{};
  std::string language{};
  std::string prompt{};
  TranscriptFormat format = TranscriptFormat::json;
  float temperature = 0.0f;     // 0: greedy with fallback to higher temperatures
  bool stream = false;          // server-sent transcript.text.delta / .done events
  bool words = false;           // verbose_json: word timestamps
  bool segments = true;         // verbose_json: the segment list
};

AudioRequest audio_request_parse(const AudioForm& form);

}  // namespace brisk::server
