// Server-sent events: `data: JSON` frames (OpenAI) and `event: NAME` + `data: JSON` frames
// (Anthropic), and the glue that streams a GenerationJob into an HTTP response (also the
// newline-delimited JSON of the Ollama routes). A silent
// stream gets a comment line every second, so a client that went away is noticed (the write
// fails) and its generation is cancelled, freeing the sequence slot.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "server/generation.h"

namespace httplib { struct Response; }

namespace brisk::server {

std::string sse_data(const nlohmann::json& j);
std::string sse_event(const std::string& name, const nlohmann::json& j);

struct SseFormatter {
  std::function<std::string()> start;                     // once, before any event
  std::function<std::string(const ChoiceEvent&)> event;   // per event
  std::function<std::string()> finish;                    // after every choice ended
  std::string content_type = "text/event-stream";         // NDJSON streams: application/x-ndjson
  // Written after a second of silence; "": nothing is written (a format without comments)
  // and the connection is polled for a hang-up instead.
  std::string keep_alive = ": keep-alive\n\n";
};

// `keep_alive` lives as long as the stream (e.g. the model and the in-flight counter).
void stream_job(httplib::Response& res, std::unique_ptr<GenerationJob> job, SseFormatter fmt,
                std::shared_ptr<void> keep_alive);

}  // namespace brisk::server
