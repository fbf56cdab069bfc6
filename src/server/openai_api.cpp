// OpenAI dialect: GET /v1/models, POST /v1/chat/completions, POST /v1/completions,
// POST /tokenize, POST /detokenize.
#include <chrono>
#include <ctime>

#include "core/error.h"
#include "server/chat_request.h"
#include "server/constraints.h"
#include "server/json_fields.h"
#include "server/route_util.h"
#include "server/sse.h"
#include "text/tokenizer.h"

namespace brisk::server {
namespace {

// response_format: text | json_object | json_schema ({name, schema, strict}); also llama.cpp's
// {type: json_object, schema}.
void parse_response_format(const json& body, bool& json_object, std::shared_ptr<const CompiledSchema>& schema) {
  const json* rf = field(body, "response_format");
  if (!rf) return;
  const json type = rf->is_object() ? rf->value("type", json()) : json();
  if (type == "json_object" || type == "json_schema") json_object = true;
  else if (type != "text") bad_request("response_format", "response_format.type must be text, json_object or json_schema");
  const json* s = nullptr;
  if (type == "json_schema") {
    const json* js = field(*rf, "json_schema");
    if (!js || !js->is_object()) bad_request("response_format", "response_format.json_schema must be an object {name, schema}");
    s = field(*js, "schema");
    if (!s) bad_request("response_format", "response_format.json_schema.schema is required: the output is constrained to it");
  } else if (type == "json_object") {
    s = field(*rf, "schema");
  }
  if (s) schema = parse_json_schema(*s, "response_format", type == "json_schema" ? "response_format.json_schema.schema" : "response_format.schema");
}

constexpr auto kStallTimeout = std::chrono::minutes(10);

// OpenAI message content: a string, null, or an array of {type: "text", text} parts.
std::string content_text(const json& content, size_t index) {
  if (content.is_null()) return {};
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    bad_request("messages", str_cat("messages[", index, "].content must be a string or an array of parts"));
  std::string out;
  for (const auto& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
      bad_request("messages", str_cat("messages[", index, "].content: only text parts are supported"));
    out += part["text"].get<std::string>();
  }
  return out;
}

// Messages in the convention chat templates expect (content strings, tool call arguments as
// objects when they parse; malformed arguments stay text so the session never breaks).
json normalize_messages(const json& body) {
  const json* msgs = field(body, "messages");
  if (!msgs || !msgs->is_array() || msgs->empty())
    bad_request("messages", "'messages' must be a non-empty array");
  json out = json::array();
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    if (!m.is_object()) bad_request("messages", str_cat("messages[", i, "] must be an object"));
    const auto role = get_string(m, "role");
    if (!role) bad_request("messages", str_cat("messages[", i, "].role is missing"));
    if (*role != "system" && *role != "developer" && *role != "user" && *role != "assistant" && *role != "tool")
      bad_request("messages", str_cat("messages[", i, "].role '", *role, "' is not one of system, developer, user, assistant, tool"));
    json n = {{"role", *role == "developer" ? "system" : *role}};
    n["content"] = content_text(m.contains("content") ? m["content"] : json(nullptr), i);
    if (auto name = get_string(m, "name")) n["name"] = *name;
    if (*role == "tool") {
      if (auto id = get_string(m, "tool_call_id")) n["tool_call_id"] = *id;
    }
    if (*role == "assistant") {
      for (const char* k : {"reasoning_content", "reasoning"})
        if (auto r = get_string(m, k)) n["reasoning_content"] = *r;
      if (const json* calls = field(m, "tool_calls")) {
        if (!calls->is_array()) bad_request("messages", str_cat("messages[", i, "].tool_calls must be an array"));
        json tc = json::array();
        for (const auto& c : *calls) {
          const json* fn = c.is_object() ? field(c, "function") : nullptr;
          if (!fn || !fn->is_object())
            bad_request("messages", str_cat("messages[", i, "].tool_calls entries need a 'function' object"));
          json call = {{"type", "function"}, {"id", c.value("id", "")}};
          call["function"]["name"] = fn->contains("name") && (*fn)["name"].is_string() ? (*fn)["name"] : json("");
          const json args = fn->contains("arguments") ? (*fn)["arguments"] : json::object();
          if (args.is_string()) {
            json parsed = json::parse(args.get<std::string>(), nullptr, false);
            call["function"]["arguments"] = parsed.is_object() ? parsed : args;
          } else {
            call["function"]["arguments"] = args;
          }
          tc.push_back(std::move(call));
        }
        n["tool_calls"] = std::move(tc);
      }
    }
    out.push_back(std::move(n));
  }
  return out;
}

json usage_json(const std::vector<ChoiceResult>& rs) {
  int64_t prompt = rs.empty() ? 0 : rs[0].result.prompt_tokens, completion = 0, cached = 0;
  for (const auto& r : rs) {
    completion += r.result.completion_tokens;
    cached = std::max<int64_t>(cached, r.result.cached_tokens);
  }
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

// Extension: where the time went (first choice), as llama.cpp's server reports `timings`.
json timings_json(const std::vector<ChoiceResult>& rs) {
  if (rs.empty()) return nullptr;
  const GenerationResult& r = rs[0].result;
  return {{"queue_ms", r.queue_ms}, {"prompt_ms", r.prefill_ms}, {"decode_ms", r.decode_ms},
          {"prompt_tokens_decoded", r.prompt_tokens - r.cached_tokens}};
}

json logprobs_json(const std::vector<LogprobEntry>& lps) {
  json content = json::array();
  for (const auto& e : lps) {
    json top = json::array();
    for (const auto& [t, lp] : e.top)
      top.push_back({{"token", t}, {"logprob", lp}, {"bytes", std::vector<uint8_t>(t.begin(), t.end())}});
    content.push_back({{"token", e.token},
                       {"logprob", e.logprob},
                       {"bytes", std::vector<uint8_t>(e.token.begin(), e.token.end())},
                       {"top_logprobs", top}});
  }
  return {{"content", content}};
}

json tool_calls_json(const std::vector<ToolCallChunk>& calls) {
  json out = json::array();
  for (const auto& c : calls)
    out.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  return out;
}

// OpenAI's finish_reason: a call forced by a named tool_choice ends with "stop" (as OpenAI
// answers), one made under auto or required with "tool_calls".
std::string finish_for_client(const std::string& reason, bool named_tool) {
  if (reason == "error") throw HttpError(500, "generation failed");
  if (reason == "cancelled") return "stop";
  if (reason == "tool_calls" && named_tool) return "stop";
  return reason;
}

ChatRequest parse_chat(const httplib::Request& http_req, const json& body, const LoadedModel& model) {
  ChatRequest r;
  r.render.messages = normalize_messages(body);
  r.render.tools = parse_function_tools(body);
  if (const json* tc = field(body, "tool_choice")) {
    if (tc->is_string()) {
      const std::string s = tc->get<std::string>();
      if (s == "auto") r.tool_choice = ToolChoice::auto_;
      else if (s == "none") r.tool_choice = ToolChoice::none;
      else if (s == "required") r.tool_choice = ToolChoice::required;
      else bad_request("tool_choice", str_cat("tool_choice '", s, "' is not auto, none, required or an object"));
    } else if (tc->is_object() && tc->contains("function") && (*tc)["function"].is_object() &&
               (*tc)["function"].contains("name") && (*tc)["function"]["name"].is_string()) {
      r.tool_choice = ToolChoice::named;
      r.tool_name = (*tc)["function"]["name"].get<std::string>();
    } else {
      bad_request("tool_choice", "tool_choice must be a string or {type: function, function: {name}}");
    }
  }
  if (auto p = get_bool(body, "parallel_tool_calls")) r.parallel_tool_calls = *p;
  parse_response_format(body, r.json_object, r.json_schema);
  if (const json* kw = field(body, "chat_template_kwargs")) {
    if (!kw->is_object()) bad_request("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    r.render.kwargs = *kw;
  }
  r.max_tokens = get_int(body, "max_completion_tokens", INT32_MIN, INT32_MAX);
  if (r.max_tokens) {
    r.max_tokens_param = "max_completion_tokens";
  } else {
    r.max_tokens = get_int(body, "max_tokens", INT32_MIN, INT32_MAX);
  }
  parse_sampling(body, r.sampling, model.scheduler->n_vocab());
  r.draft_max = parse_speculative(body);
  r.stop = parse_stop(body, "stop");
  r.n = int32_t(get_int(body, "n", 1, 16).value_or(1));
  if (get_bool(body, "logprobs").value_or(false))
    r.logprobs = int32_t(get_int(body, "top_logprobs", 0, 20).value_or(0));
  else if (field(body, "top_logprobs"))
    bad_request("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  r.stream = get_bool(body, "stream").value_or(false);
  r.ignore_eos = get_bool(body, "ignore_eos").value_or(false);
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) bad_request("stream_options", "'stream_options' must be an object");
    r.include_usage = get_bool(*so, "include_usage").value_or(false);
  }
  r.session = session_key(http_req, get_string(body, "user").value_or(""));
  return r;
}

void chat_completions(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  check_not_draining(state);
  json body = parse_body(req.body);
  auto model_name = get_string(body, "model").value_or("");
  auto model = state.registry->get(model_name);
  ChatRequest chat = parse_chat(req, body, *model);
  const bool stream = chat.stream, include_usage = chat.include_usage;
  const bool named_tool = chat.tool_choice == ToolChoice::named;
  PreparedChat prep = prepare_chat(*model, std::move(chat), state.options.max_tokens_ceiling);
  prep.spec.arrival = request_arrival_time();
  auto inflight = std::make_shared<InFlight>(state);
  auto job = start_generation(*model, std::move(prep.spec), &state.metrics);
  const std::string id = random_id("chatcmpl-");
  const int64_t created = unix_now();
  const std::string name = model->name;

  if (!stream) {
    auto results = collect_choices(*job, kStallTimeout, client_disconnect_probe());
    json choices = json::array();
    for (size_t i = 0; i < results.size(); ++i) {
      auto& r = results[i];
      if (r.finish_reason == "error") throw HttpError(500, str_cat("generation failed: ", r.result.error));
      json msg = {{"role", "assistant"}, {"content", r.content}, {"refusal", nullptr}};
      if (!r.reasoning.empty()) msg["reasoning_content"] = msg["reasoning"] = r.reasoning;
      if (!r.tool_calls.empty()) {
        msg["tool_calls"] = tool_calls_json(r.tool_calls);
        if (r.content.empty()) msg["content"] = nullptr;
      }
      choices.push_back({{"index", i},
                         {"message", msg},
                         {"logprobs", r.logprobs.empty() ? json(nullptr) : logprobs_json(r.logprobs)},
                         {"finish_reason", finish_for_client(r.finish_reason, named_tool)}});
    }
    reply_json(res, {{"id", id},
                     {"object", "chat.completion"},
                     {"created", created},
                     {"model", name},
                     {"system_fingerprint", "brisk-" BRISK_VERSION},
                     {"choices", choices},
                     {"usage", usage_json(results)},
                     {"timings", timings_json(results)}});
    return;
  }

  struct StreamState {
    std::vector<ChoiceResult> totals;
    std::vector<int32_t> tool_calls_seen;
  };
  auto ss = std::make_shared<StreamState>();
  ss->totals.resize(size_t(job->n));
  auto chunk = [=](json choices) {
    json c = {{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", name},
              {"system_fingerprint", "brisk-" BRISK_VERSION}, {"choices", std::move(choices)}};
    if (include_usage) c["usage"] = nullptr;
    return c;
  };
  const int32_t n = job->n;
  SseFormatter fmt;
  fmt.start = [=] {
    std::string out;
    for (int32_t i = 0; i < n; ++i)
      out += sse_data(chunk(json::array({{{"index", i},
                                          {"delta", {{"role", "assistant"}, {"content", ""}, {"refusal", nullptr}}},
                                          {"logprobs", nullptr},
                                          {"finish_reason", nullptr}}})));
    return out;
  };
  fmt.event = [=](const ChoiceEvent& ev) {
    ChoiceResult& tot = ss->totals[size_t(ev.choice)];
    if (ev.end) {
      tot.result = ev.result;
      if (ev.finish_reason == "error") {
        json err = error_body(Dialect::openai, 500, str_cat("generation failed: ", ev.result.error));
        return sse_data(err);
      }
      const std::string reason = finish_for_client(ev.finish_reason, named_tool);
      return sse_data(chunk(json::array(
          {{{"index", ev.choice}, {"delta", json::object()}, {"logprobs", nullptr}, {"finish_reason", reason}}})));
    }
    json delta = json::object();
    if (!ev.content.empty()) delta["content"] = ev.content;
    if (!ev.reasoning.empty()) delta["reasoning_content"] = delta["reasoning"] = ev.reasoning;
    if (!ev.tool_calls.empty()) {
      json tcs = json::array();
      for (const auto& t : ev.tool_calls) {
        json d = {{"index", t.index}, {"function", {{"arguments", t.arguments}}}};
        if (!t.id.empty()) d["id"] = t.id, d["type"] = "function";
        if (!t.name.empty()) d["function"]["name"] = t.name;
        tcs.push_back(std::move(d));
      }
      delta["tool_calls"] = std::move(tcs);
    }
    return sse_data(chunk(json::array({{{"index", ev.choice},
                                        {"delta", delta},
                                        {"logprobs", ev.logprobs.empty() ? json(nullptr) : logprobs_json(ev.logprobs)},
                                        {"finish_reason", nullptr}}})));
  };
  fmt.finish = [=] {
    std::string out;
    if (include_usage) {
      json c = chunk(json::array());
      c["usage"] = usage_json(ss->totals);
      out += sse_data(c);
    }
    return out + "data: [DONE]\n\n";
  };
  stream_job(res, std::move(job), std::move(fmt), std::make_shared<std::pair<std::shared_ptr<InFlight>, std::shared_ptr<LoadedModel>>>(inflight, model));
}

void completions(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  check_not_draining(state);
  json body = parse_body(req.body);
  auto model = state.registry->get(get_string(body, "model").value_or(""));
  const json* prompt = field(body, "prompt");
  if (!prompt) bad_request("prompt", "'prompt' is required");
  GenerationSpec spec;
  if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string()) prompt = &(*prompt)[0];
  if (prompt->is_string()) {
    spec.prompt = tokenize_prompt(*model, prompt->get<std::string>(), true, "prompt");
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number_integer()) {
    for (const auto& t : *prompt) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= model->scheduler->n_vocab())
        bad_request("prompt", str_cat("prompt token ids must be integers in [0, ", model->scheduler->n_vocab(), ")"));
      spec.prompt.push_back(t.get<int32_t>());
    }
  } else {
    bad_request("prompt", "'prompt' must be a string, a one-element array of strings, or an array of token ids");
  }
  if (spec.prompt.empty()) bad_request("prompt", "the prompt is empty");
  const int32_t ceiling = state.options.max_tokens_ceiling > 0 ? state.options.max_tokens_ceiling : model->n_ctx;
  spec.max_tokens = resolve_max_tokens(*model, spec.prompt.size(),
                                       get_int(body, "max_tokens", INT32_MIN, INT32_MAX).value_or(16), ceiling,
                                       "max_tokens");
  parse_sampling(body, spec.sampling, model->scheduler->n_vocab());
  spec.draft_max = parse_speculative(body);
  spec.stop = parse_stop(body, "stop");
  spec.n = int32_t(get_int(body, "n", 1, 16).value_or(1));
  if (auto lp = get_int(body, "logprobs", 0, 20)) spec.logprobs = int32_t(*lp);
  spec.session = session_key(req, get_string(body, "user").value_or(""));
  spec.ignore_eos = get_bool(body, "ignore_eos").value_or(false);
  bool json_object = false;
  std::shared_ptr<const CompiledSchema> schema;
  parse_response_format(body, json_object, schema);
  if (schema) {
    LoadedModel* m = model.get();
    spec.make_constraint = [m, schema] { return make_schema_constraint(*m, schema); };
  } else if (json_object) {
    LoadedModel* m = model.get();
    spec.make_constraint = [m] { return make_json_constraint(*m); };
  }
  const bool stream = get_bool(body, "stream").value_or(false);
  bool include_usage = false;
  if (const json* so = field(body, "stream_options"))
    include_usage = so->is_object() && get_bool(*so, "include_usage").value_or(false);
  spec.arrival = request_arrival_time();
  auto inflight = std::make_shared<InFlight>(state);
  auto job = start_generation(*model, std::move(spec), &state.metrics);
  const std::string id = random_id("cmpl-");
  const int64_t created = unix_now();
  const std::string name = model->name;
  auto lp_json = [](const std::vector<LogprobEntry>& lps) -> json {
    if (lps.empty()) return nullptr;
    json tokens = json::array(), lp = json::array(), top = json::array();
    for (const auto& e : lps) {
      tokens.push_back(e.token);
      lp.push_back(e.logprob);
      json t = json::object();
      for (const auto& [s, v] : e.top) t[s] = v;
      top.push_back(t);
    }
    return {{"tokens", tokens}, {"token_logprobs", lp}, {"top_logprobs", top}};
  };
  if (!stream) {
    auto results = collect_choices(*job, kStallTimeout, client_disconnect_probe());
    json choices = json::array();
    for (size_t i = 0; i < results.size(); ++i) {
      choices.push_back({{"index", i},
                         {"text", results[i].content},
                         {"logprobs", lp_json(results[i].logprobs)},
                         {"finish_reason", finish_for_client(results[i].finish_reason, false)}});
    }
    reply_json(res, {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", name},
                     {"choices", choices}, {"usage", usage_json(results)}, {"timings", timings_json(results)}});
    return;
  }
  auto totals = std::make_shared<std::vector<ChoiceResult>>(size_t(job->n));
  SseFormatter fmt;
  fmt.start = [] { return std::string(); };
  fmt.event = [=](const ChoiceEvent& ev) {
    json c = {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", name}};
    if (ev.end) {
      (*totals)[size_t(ev.choice)].result = ev.result;
      if (ev.finish_reason == "error")
        return sse_data(error_body(Dialect::openai, 500, str_cat("generation failed: ", ev.result.error)));
    }
    c["choices"] = json::array({{{"index", ev.choice},
                                 {"text", ev.content},
                                 {"logprobs", lp_json(ev.logprobs)},
                                 {"finish_reason", ev.end ? json(ev.finish_reason == "cancelled" ? "stop" : ev.finish_reason)
                                                          : json(nullptr)}}});
    return sse_data(c);
  };
  fmt.finish = [=] {
    std::string out;
    if (include_usage)
      out += sse_data({{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", name},
                       {"choices", json::array()}, {"usage", usage_json(*totals)}});
    return out + "data: [DONE]\n\n";
  };
  stream_job(res, std::move(job), std::move(fmt),
             std::make_shared<std::pair<std::shared_ptr<InFlight>, std::shared_ptr<LoadedModel>>>(inflight, model));
}

void tokenize(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  json body = parse_body(req.body);
  auto model = state.registry->get(get_string(body, "model").value_or(""));
  std::string text;
  bool add_special = get_bool(body, "add_special").value_or(false);
  if (field(body, "messages")) {
    ChatRequest chat;
    chat.render.messages = normalize_messages(body);
    chat.render.add_generation_prompt = get_bool(body, "add_generation_prompt").value_or(true);
    if (const json* tools = field(body, "tools")) chat.render.tools = *tools;
    if (!model->render_chat) throw HttpError(400, str_cat("model '", model->name, "' has no chat template"), "model");
    text = model->render_chat(chat.render);
  } else {
    auto t = get_string(body, "content");
    if (!t) t = get_string(body, "prompt");
    if (!t) bad_request("content", "'content' (a string) or 'messages' is required");
    text = *t;
  }
  const auto ids = tokenize_prompt(*model, text, add_special, "content");
  json out = {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", model->n_ctx}};
  if (get_bool(body, "with_pieces").value_or(false)) {
    json pieces = json::array();
    for (int32_t id : ids) pieces.push_back({{"id", id}, {"piece", model->tokenizer->decode({id}, false)}});
    out["tokens"] = pieces;
  }
  reply_json(res, out);
}

void detokenize(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  json body = parse_body(req.body);
  auto model = state.registry->get(get_string(body, "model").value_or(""));
  const json* toks = field(body, "tokens");
  if (!toks || !toks->is_array()) bad_request("tokens", "'tokens' must be an array of token ids");
  std::vector<int32_t> ids;
  const int32_t n_vocab = model->tokenizer->vocab_size();
  for (const auto& t : *toks) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab)
      bad_request("tokens", str_cat("'tokens' entries must be token ids in [0, ", n_vocab, ")"));
    ids.push_back(t.get<int32_t>());
  }
  reply_json(res, {{"content", model->tokenizer->decode(ids, false)}});
}

json model_json(const ModelSpec& s, int64_t created) {
  return {{"id", s.name}, {"object", "model"}, {"created", created}, {"owned_by", "brisk"}};
}

// RFC 3339 UTC time of a unix timestamp.
std::string rfc3339(int64_t t) {
  const std::time_t tt = std::time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The Anthropic Models API's ModelInfo; the context is known only for a resident model.
json anthropic_model_json(const ModelSpec& s, const ServerState& st, int64_t created) {
  json max_input = nullptr;
  for (const auto& m : st.registry->resident())
    if (m->name == s.name) max_input = m->n_ctx;
  return {{"type", "model"},       {"id", s.name},          {"display_name", s.name},
          {"created_at", rfc3339(created)}, {"capabilities", nullptr}, {"deprecated_at", nullptr},
          {"lifecycle", "active"}, {"line", nullptr},       {"max_input_tokens", max_input},
          {"max_tokens", max_input}, {"retires_at", nullptr}};
}

}  // namespace

void register_openai_routes(httplib::Server& http, ServerState& state) {
  static const int64_t started = unix_now();
  ServerState* st = &state;
  // Anthropic clients list models on the same path; they send `anthropic-version`.
  add_get_route(http, state, "/v1/models", "/v1/models", Dialect::openai, [st](const httplib::Request& req, httplib::Response& res) {
    const bool anthropic = req.has_header("anthropic-version");
    json data = json::array();
    for (const auto& s : st->registry->specs())
      data.push_back(anthropic ? anthropic_model_json(s, *st, started) : model_json(s, started));
    if (!anthropic) return reply_json(res, {{"object", "list"}, {"data", data}});
    reply_json(res, {{"data", data},
                     {"has_more", false},
                     {"first_id", data.empty() ? json(nullptr) : data.front()["id"]},
                     {"last_id", data.empty() ? json(nullptr) : data.back()["id"]}});
  });
  add_get_route(http, state, "/v1/models/(.+)", "/v1/models/{id}", Dialect::openai, [st](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    const bool anthropic = req.has_header("anthropic-version");
    for (const auto& s : st->registry->specs())
      if (s.name == id) return reply_json(res, anthropic ? anthropic_model_json(s, *st, started) : model_json(s, started));
    if (anthropic) throw HttpError(404, str_cat("model: ", id));
    throw HttpError(404, str_cat("model '", id, "' does not exist"), "model");
  });
  auto post = [&](const char* path, void (*fn)(ServerState&, const httplib::Request&, httplib::Response&)) {
    add_post_route(http, state, path, path, Dialect::openai,
                   [st, fn](const httplib::Request& req, httplib::Response& res) { fn(*st, req, res); });
  };
  post("/v1/chat/completions", chat_completions);
  post("/v1/completions", completions);
  post("/tokenize", tokenize);
  post("/detokenize", detokenize);
}

}  // namespace brisk::server
