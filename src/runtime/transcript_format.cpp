#include "runtime/transcript_format.h"

#include <cmath>
#include <cstdio>

namespace brisk {

namespace {

// The service reports its numbers as float32 values.
double as_float32(double v) { return double(float(v)); }

std::string cue_text(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  std::string t = s.substr(a, b - a);
  for (size_t p = t.find("-->"); p != std::string::npos; p = t.find("-->", p + 2)) t.replace(p, 3, "->");
  return t;
}

}  // namespace

bool transcript_format_from_name(const std::string& name, TranscriptFormat* out) {
  if (name == "json") *out = TranscriptFormat::json;
  else if (name == "text") *out = TranscriptFormat::text;
  else if (name == "srt") *out = TranscriptFormat::srt;
  else if (name == "vtt") *out = TranscriptFormat::vtt;
  else if (name == "verbose_json") *out = TranscriptFormat::verbose_json;
  else return false;
  return true;
}

std::string transcript_timestamp(double seconds, char marker) {
  int64_t ms = int64_t(std::llround(std::max(0.0, seconds) * 1000.0));
  const int64_t h = ms / 3600000;
  ms -= h * 3600000;
  const int64_t m = ms / 60000;
  ms -= m * 60000;
  const int64_t s = ms / 1000;
  ms -= s * 1000;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld%c%03lld", static_cast<long long>(h), static_cast<long long>(m),
                static_cast<long long>(s), marker, static_cast<long long>(ms));
  return buf;
}

nlohmann::ordered_json transcript_verbose_json(const Transcript& t, const TranscriptFormatOptions& o) {
  nlohmann::ordered_json j;
  j["task"] = t.task;
  j["language"] = speech_language_name(t.language);
  j["duration"] = as_float32(t.duration);
  j["text"] = t.text;
  if (o.segments) {
    j["segments"] = nlohmann::ordered_json::array();
    for (const TranscriptSegment& s : t.segments) {
      nlohmann::ordered_json js;
      js["id"] = s.id;
      js["seek"] = s.seek;
      js["start"] = as_float32(s.start);
      js["end"] = as_float32(s.end);
      js["text"] = s.text;
      js["tokens"] = s.tokens;
      js["temperature"] = as_float32(s.temperature);
      js["avg_logprob"] = as_float32(s.avg_logprob);
      js["compression_ratio"] = as_float32(s.compression_ratio);
      js["no_speech_prob"] = as_float32(s.no_speech_prob);
      j["segments"].push_back(std::move(js));
    }
  }
  if (o.words) {
    j["words"] = nlohmann::ordered_json::array();
    for (const TranscriptSegment& s : t.segments)
      for (const TranscriptWord& w : s.words)
        j["words"].push_back({{"word", cue_text(w.word)}, {"start", as_float32(w.start)}, {"end", as_float32(w.end)}});
  }
  j["usage"] = {{"type", "duration"}, {"seconds", int64_t(std::ceil(t.duration))}};
  return j;
}

std::string transcript_render(const Transcript& t, TranscriptFormat f, const TranscriptFormatOptions& o) {
  switch (f) {
    case TranscriptFormat::json: {
      nlohmann::ordered_json j;
      j["text"] = t.text;
      j["usage"] = {{"type", "duration"}, {"seconds", int64_t(std::ceil(t.duration))}};
      return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    }
    case TranscriptFormat::text:
      return t.text + "\n";
    case TranscriptFormat::srt: {
      std::string out;
      int n = 1;
      for (const TranscriptSegment& s : t.segments)
        out += std::to_string(n++) + "\n" + transcript_timestamp(s.start, ',') + " --> " +
               transcript_timestamp(s.end, ',') + "\n" + cue_text(s.text) + "\n\n";
      return out;
    }
    case TranscriptFormat::vtt: {
      std::string out = "WEBVTT\n\n";
      for (const TranscriptSegment& s : t.segments)
        out += transcript_timestamp(s.start, '.') + " --> " + transcript_timestamp(s.end, '.') + "\n" +
               cue_text(s.text) + "\n\n";
      return out;
    }
    case TranscriptFormat::verbose_json:
      return transcript_verbose_json(t, o).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }
  return "";
}

const char* transcript_content_type(TranscriptFormat f) {
  switch (f) {
    case TranscriptFormat::json:
    case TranscriptFormat::verbose_json: return "application/json";
    case TranscriptFormat::srt: return "text/plain; charset=utf-8";
    case TranscriptFormat::vtt: return "text/plain; charset=utf-8";
    case TranscriptFormat::text: return "text/plain; charset=utf-8";
  }
  return "text/plain";
}

}  // namespace brisk
