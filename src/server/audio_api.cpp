// OpenAI's audio routes: POST /v1/audio/transcriptions and /v1/audio/translations.
// The connection layer holds /v1/audio/* bodies to --max-audio instead of --max-body (a larger
// declared body is a 413 before any of it is read, so it is never held); the multipart form is
// parsed part by part (server/audio_request.h bounds the file part by the same limit), the
// audio decoded and resampled (media/audio.h), then transcribed by the model's Transcriber
// (runtime/transcribe.h), whose context serves requests window by window. The answer is json / text / srt / vtt / verbose_json, or with stream=true server-sent events
// `transcript.text.delta` per segment and `transcript.text.done` at the end.
#include <httplib.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "core/error.h"
#include "core/log.h"
#include "media/audio.h"
#include "runtime/transcribe.h"
#include "server/audio_request.h"
#include "server/route_util.h"
#include "server/sse.h"

namespace brisk::server {
namespace {

constexpr double kMaxAudioSeconds = 4 * 3600.0;

struct Job {
  std::shared_ptr<LoadedModel> model;
  std::vector<float> samples;
  TranscribeOptions options;
};

void transcribe_route(ServerState& st, const httplib::Request& req, httplib::Response& res,
                      const httplib::ContentReader& reader, const char* task) {
  check_not_draining(st);
  auto in_flight = std::make_shared<InFlight>(st);
  if (!req.is_multipart_form_data())
    bad_request("file", "send the audio as multipart/form-data (fields file, model, response_format, ...)");
  AudioForm form(st.options.max_audio_bytes);
  const bool ok = reader([&](const httplib::MultipartFormData& part) { return form.begin_part(part.name, part.filename); },
                         [&](const char* data, size_t n) { return form.data(data, n); });
  if (!ok) form.fail_upload();
  const AudioRequest r = audio_request_parse(form);
  auto job = std::make_shared<Job>();
  job->model = st.registry->get_speech(r.model);
  Transcriber& tr = *job->model->speech;
  if (!r.language.empty() && !tr.config().multilingual && r.language != "en" && r.language != "english")
    bad_request("language", str_cat("the model is English-only (language '", r.language.substr(0, 64), "' given)"));
  if (r.words && !tr.config().word_timestamps_unavailable.empty())
    bad_request("timestamp_granularities", str_cat("word timestamps are not available: ",
                                                   tr.config().word_timestamps_unavailable));
  if (!r.language.empty() && !tr.config().find_language(r.language) && tr.config().multilingual)
    bad_request("language", str_cat("unsupported language '", r.language.substr(0, 64), "' (",
                                    tr.config().languages.empty() ? "the model has no language tokens"
                                                                  : "give an ISO-639-1 code such as 'en'", ")"));
  job->samples = media::audio_decode(form.file().data(), form.file().size(), form.file_name(),
                                     {.sample_rate = tr.config().mel.sample_rate, .max_seconds = kMaxAudioSeconds})
                     .samples;
  TranscribeOptions& o = job->options;
  o.task = task;
  o.language = r.language;
  o.prompt = r.prompt;
  o.word_timestamps = r.words;
  if (r.temperature > 0.0f) o.temperatures = {r.temperature};
  o.seed = random_u64();
  if (!r.stream) {
    const Transcript t = tr.transcribe(job->samples, o);
    res.status = 200;
    res.set_content(transcript_render(t, r.format, {.segments = r.segments, .words = r.words}),
                    transcript_content_type(r.format));
    return;
  }
  // Server-sent events, one delta per segment as it is final.
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [job, in_flight](size_t, httplib::DataSink& sink) -> bool {
        try {
          TranscriptDeltas deltas;
          bool gone = false;
          job->options.on_segment = [&](const TranscriptSegment& s) {
            const std::string delta = deltas.next(s.text);
            if (delta.empty()) return true;
            const std::string ev = sse_data({{"type", "transcript.text.delta"}, {"delta", delta}});
            gone = !sink.write(ev.data(), ev.size());
            return !gone;
          };
          const Transcript t = job->model->speech->transcribe(job->samples, job->options);
          const std::string done = sse_data({{"type", "transcript.text.done"}, {"text", t.text}});
          if (!sink.write(done.data(), done.size())) return false;
          sink.done();
          return true;
        } catch (const std::exception& e) {
          log_warn("serve: transcription stream ended: ", e.what());
          const std::string err = sse_data({{"type", "error"}, {"error", {{"message", e.what()}}}});
          sink.write(err.data(), err.size());
          sink.done();
          return true;
        }
      });
}

}  // namespace

void register_audio_routes(httplib::Server& http, ServerState& state) {
  ServerState* st = &state;
  for (const auto& route : {std::pair{"/v1/audio/transcriptions", "transcribe"}, std::pair{"/v1/audio/translations", "translate"}}) {
    const char* path = route.first;
    const char* task = route.second;
    add_post_reader_route(http, state, path, path, Dialect::openai,
                          [st, task](const httplib::Request& req, httplib::Response& res,
                                     const httplib::ContentReader& reader) { transcribe_route(*st, req, res, reader, task); });
  }
}

}  // namespace brisk::server
