// Ollama dialect, the generating routes: POST /api/chat, POST /api/generate (newline-delimited
// JSON streams by default, one object with `stream: false`), POST /api/embed and
// /api/embeddings (server/embeddings_api.cpp answers them). A request is mapped onto the same
// ChatRequest -> prepare_chat -> start_generation path as the OpenAI routes; what differs is
// the request's field names and the shape of the replies.
#include <chrono>

#include "core/error.h"
#include "server/chat_request.h"
#include "server/constraints.h"
#include "server/embeddings_api.h"
#include "server/json_fields.h"
#include "server/ollama_common.h"
#include "server/route_util.h"
#include "server/sse.h"
#include "text/tokenizer.h"

namespace brisk::server {
namespace {

constexpr auto kOllamaStallTimeout = std::chrono::minutes(10);

// Ollama message -> the messages chat templates expect (OpenAI convention, as
// normalize_messages in openai_api.cpp writes them).
json ollama_messages(const json& body) {
  const json* msgs = field(body, "messages");
  json out = json::array();
  if (!msgs) return out;
  if (!msgs->is_array()) bad_request("messages", "'messages' must be an array");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    if (!m.is_object()) bad_request("messages", str_cat("messages[", i, "] must be an object"));
    const auto role = get_string(m, "role");
    if (!role) bad_request("messages", str_cat("messages[", i, "].role is missing"));
    if (*role != "system" && *role != "user" && *role != "assistant" && *role != "tool")
      bad_request("messages", str_cat("messages[", i, "].role '", *role, "' is not one of system, user, assistant, tool"));
    if (const json* images = field(m, "images"); images && !(images->is_array() && images->empty()))
      bad_request("messages", str_cat("messages[", i, "].images: this server has no vision models; send text only"));
    const json* content = field(m, "content");
    if (content && !content->is_string()) bad_request("messages", str_cat("messages[", i, "].content must be a string"));
    json n = {{"role", *role}, {"content", content ? *content : json("")}};
    if (*role == "tool") {
      if (auto name = get_string(m, "tool_name")) n["name"] = *name;
      else if (auto name2 = get_string(m, "name")) n["name"] = *name2;
    }
    if (*role == "assistant") {
      if (auto t = get_string(m, "thinking")) n["reasoning_content"] = *t;
      if (const json* calls = field(m, "tool_calls")) {
        if (!calls->is_array()) bad_request("messages", str_cat("messages[", i, "].tool_calls must be an array"));
        json tc = json::array();
        for (size_t k = 0; k < calls->size(); ++k) {
          const json& c = (*calls)[k];
          const json* fn = field(c, "function");
          if (!fn || !fn->is_object() || !field(*fn, "name") || !(*fn)["name"].is_string())
            bad_request("messages", str_cat("messages[", i, "].tool_calls[", k, "] needs a 'function' {name, arguments}"));
          json args = fn->contains("arguments") ? (*fn)["arguments"] : json::object();
          if (args.is_string()) {
            json parsed = json::parse(args.get<std::string>(), nullptr, false);
            if (parsed.is_object()) args = std::move(parsed);
          }
          const json* id = field(c, "id");
          json call = {{"type", "function"}, {"id", id && id->is_string() ? *id : json(str_cat("call_", k))}};
          call["function"] = {{"name", (*fn)["name"]}, {"arguments", args}};
          tc.push_back(std::move(call));
        }
        n["tool_calls"] = std::move(tc);
      }
    }
    out.push_back(std::move(n));
  }
  return out;
}

// `format`: "json", a JSON schema (an object), or "" / absent.
void parse_ollama_format(const json& body, ChatRequest& r) {
  const json* f = field(body, "format");
  if (!f) return;
  if (f->is_string()) {
    const std::string s = f->get<std::string>();
    if (s.empty()) return;
    if (s != "json") bad_request("format", str_cat("'format' \"", s, "\" is not \"json\" or a JSON schema object"));
    r.json_object = true;
    return;
  }
  if (!f->is_object() && !f->is_boolean())
    bad_request("format", "'format' must be \"json\" or a JSON schema object");
  r.json_object = true;
  r.json_schema = parse_json_schema(*f, "format", "format");
}

// `think`: true / false, or an effort ("high", "medium", "low") for models that take one.
void parse_think(const json& body, ChatPromptInput& render) {
  const json* t = field(body, "think");
  if (!t) return;
  if (t->is_boolean()) {
    render.kwargs["enable_thinking"] = t->get<bool>();
    return;
  }
  if (t->is_string()) {
    const std::string s = t->get<std::string>();
    if (s == "high" || s == "medium" || s == "low") {
      render.kwargs["enable_thinking"] = true;
      render.kwargs["reasoning_effort"] = s;
      return;
    }
  }
  bad_request("think", "'think' must be true, false, \"high\", \"medium\" or \"low\"");
}

std::string ollama_done_reason(const std::string& finish) {
  if (finish == "error") throw HttpError(500, "generation failed");
  if (finish == "length") return "length";
  return "stop";  // stop, tool_calls (as Ollama reports a turn that called tools), cancelled
}

// The request's timing, for the final object's durations (nanoseconds).
struct OllamaTiming {
  std::chrono::steady_clock::time_point arrival;
  int64_t load_ns = 0;
};

json ollama_final_fields(const GenerationResult& r, const OllamaTiming& t) {
  return {{"total_duration", ollama_nanos(std::chrono::steady_clock::now() - t.arrival)},
          {"load_duration", t.load_ns},
          {"prompt_eval_count", r.prompt_tokens},
          {"prompt_eval_duration", int64_t(r.prefill_ms * 1e6)},
          {"eval_count", r.completion_tokens},
          {"eval_duration", int64_t(r.decode_ms * 1e6)}};
}

// Holds what a streamed reply needs; with keep_alive 0 the model is unloaded once the reply
// is done (when no other request holds it).
struct OllamaHold {
  std::shared_ptr<InFlight> inflight;
  std::shared_ptr<LoadedModel> model;
  ModelRegistry* registry = nullptr;
  bool unload_after = false;
  ~OllamaHold() {
    const std::string name = model ? model->name : "";
    model.reset();
    inflight.reset();
    if (unload_after && registry && !name.empty()) registry->unload(name);
  }
};

struct OllamaCommon {
  std::string name;             // the model name as the client wrote it (echoed back)
  std::shared_ptr<LoadedModel> model;
  OllamaTiming timing;
  bool stream = true;
  bool unload_after = false;
};

// The model, its load time and the fields every generating route reads first.
OllamaCommon ollama_common(ServerState& state, const json& body) {
  OllamaCommon c;
  c.timing.arrival = request_arrival_time();
  c.name = ollama_model_field(body);
  const std::string served = ollama_served_name(*state.registry, c.name);
  const auto keep_alive = parse_keep_alive(body);
  c.unload_after = keep_alive && *keep_alive == 0.0;
  c.stream = get_bool(body, "stream").value_or(true);
  const auto t0 = std::chrono::steady_clock::now();
  c.model = state.registry->get(served);
  c.timing.load_ns = ollama_nanos(std::chrono::steady_clock::now() - t0);
  return c;
}

// A request with nothing to generate loads the model (or, with keep_alive 0, unloads it).
void reply_load_only(ServerState& state, OllamaCommon& c, httplib::Response& res, bool chat) {
  const bool unload = c.unload_after;
  const std::string served = c.model->name;
  c.model.reset();
  if (unload) state.registry->unload(served);
  json out = {{"model", c.name}, {"created_at", ollama_time(std::chrono::system_clock::now())},
              {"done", true}, {"done_reason", unload ? "unload" : "load"}};
  if (chat) out["message"] = {{"role", "assistant"}, {"content", ""}};
  else out["response"] = "";
  reply_json(res, out);
}

// Runs a prepared request and replies in the Ollama shape: /api/chat (`message`) or
// /api/generate (`response`, and `context`: the prompt's tokens and the answer's).
void run_ollama(ServerState& state, OllamaCommon& c, GenerationSpec spec, bool chat, httplib::Response& res) {
  spec.arrival = c.timing.arrival;
  auto context = std::make_shared<std::vector<int32_t>>(chat ? std::vector<int32_t>() : spec.prompt);
  auto hold = std::make_shared<OllamaHold>();
  hold->inflight = std::make_shared<InFlight>(state);
  hold->model = c.model;
  hold->registry = state.registry;
  hold->unload_after = c.unload_after;
  auto job = start_generation(*c.model, std::move(spec), &state.metrics);
  const std::string name = c.name;
  const OllamaTiming timing = c.timing;
  LoadedModel* model = c.model.get();
  // The generate route's `context`: prompt tokens, then the answer's tokens.
  auto context_json = [model, context](const std::string& answer) {
    std::vector<int32_t> ids = *context;
    const auto more = model->tokenizer->encode(answer, EncodeOptions{.add_special = false, .parse_special = false});
    ids.insert(ids.end(), more.begin(), more.end());
    return json(ids);
  };
  auto piece = [chat, name](const std::string& content, const std::string& thinking, const json& tool_calls) {
    json o = {{"model", name}, {"created_at", ollama_time(std::chrono::system_clock::now())}, {"done", false}};
    if (chat) {
      o["message"] = {{"role", "assistant"}, {"content", content}};
      if (!thinking.empty()) o["message"]["thinking"] = thinking;
      if (!tool_calls.empty()) o["message"]["tool_calls"] = tool_calls;
    } else {
      o["response"] = content;
      if (!thinking.empty()) o["thinking"] = thinking;
    }
    return o;
  };

  c.model.reset();  // `hold` keeps it (and with keep_alive 0 unloads it when done)
  if (!c.stream) {
    auto results = collect_choices(*job, kOllamaStallTimeout, client_disconnect_probe());
    ChoiceResult& r = results.at(0);
    if (r.finish_reason == "error") throw HttpError(500, str_cat("generation failed: ", r.result.error));
    json out = piece(r.content, r.reasoning, r.tool_calls.empty() ? json::array() : ollama_tool_calls(r.tool_calls));
    out["done"] = true;
    out["done_reason"] = ollama_done_reason(r.finish_reason);
    out.update(ollama_final_fields(r.result, timing));
    if (!chat) out["context"] = context_json(r.content);
    reply_json(res, out);
    hold.reset();
    return;
  }

  struct StreamTotals {
    std::string content;
    std::vector<ToolCallChunk> calls;
  };
  auto totals = std::make_shared<StreamTotals>();
  SseFormatter fmt;
  fmt.content_type = "application/x-ndjson";
  fmt.keep_alive = "";
  fmt.start = [] { return std::string(); };
  fmt.event = [=](const ChoiceEvent& ev) {
    for (const auto& d : ev.tool_calls) append_tool_call_delta(totals->calls, d);
    totals->content += ev.content;
    std::string out;
    if (!ev.content.empty() || !ev.reasoning.empty()) out += ndjson_line(piece(ev.content, ev.reasoning, json::array()));
    if (!ev.end) return out;
    if (ev.finish_reason == "error") return out + ndjson_line({{"error", str_cat("generation failed: ", ev.result.error)}});
    // Tool calls go out whole, in one object before the final one (as Ollama sends them).
    if (!totals->calls.empty()) out += ndjson_line(piece("", "", ollama_tool_calls(totals->calls)));
    json fin = piece("", "", json::array());
    fin["done"] = true;
    fin["done_reason"] = ollama_done_reason(ev.finish_reason);
    fin.update(ollama_final_fields(ev.result, timing));
    if (!chat) fin["context"] = context_json(totals->content);
    return out + ndjson_line(fin);
  };
  fmt.finish = [] { return std::string(); };
  stream_job(res, std::move(job), std::move(fmt), hold);
}

// num_ctx bounds prompt + output (the server's --ctx stays the ceiling).
void apply_num_ctx(const LoadedModel& model, GenerationSpec& spec, const OllamaOptions& o) {
  if (!o.num_ctx || *o.num_ctx >= model.n_ctx) return;
  const int64_t room = *o.num_ctx - int64_t(spec.prompt.size());
  if (room < 1)
    throw HttpError(400, str_cat("the prompt has ", spec.prompt.size(), " tokens, which leaves no room within options.num_ctx ",
                                 *o.num_ctx),
                    "options");
  spec.max_tokens = int32_t(std::min<int64_t>(spec.max_tokens, room));
}

void ollama_chat(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  check_not_draining(state);
  const json body = parse_body(req.body);
  OllamaCommon c = ollama_common(state, body);
  ChatRequest chat;
  chat.render.messages = ollama_messages(body);
  chat.render.tools = parse_function_tools(body);
  parse_ollama_format(body, chat);
  parse_think(body, chat.render);
  const OllamaOptions o = parse_ollama_options(body, chat.sampling, c.model->scheduler->n_vocab());
  if (chat.render.messages.empty()) return reply_load_only(state, c, res, true);
  chat.max_tokens = o.num_predict;
  chat.max_tokens_param = "options.num_predict";
  chat.stop = o.stop;
  chat.session = session_key(req, "");
  PreparedChat prep = prepare_chat(*c.model, std::move(chat), state.options.max_tokens_ceiling);
  apply_num_ctx(*c.model, prep.spec, o);
  run_ollama(state, c, std::move(prep.spec), true, res);
}

void ollama_generate(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  check_not_draining(state);
  const json body = parse_body(req.body);
  OllamaCommon c = ollama_common(state, body);
  LoadedModel& model = *c.model;
  const std::string prompt = get_string(body, "prompt").value_or("");
  const std::string system = get_string(body, "system").value_or("");
  if (const json* images = field(body, "images"); images && !(images->is_array() && images->empty()))
    bad_request("images", "'images': this server has no vision models; send text only");
  if (!get_string(body, "suffix").value_or("").empty())
    bad_request("suffix", "'suffix' (fill-in-the-middle) is not supported");
  if (!get_string(body, "template").value_or("").empty())
    bad_request("template", "'template' overrides are not supported; the model's chat template is used (or 'raw': true)");
  const bool raw = get_bool(body, "raw").value_or(false);
  std::vector<int32_t> context;
  if (const json* ctx = field(body, "context")) {
    if (!ctx->is_array()) bad_request("context", "'context' must be an array of token ids");
    for (const auto& t : *ctx) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= model.scheduler->n_vocab())
        bad_request("context", str_cat("'context' entries must be token ids in [0, ", model.scheduler->n_vocab(), ")"));
      context.push_back(t.get<int32_t>());
    }
  }
  ChatRequest chat;
  parse_ollama_format(body, chat);
  parse_think(body, chat.render);
  const OllamaOptions o = parse_ollama_options(body, chat.sampling, model.scheduler->n_vocab());
  if (prompt.empty() && context.empty()) return reply_load_only(state, c, res, false);
  const int32_t ceiling = state.options.max_tokens_ceiling > 0 ? state.options.max_tokens_ceiling : model.n_ctx;
  GenerationSpec spec;
  if (raw || !model.render_chat) {
    // The prompt as written (no template, so no `system` either, as Ollama's raw mode); the
    // output is not split into reasoning.
    spec.prompt = tokenize_prompt(model, prompt, context.empty(), "prompt");
    spec.sampling = chat.sampling;
    spec.stop = o.stop;
    spec.session = session_key(req, "");
    LoadedModel* m = &model;
    if (chat.json_schema) spec.make_constraint = [m, s = chat.json_schema] { return make_schema_constraint(*m, s); };
    else if (chat.json_object) spec.make_constraint = [m] { return make_json_constraint(*m); };
  } else {
    if (!system.empty()) chat.render.messages.push_back({{"role", "system"}, {"content", system}});
    chat.render.messages.push_back({{"role", "user"}, {"content", prompt}});
    chat.max_tokens = o.num_predict;
    chat.max_tokens_param = "options.num_predict";
    chat.stop = o.stop;
    chat.session = session_key(req, "");
    spec = prepare_chat(model, std::move(chat), state.options.max_tokens_ceiling).spec;
  }
  spec.prompt.insert(spec.prompt.begin(), context.begin(), context.end());
  if (spec.prompt.empty()) bad_request("prompt", "the prompt is empty");
  spec.max_tokens = resolve_max_tokens(model, spec.prompt.size(), o.num_predict, ceiling, "options.num_predict");
  apply_num_ctx(model, spec, o);
  run_ollama(state, c, std::move(spec), false, res);
}

// /api/embed and the legacy /api/embeddings: the model must exist; embeddings_api.cpp answers.
void ollama_embed_route(ServerState& state, const httplib::Request& req, httplib::Response& res, bool legacy) {
  const json body = parse_body(req.body);
  const std::string served = ollama_served_name(*state.registry, ollama_model_field(body));
  ollama_embed_reply(state, body, served, legacy, res);
}
void ollama_embed(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  ollama_embed_route(state, req, res, false);
}
void ollama_embeddings(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  ollama_embed_route(state, req, res, true);
}

}  // namespace

void register_ollama_generation_routes(httplib::Server& http, ServerState& state) {
  ServerState* st = &state;
  auto post = [&](const char* path, void (*fn)(ServerState&, const httplib::Request&, httplib::Response&)) {
    add_post_route(http, state, path, path, Dialect::ollama,
                   [st, fn](const httplib::Request& req, httplib::Response& res) { fn(*st, req, res); });
  };
  post("/api/chat", ollama_chat);
  post("/api/generate", ollama_generate);
  post("/api/embed", ollama_embed);
  post("/api/embeddings", ollama_embeddings);
}

}  // namespace brisk::server
