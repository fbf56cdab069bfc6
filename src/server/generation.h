// Dialect-neutral generation for the HTTP routes: turns a prompt and sampling settings into
// one scheduler request per choice (OpenAI `n`), and the scheduler's tokens into text events:
// streamed detokenization (never splitting a UTF-8 character), stop strings, and optionally
// the split into content / reasoning / tool calls. Events of all choices arrive on one
// channel; the route's handler thread formats them (SSE chunks or one JSON body).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/model_registry.h"
#include "text/chat_output.h"
#include "runtime/scheduler.h"

namespace brisk::server {

struct ToolCallChunk {
  int32_t index = 0;       // which call of the message
  std::string id;          // set on the call's first delta
  std::string name;        // set on the call's first delta
  std::string arguments;   // JSON text fragment
};

struct LogprobEntry {
  std::string token;
  float logprob = 0.0f;
  std::vector<std::pair<std::string, float>> top;
};

struct ChoiceEvent {
  bool end = false;
  int32_t choice = 0;
  std::string content;
  std::string reasoning;
  std::vector<ToolCallChunk> tool_calls;
  std::vector<LogprobEntry> logprobs;
  // On the end event:
  int32_t cached_tokens = -1;  // on a choice's first event: prompt tokens reused
  std::string finish_reason;   // stop | length | tool_calls | cancelled | error
  std::string stop_sequence;   // the stop string that ended the choice, if any
  GenerationResult result;
};

class EventChannel {
 public:
  void push(ChoiceEvent ev);
  bool pop(ChoiceEvent& out, std::chrono::milliseconds timeout);  // false: timed out

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<ChoiceEvent> events_;
};

struct GenerationSpec {
  std::vector<int32_t> prompt;
  int32_t max_tokens = 16;
  int32_t n = 1;                       // choices, seeds seed, seed+1, ...
  SamplerParams sampling;
  std::vector<std::string> stop;
  std::string session;
  int32_t logprobs = -1;               // -1 none, 0 chosen only, k top-k
  bool ignore_eos = false;
  int32_t draft_max = -1;              // speculative decoding: -1 the server's, 0 off
  std::optional<ChatOutputOptions> output;  // split reasoning and tool calls (chat routes)
  bool single_tool_call = false;       // parallel_tool_calls false: end after the first call
  std::function<std::unique_ptr<TokenConstraint>()> make_constraint;  // optional
  std::chrono::steady_clock::time_point arrival{};  // the request's arrival (metrics); default: submit time
};

class GenerationJob {
 public:
  ~GenerationJob();  // cancels choices still running (client gone, handler failed)
  void cancel();
  // Waits for the next event; false after `timeout` without one.
  bool next(ChoiceEvent& ev, std::chrono::milliseconds timeout) { return channel->pop(ev, timeout); }
  int32_t n_choices() const { return n; }

  std::shared_ptr<EventChannel> channel = std::make_shared<EventChannel>();
  std::shared_ptr<std::atomic<bool>> cancel_flag = std::make_shared<std::atomic<bool>>(false);
  int32_t n = 0;
  int32_t ended = 0;  // end events seen by the consumer
};

// Queues every choice. Throws HttpError 503 when the scheduler's queue is full (choices
// already queued are cancelled) and HttpError 400 for requests the scheduler refuses.
class Metrics;
// `metrics` (optional) counts every choice's result when it ends, whether or not anyone reads it.
std::unique_ptr<GenerationJob> start_generation(LoadedModel& model, GenerationSpec spec, Metrics* metrics);

// A whole choice, for non-streamed responses.
struct ChoiceResult {
  std::string content;
  std::string reasoning;
  std::vector<ToolCallChunk> tool_calls;  // complete calls
  std::vector<LogprobEntry> logprobs;
  std::string finish_reason;
  std::string stop_sequence;
  GenerationResult result;
};
// Adds one streamed piece of a tool call to the calls assembled so far (`calls`, by index).
void append_tool_call_delta(std::vector<ToolCallChunk>& calls, const ToolCallChunk& delta);

// Waits for every choice to end (at most `timeout` without any event in between). When
// `client_gone` reports the client disconnected, the job is cancelled (its sequences freed)
// and HttpError 499 is thrown (nobody is left to read the answer).
std::vector<ChoiceResult> collect_choices(GenerationJob& job, std::chrono::milliseconds timeout,
                                          const std::function<bool()>& client_gone = {});

// The completion budget of a request: `requested` (or all the room left when absent) checked
// against the context and the server's ceiling. Throws HttpError 400 naming the sizes.
int32_t resolve_max_tokens(const LoadedModel& model, size_t prompt_tokens, std::optional<int64_t> requested,
                           int32_t ceiling, const char* param);

}  // namespace brisk::server
