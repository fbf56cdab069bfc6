#include "server/audio_request.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "server/errors.h"

namespace brisk::server {

bool AudioForm::begin_part(const std::string& name, const std::string& filename) {
  in_file_ = false;
  if (fields_.size() + (has_file_ ? 1 : 0) >= kMaxParts) {
    error_ = str_cat("the form has more than ", kMaxParts, " parts");
    return false;
  }
  if (name == "file") {
    if (has_file_) {
      error_ = "the form has more than one 'file' part";
      return false;
    }
    has_file_ = true;
    in_file_ = true;
    file_name_ = filename.empty() ? "upload" : filename.substr(0, 256);
    return true;
  }
  if (name.empty() || name.size() > 256) {
    error_ = "a form part has no name (or one longer than 256 bytes)";
    return false;
  }
  fields_.emplace_back(name, std::string());
  return true;
}

bool AudioForm::data(const char* p, size_t n) {
  if (in_file_) {
    if (file_.size() + n > max_file_) {
      too_large_ = true;
      return false;
    }
    file_.insert(file_.end(), reinterpret_cast<const uint8_t*>(p), reinterpret_cast<const uint8_t*>(p) + n);
    return true;
  }
  if (fields_.empty()) return true;  // bytes before any part (the transport skips the preamble)
  std::string& v = fields_.back().second;
  if (v.size() + n > kMaxField) {
    error_ = str_cat("form field '", fields_.back().first, "' is longer than ", kMaxField, " bytes");
    return false;
  }
  v.append(p, n);
  return true;
}

void AudioForm::fail_upload() const {
  if (too_large_) throw HttpError(413, str_cat("the audio file exceeds the upload limit of ", max_file_, " bytes"), "file");
  bad_request("file", error_.empty() ? "malformed multipart/form-data body" : error_);
}

namespace {

std::string trimmed(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

}  // namespace

AudioRequest audio_request_parse(const AudioForm& form) {
  AudioRequest r;
  bool granularities = false;
  std::vector<std::string> grains;
  for (const auto& [name, raw] : form.fields()) {
    const std::string v = trimmed(raw);
    if (name == "model") {
      r.model = v;
    } else if (name == "language") {
      r.language = v;
    } else if (name == "prompt") {
      r.prompt = raw;
    } else if (name == "response_format") {
      if (!transcript_format_from_name(v, &r.format))
        bad_request("response_format", str_cat("response_format '", v.substr(0, 64),
                                               "' is not one of json, text, srt, verbose_json, vtt"));
    } else if (name == "temperature") {
      char* end = nullptr;
      errno = 0;
      const double t = v.empty() ? NAN : std::strtod(v.c_str(), &end);
      if (v.empty() || errno != 0 || *end != '\0' || !std::isfinite(t) || t < 0.0 || t > 1.0)
        bad_request("temperature", str_cat("temperature must be a number in [0, 1], got '", v.substr(0, 64), "'"));
      r.temperature = float(t);
    } else if (name == "stream") {
      if (v == "true" || v == "1") r.stream = true;
      else if (v == "false" || v == "0" || v.empty()) r.stream = false;
      else bad_request("stream", str_cat("stream must be true or false, got '", v.substr(0, 64), "'"));
    } else if (name == "timestamp_granularities[]" || name == "timestamp_granularities") {
      if (v != "word" && v != "segment")
        bad_request("timestamp_granularities", str_cat("timestamp granularity '", v.substr(0, 64), "' is not word or segment"));
      granularities = true;
      grains.push_back(v);
    }
  }
  if (!form.has_file()) bad_request("file", "the form has no 'file' part (the audio to transcribe)");
  if (form.file().empty()) bad_request("file", str_cat("the audio file '", form.file_name(), "' is empty"));
  if (r.model.empty()) bad_request("model", "the form has no 'model' field");
  if (granularities) {
    if (r.format != TranscriptFormat::verbose_json)
      bad_request("timestamp_granularities", "timestamp_granularities needs response_format verbose_json");
    r.words = std::find(grains.begin(), grains.end(), "word") != grains.end();
    r.segments = std::find(grains.begin(), grains.end(), "segment") != grains.end();
  }
  if (r.stream && r.format != TranscriptFormat::json && r.format != TranscriptFormat::text)
    bad_request("stream", "streaming sends text events: use response_format json or text");
  return r;
}

}  // namespace brisk::server
