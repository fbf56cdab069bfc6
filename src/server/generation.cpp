#include "server/generation.h"

#include <algorithm>

#include <limits>

#include "core/error.h"
#include "core/log.h"
#include "server/errors.h"
#include "server/metrics.h"
#include "runtime/stop_strings.h"
#include "text/tokenizer.h"

namespace brisk::server {

void EventChannel::push(ChoiceEvent ev) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(ev));
  }
  cv_.notify_all();
}

bool EventChannel::pop(ChoiceEvent& out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return false;
  out = std::move(events_.front());
  events_.pop_front();
  return true;
}

GenerationJob::~GenerationJob() { cancel(); }
void GenerationJob::cancel() { cancel_flag->store(true); }

namespace {

std::string token_piece(const Tokenizer& tok, int32_t id) {
  try {
    return tok.decode({id}, false);
  } catch (const std::exception&) {
    return {};
  }
}

// Text side of one choice; lives in the scheduler callbacks (worker thread only). Special
// tokens are kept in the text: reasoning and tool-call markers are often special tokens, and
// the output parser needs them (end-of-generation tokens never reach the text).
struct ChoiceText {
  ChoiceText(const Tokenizer& t, std::vector<std::string> stops) : tok(t), decoder(t, false), stop(std::move(stops)) {}
  const Tokenizer& tok;
  StreamDecoder decoder;
  StopMatcher stop;
  std::shared_ptr<EventChannel> channel;
  int32_t choice = 0;
  int32_t logprobs = -1;
  std::unique_ptr<ChatOutputParser> parser;
  bool single_tool_call = false;

  // Routes text through the output parser (when there is one) into the event. `truncated`:
  // the generation ended at max_tokens.
  void route(ChoiceEvent& d, const std::string& text, bool at_end, bool truncated = false) {
    if (!parser) {
      d.content += text;
      return;
    }
    ChatOutputDelta delta = text.empty() ? ChatOutputDelta{} : parser->feed(text);
    if (at_end) {
      ChatOutputDelta last = parser->finish();
      // A tool call cut by max_tokens comes back from finish() as its raw markup, as content:
      // dropped (what was known of the call, its name and arguments so far, went out as a call).
      if (!(truncated && last.warning)) delta.content += last.content;
      delta.reasoning += last.reasoning;
      for (auto& t : last.tool_calls) delta.tool_calls.push_back(std::move(t));
    }
    d.content += delta.content;
    d.reasoning += delta.reasoning;
    for (auto& t : delta.tool_calls) {
      if (single_tool_call && t.index > 0) continue;
      d.tool_calls.push_back({.index = int32_t(t.index), .id = t.id, .name = t.name, .arguments = t.arguments});
    }
  }

  bool has_tool_call() const { return parser && !parser->result().tool_calls.empty(); }

  bool on_token(const TokenEvent& ev) {
    ChoiceEvent d;
    d.choice = choice;
    route(d, stop.push(decoder.push(ev.token)), false);
    if (ev.index == 0) d.cached_tokens = ev.cached_tokens;
    if (logprobs >= 0) {
      LogprobEntry e{.token = token_piece(tok, ev.token), .logprob = ev.logprob, .top = {}};
      for (const auto& t : ev.top) e.top.emplace_back(token_piece(tok, t.token), t.logprob);
      d.logprobs.push_back(std::move(e));
    }
    if (!d.content.empty() || !d.reasoning.empty() || !d.tool_calls.empty() || !d.logprobs.empty() ||
        d.cached_tokens >= 0)
      channel->push(std::move(d));
    if (single_tool_call && has_tool_call()) return false;
    return !stop.matched();
  }

  void on_done(const GenerationResult& r) {
    ChoiceEvent d;
    d.choice = choice;
    std::string rest;
    if (!stop.matched()) {
      rest = stop.push(decoder.flush());
      rest += stop.flush();
    }
    route(d, rest, true, r.reason == FinishReason::length);
    if (!d.content.empty() || !d.reasoning.empty() || !d.tool_calls.empty()) channel->push(std::move(d));
    ChoiceEvent end;
    end.end = true;
    end.choice = choice;
    end.result = r;
    end.finish_reason = finish_reason_name(r.reason);
    if (r.reason == FinishReason::stop && has_tool_call()) end.finish_reason = "tool_calls";
    if (stop.matched()) end.stop_sequence = stop.matched_stop();
    channel->push(std::move(end));
  }
};

}  // namespace

