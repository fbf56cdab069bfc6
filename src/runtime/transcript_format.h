// A Transcript in the response formats of OpenAI's audio API (the formats openai-whisper's
// writers produce):
//   json          {"text": ..., "usage": {"type": "duration", "seconds": ceil(duration)}}
//   text          the text and a newline
//   srt           "N\nHH:MM:SS,mmm --> HH:MM:SS,mmm\ntext\n\n" per segment, N from 1
//   vtt           "WEBVTT\n\n" then "HH:MM:SS.mmm --> HH:MM:SS.mmm\ntext\n\n" per segment
//   verbose_json  task, language (English name), duration, text, segments (id, seek, start, end,
//                 text, tokens, temperature, avg_logprob, compression_ratio, no_speech_prob),
//                 words (word, start, end) when asked for, usage
// Cue text is the segment's text without surrounding whitespace, "-->" written "->"; times are
// rounded to milliseconds. Numbers are float32 values (as the service reports them).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/transcribe.h"

namespace brisk {

enum class TranscriptFormat { json, text, srt, vtt, verbose_json };

// "json", "text", "srt", "vtt", "verbose_json"; false when unknown.
bool transcript_format_from_name(const std::string& name, TranscriptFormat* out);
// "HH:MM:SS,mmm" (marker ',') or "HH:MM:SS.mmm" (marker '.').
std::string transcript_timestamp(double seconds, char marker);

struct TranscriptFormatOptions {
  bool segments = true;  // verbose_json: the segment list
  bool words = false;    // verbose_json: the word list
};
std::string transcript_render(const Transcript& t, TranscriptFormat f, const TranscriptFormatOptions& o = {});
nlohmann::ordered_json transcript_verbose_json(const Transcript& t, const TranscriptFormatOptions& o);
// The content type of a rendered format.
const char* transcript_content_type(TranscriptFormat f);

}  // namespace brisk