std::unique_ptr<GenerationJob> start_generation(LoadedModel& model, GenerationSpec spec, Metrics* metrics) {
  BRISK_CHECK(model.scheduler && model.tokenizer, "model '", model.name, "' has no engine");
  auto job = std::make_unique<GenerationJob>();
  job->n = spec.n;
  const auto arrival = spec.arrival == std::chrono::steady_clock::time_point{} ? std::chrono::steady_clock::now()
                                                                                : spec.arrival;
  for (int32_t c = 0; c < spec.n; ++c) {
    auto text = std::make_shared<ChoiceText>(*model.tokenizer, spec.stop);
    text->channel = job->channel;
    text->choice = c;
    text->logprobs = spec.logprobs;
    if (spec.output) {
      ChatOutputOptions o = *spec.output;
      o.id_seed = str_cat(o.id_seed, "-", c);
      text->parser = std::make_unique<ChatOutputParser>(std::move(o));
      text->single_tool_call = spec.single_tool_call;
    }
    GenerationRequest r;
    r.prompt = spec.prompt;
    r.max_tokens = spec.max_tokens;
    r.sampling = spec.sampling;
    r.sampling.seed = spec.sampling.seed + uint64_t(c);
    // Rows of the output layer past the tokenizer's vocabulary (padding) are never sampled.
    sampler_ban_ids_without_token(r.sampling, model.tokenizer->vocab_size(), model.scheduler->n_vocab());
    if (!spec.ignore_eos) r.stop_tokens = model.end_ids;
    r.session = spec.session;
    r.logprobs = spec.logprobs;
    r.draft_max = spec.draft_max;
    if (spec.make_constraint) r.constraint = spec.make_constraint();
    r.cancel = job->cancel_flag;
    r.on_token = [text](const TokenEvent& ev) { return text->on_token(ev); };
    r.on_done = [text, metrics, arrival](const GenerationResult& res) {
      if (metrics)
        metrics->count_generation(
            res, std::chrono::duration<double>(std::chrono::steady_clock::now() - arrival).count());
      text->on_done(res);
    };
    bool queued = false;
    try {
      queued = model.scheduler->submit(std::move(r));
    } catch (const Error& e) {
      job->cancel();
      throw HttpError(400, e.what());
    }
    if (!queued) {
      job->cancel();
      throw HttpError(503, str_cat("server is busy: the request queue of model '", model.name,
                                   "' is full; retry later"));
    }
  }
  return job;
}

void append_tool_call_delta(std::vector<ToolCallChunk>& calls, const ToolCallChunk& t) {
  if (t.index >= int32_t(calls.size())) calls.resize(size_t(t.index) + 1);
  ToolCallChunk& dst = calls[size_t(t.index)];
  dst.index = t.index;
  if (!t.id.empty()) dst.id = t.id;
  if (!t.name.empty()) dst.name = t.name;
  dst.arguments += t.arguments;
}

std::vector<ChoiceResult> collect_choices(GenerationJob& job, std::chrono::milliseconds timeout,
                                          const std::function<bool()>& client_gone) {
  std::vector<ChoiceResult> out(size_t(job.n));
  ChoiceEvent ev;
  const auto slice = std::chrono::milliseconds(100);
  auto next_probe = std::chrono::steady_clock::now() + slice;
  while (job.ended < job.n) {
    // A client that went away is noticed within ~100 ms, whether events keep coming or not.
    bool got = false;
    for (auto waited = std::chrono::milliseconds(0); waited < timeout && !got; waited += slice) {
      got = job.next(ev, std::min(slice, timeout - waited));
      const auto now = std::chrono::steady_clock::now();
      if (now >= next_probe) {
        next_probe = now + slice;
        if (client_gone && client_gone()) {
          job.cancel();
          throw HttpError(499, "client disconnected before the answer was complete");
        }
      }
    }
    if (!got) {
      job.cancel();
      throw HttpError(500, "generation stalled");
    }
    if (ev.choice < 0 || ev.choice >= job.n) continue;
    ChoiceResult& c = out[size_t(ev.choice)];
    c.content += ev.content;
    c.reasoning += ev.reasoning;
    for (const auto& t : ev.tool_calls) append_tool_call_delta(c.tool_calls, t);
    for (auto& l : ev.logprobs) c.logprobs.push_back(std::move(l));
    if (ev.end) {
      c.finish_reason = ev.finish_reason;
      c.stop_sequence = ev.stop_sequence;
      c.result = ev.result;
      job.ended++;
    }
  }
  return out;
}

int32_t resolve_max_tokens(const LoadedModel& model, size_t prompt_tokens, std::optional<int64_t> requested,
                           int32_t ceiling, const char* param) {
  const int64_t n_ctx = model.n_ctx;
  if (int64_t(prompt_tokens) >= n_ctx)
    throw HttpError(400, str_cat("the prompt has ", prompt_tokens, " tokens but the context of model '", model.name,
                                 "' holds ", n_ctx, " tokens (at least one must remain for the completion)"),
                    "messages");
  const int64_t room = n_ctx - int64_t(prompt_tokens);
  if (!requested) return int32_t(std::min<int64_t>(room, ceiling));
  if (*requested < 1) throw HttpError(400, str_cat("'", param, "' must be at least 1, got ", *requested), param);
  if (*requested > ceiling)
    throw HttpError(400, str_cat("'", param, "' is ", *requested, " but this server allows at most ", ceiling), param);
  if (*requested > room)
    throw HttpError(400, str_cat("the prompt has ", prompt_tokens, " tokens and '", param, "' asks for ", *requested,
                                 ": ", int64_t(prompt_tokens) + *requested, " tokens exceed the context of ",
                                 n_ctx, " tokens of model '", model.name, "'"),
                    param);
  return int32_t(*requested);
}

}  // namespace brisk::server
