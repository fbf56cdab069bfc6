// OpenAI Responses API: POST /v1/responses (one JSON body, or the stream of typed events:
// response.created / in_progress, output_item.added, content_part.added, output_text.delta,
// reasoning_text.delta, function_call_arguments.delta, the matching .done events, then
// response.completed or response.incomplete), GET and DELETE /v1/responses/{id}.
//
// A request becomes a chat request in the OpenAI message convention: `instructions` a system
// message (never carried over to a later response), `previous_response_id` the stored history
// of that response (ResponseStore, in memory), `input` a string or a list of items (messages
// with input_text / output_text parts, function_call, function_call_output, reasoning), flat
// function `tools`, `tool_choice`, `text.format` (json_object, json_schema), reasoning.effort
// "none" / "minimal" turning the template's thinking off. One output message, reasoning and
// function calls come back as output items; max_output_tokens reached makes the response
// "incomplete".
#include <chrono>

#include "core/error.h"
#include "server/chat_request.h"
#include "server/json_fields.h"
#include "server/response_store.h"
#include "server/route_util.h"
#include "server/sse.h"

namespace brisk::server {
namespace {

constexpr auto kResponsesStallTimeout = std::chrono::minutes(10);

// Text of a message item's content: a string or a list of input_text / output_text parts.
std::string item_text(const json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad_request("input", where + ".content must be a string or an array of content parts");
  std::string out;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& p = content[i];
    const std::string type = p.is_object() ? p.value("type", "") : "";
    if ((type == "input_text" || type == "output_text" || type == "text") && p.contains("text") && p["text"].is_string())
      out += p["text"].get<std::string>();
    else if (type == "refusal" && p.contains("refusal") && p["refusal"].is_string())
      out += p["refusal"].get<std::string>();
    else
      bad_request("input", str_cat(where, ".content[", i, "]: part type '", type, "' is not supported (text parts only)"));
  }
  return out;
}

// A function call's arguments as chat templates expect them (an object when they parse).
json call_arguments(const std::string& text) {
  json parsed = json::parse(text, nullptr, false);
  return parsed.is_object() ? parsed : json(text);
}

// Appends `input` items to `messages` (OpenAI chat convention).
void append_input(json& messages, const json& input) {
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input.get<std::string>()}});
    return;
  }
  if (!input.is_array()) bad_request("input", "'input' must be a string or an array of items");
  std::string pending_reasoning;
  for (size_t i = 0; i < input.size(); ++i) {
    const json& it = input[i];
    const std::string where = str_cat("input[", i, "]");
    if (!it.is_object()) bad_request("input", where + " must be an object");
    std::string type = it.value("type", "");
    if (type.empty() && it.contains("role")) type = "message";
    if (type == "message") {
      const auto role = get_string(it, "role");
      if (!role || (*role != "user" && *role != "assistant" && *role != "system" && *role != "developer"))
        bad_request("input", where + ".role must be user, assistant, system or developer");
      const json* content = field(it, "content");
      if (!content) bad_request("input", where + ".content is missing");
      json m = {{"role", *role == "developer" ? "system" : *role}, {"content", item_text(*content, where)}};
      if (*role == "assistant" && !pending_reasoning.empty()) m["reasoning_content"] = std::exchange(pending_reasoning, "");
      messages.push_back(std::move(m));
    } else if (type == "function_call") {
      const auto name = get_string(it, "name");
      const auto call_id = get_string(it, "call_id");
      const auto args = get_string(it, "arguments");
      if (!name || !call_id || !args) bad_request("input", where + ": a function_call needs string name, call_id and arguments");
      json call = {{"type", "function"}, {"id", *call_id}, {"function", {{"name", *name}, {"arguments", call_arguments(*args)}}}};
      // Calls that follow an assistant message (or each other) belong to it.
      if (messages.empty() || messages.back().value("role", "") != "assistant")
        messages.push_back({{"role", "assistant"}, {"content", ""}});
      json& m = messages.back();
      if (!pending_reasoning.empty()) m["reasoning_content"] = std::exchange(pending_reasoning, "");
      if (!m.contains("tool_calls")) m["tool_calls"] = json::array();
      m["tool_calls"].push_back(std::move(call));
    } else if (type == "function_call_output") {
      const auto call_id = get_string(it, "call_id");
      const json* output = field(it, "output");
      if (!call_id || !output) bad_request("input", where + ": a function_call_output needs call_id and output");
      messages.push_back({{"role", "tool"}, {"tool_call_id", *call_id}, {"content", item_text(*output, where + ".output")}});
    } else if (type == "reasoning") {
      if (const json* c = field(it, "content"); c && c->is_array())
        for (const auto& p : *c)
          if (p.is_object() && p.contains("text") && p["text"].is_string()) pending_reasoning += p["text"].get<std::string>();
      if (pending_reasoning.empty())
        if (const json* s = field(it, "summary"); s && s->is_array())
          for (const auto& p : *s)
            if (p.is_object() && p.contains("text") && p["text"].is_string()) pending_reasoning += p["text"].get<std::string>();
    } else {
      bad_request("input", str_cat(where, ": item type '", type,
                                   "' is not supported (message, function_call, function_call_output, reasoning)"));
    }
  }
}

// Flat Responses function tools -> chat tools.
json responses_tools(const json& body) {
  const json* tools = field(body, "tools");
  if (!tools) return nullptr;
  if (!tools->is_array()) bad_request("tools", "'tools' must be an array");
  json out = json::array();
  for (size_t i = 0; i < tools->size(); ++i) {
    const json& t = (*tools)[i];
    const std::string type = t.is_object() ? t.value("type", "") : "";
    if (type != "function")
      bad_request("tools", str_cat("tools[", i, "]: tool type '", type, "' is not supported (function tools only)"));
    if (!t.contains("name") || !t["name"].is_string()) bad_request("tools", str_cat("tools[", i, "] needs a string 'name'"));
    json fn = {{"name", t["name"]}};
    if (t.contains("description") && t["description"].is_string()) fn["description"] = t["description"];
    fn["parameters"] = t.contains("parameters") && !t["parameters"].is_null() ? t["parameters"] : json{{"type", "object"}};
    if (t.contains("strict") && t["strict"].is_boolean()) fn["strict"] = t["strict"];
    out.push_back({{"type", "function"}, {"function", fn}});
  }
  return out.empty() ? json(nullptr) : out;
}

struct ResponsesRequest {
  ChatRequest chat;
  json history;            // messages before this request's input (previous_response_id)
  json input_messages;     // this request's input as messages
  bool store = true;
  json echo;               // request fields echoed in the response object
};

ResponsesRequest parse_responses(ServerState& state, const httplib::Request& http_req, const json& body,
                                 const LoadedModel& model) {
  ResponsesRequest out;
  ChatRequest& r = out.chat;
  for (const char* unsupported : {"background", "conversation", "prompt"})
    if (field(body, unsupported) && !(std::string(unsupported) == "background" && *field(body, unsupported) == false))
      bad_request(unsupported, str_cat("'", unsupported, "' is not supported by this server"));
  std::string session;
  out.history = json::array();
  if (auto prev = get_string(body, "previous_response_id")) {
    auto stored = state.responses->get(*prev);
    if (!stored)
      throw HttpError(404, str_cat("previous response '", *prev, "' is not stored on this server (kept in memory, ",
                                   state.options.stored_responses, " at most)"),
                      "previous_response_id");
    out.history = stored->history;
    session = stored->session;
  }
  out.input_messages = json::array();
  const json* input = field(body, "input");
  if (!input) bad_request("input", "'input' is required");
  append_input(out.input_messages, *input);
  json messages = json::array();
  if (auto ins = get_string(body, "instructions")) messages.push_back({{"role", "system"}, {"content", *ins}});
  for (const auto& m : out.history) messages.push_back(m);
  for (const auto& m : out.input_messages) messages.push_back(m);
  if (messages.empty()) bad_request("input", "the conversation is empty");
  r.render.messages = std::move(messages);
  r.render.tools = responses_tools(body);
  if (const json* tc = field(body, "tool_choice")) {
    if (tc->is_string()) {
      const std::string s = tc->get<std::string>();
      if (s == "auto") r.tool_choice = ToolChoice::auto_;
      else if (s == "none") r.tool_choice = ToolChoice::none;
      else if (s == "required") r.tool_choice = ToolChoice::required;
      else bad_request("tool_choice", str_cat("tool_choice '", s, "' is not auto, none, required or a function"));
    } else if (tc->is_object() && tc->value("type", "") == "function" && tc->contains("name") && (*tc)["name"].is_string()) {
      r.tool_choice = ToolChoice::named;
      r.tool_name = (*tc)["name"].get<std::string>();
    } else {
      bad_request("tool_choice", "tool_choice must be auto, none, required or {type: function, name}");
    }
  }
  if (auto p = get_bool(body, "parallel_tool_calls")) r.parallel_tool_calls = *p;
  if (const json* text = field(body, "text")) {
    if (!text->is_object()) bad_request("text", "'text' must be an object");
    if (const json* f = field(*text, "format")) {
      const std::string type = f->is_object() ? f->value("type", "") : "";
      if (type == "json_object") {
        r.json_object = true;
      } else if (type == "json_schema") {
        const json* schema = field(*f, "schema");
        if (!schema) bad_request("text.format", "text.format of type json_schema needs a 'schema'");
        r.json_object = true;
        r.json_schema = parse_json_schema(*schema, "text", "text.format.schema");
      } else if (type != "text") {
        bad_request("text.format", "text.format.type must be text, json_object or json_schema");
      }
    }
  }
  if (const json* re = field(body, "reasoning")) {
    if (!re->is_object()) bad_request("reasoning", "'reasoning' must be an object");
    if (auto effort = get_string(*re, "effort")) {
      if (*effort == "none" || *effort == "minimal") r.render.kwargs["enable_thinking"] = false;
      else if (*effort == "low" || *effort == "medium" || *effort == "high" || *effort == "xhigh")
        r.render.kwargs["enable_thinking"] = true;
      else bad_request("reasoning", str_cat("reasoning.effort '", *effort, "' is not none, minimal, low, medium, high or xhigh"));
    }
  }
  r.max_tokens = get_int(body, "max_output_tokens", INT32_MIN, INT32_MAX);
  r.max_tokens_param = "max_output_tokens";
  parse_sampling(body, r.sampling, model.scheduler->n_vocab());
  r.draft_max = parse_speculative(body);
  r.stream = get_bool(body, "stream").value_or(false);
  out.store = get_bool(body, "store").value_or(true);
  const std::string user = get_string(body, "prompt_cache_key").value_or(get_string(body, "user").value_or(""));
  r.session = session_key(http_req, user.empty() ? session : user);
  out.echo = {{"instructions", body.contains("instructions") ? body["instructions"] : json(nullptr)},
              {"max_output_tokens", body.contains("max_output_tokens") ? body["max_output_tokens"] : json(nullptr)},
              {"metadata", body.contains("metadata") && body["metadata"].is_object() ? body["metadata"] : json::object()},
              {"parallel_tool_calls", r.parallel_tool_calls},
              {"previous_response_id", body.contains("previous_response_id") ? body["previous_response_id"] : json(nullptr)},
              {"temperature", body.contains("temperature") ? body["temperature"] : json(nullptr)},
              {"top_p", body.contains("top_p") ? body["top_p"] : json(nullptr)},
              {"tool_choice", body.contains("tool_choice") ? body["tool_choice"] : json("auto")},
              {"tools", body.contains("tools") && body["tools"].is_array() ? body["tools"] : json::array()},
              {"text", body.contains("text") ? body["text"] : json{{"format", {{"type", "text"}}}}},
              {"reasoning", body.contains("reasoning") ? body["reasoning"] : json(nullptr)},
              {"store", out.store},
              {"truncation", "disabled"},
              {"user", body.contains("user") ? body["user"] : json(nullptr)}};
  return out;
}

json response_usage_json(const GenerationResult& r) {
  return {{"input_tokens", r.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", r.cached_tokens}}},
          {"output_tokens", r.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", r.prompt_tokens + r.completion_tokens}};
}

json message_item(const std::string& id, const std::string& text, const char* status) {
  return {{"type", "message"},
          {"id", id},
          {"status", status},
          {"role", "assistant"},
          {"content", json::array({{{"type", "output_text"}, {"text", text}, {"annotations", json::array()}, {"logprobs", json::array()}}})}};
}

json reasoning_item(const std::string& id, const std::string& text) {
  return {{"type", "reasoning"},
          {"id", id},
          {"summary", json::array()},
          {"content", json::array({{{"type", "reasoning_text"}, {"text", text}}})}};
}

json function_call_item(const std::string& id, const ToolCallChunk& c, const char* status) {
  return {{"type", "function_call"}, {"id", id}, {"call_id", c.id}, {"name", c.name}, {"arguments", c.arguments},
          {"status", status}};
}

// The response object around `output`.
json response_object(const std::string& id, int64_t created, const std::string& model, const json& echo,
                     const char* status, json output, const GenerationResult* result, bool truncated) {
  json r = {{"id", id},
            {"object", "response"},
            {"created_at", created},
            {"status", status},
            {"error", nullptr},
            {"incomplete_details", truncated ? json{{"reason", "max_output_tokens"}} : json(nullptr)},
            {"model", model},
            {"output", std::move(output)},
            {"usage", result ? response_usage_json(*result) : json(nullptr)}};
  for (auto it = echo.begin(); it != echo.end(); ++it) r[it.key()] = it.value();
  if (std::string(status) == "completed" || truncated) r["completed_at"] = unix_now();
  return r;
}

// The assistant turn of a response, as the next request's history holds it.
json assistant_message(const ChoiceResult& r) {
  json m = {{"role", "assistant"}, {"content", r.content}};
  if (!r.reasoning.empty()) m["reasoning_content"] = r.reasoning;
  if (!r.tool_calls.empty()) {
    json calls = json::array();
    for (const auto& c : r.tool_calls)
      calls.push_back({{"type", "function"}, {"id", c.id}, {"function", {{"name", c.name}, {"arguments", call_arguments(c.arguments)}}}});
    m["tool_calls"] = std::move(calls);
  }
  return m;
}

void store_response(ServerState& state, const ResponsesRequest& req, const json& response, const ChoiceResult& result) {
  if (!req.store) return;
  json history = req.history;
  for (const auto& m : req.input_messages) history.push_back(m);
  history.push_back(assistant_message(result));
  state.responses->put(response["id"].get<std::string>(),
                       StoredResponse{.response = response, .history = std::move(history), .session = req.chat.session});
}

// Streamed output: one open item at a time (reasoning, the message, or a function call); a
// change of kind closes it. Tracks what the final response object lists.
class ResponseEventWriter {
 public:
  explicit ResponseEventWriter(std::string response_id) : response_id_(std::move(response_id)) {}

  std::string event(const char* type, json e) {
    e["type"] = type;
    e["sequence_number"] = sequence_++;
    return sse_event(type, e);
  }

  std::string reasoning(const std::string& delta) {
    std::string out;
    if (open_ != Kind::reasoning) {
      out += close();
      open_item(Kind::reasoning, random_id("rs_"));
      out += event("response.output_item.added", {{"output_index", index_}, {"item", {{"type", "reasoning"}, {"id", item_id_}, {"summary", json::array()}, {"content", json::array()}}}});
      out += event("response.content_part.added", {{"item_id", item_id_}, {"output_index", index_}, {"content_index", 0},
                                                   {"part", {{"type", "reasoning_text"}, {"text", ""}}}});
    }
    text_ += delta;
    return out + event("response.reasoning_text.delta",
                       {{"item_id", item_id_}, {"output_index", index_}, {"content_index", 0}, {"delta", delta}});
  }

  std::string content(const std::string& delta) {
    std::string out;
    if (open_ != Kind::message) {
      out += close();
      open_item(Kind::message, random_id("msg_"));
      json item = message_item(item_id_, "", "in_progress");
      item["content"] = json::array();
      out += event("response.output_item.added", {{"output_index", index_}, {"item", item}});
      out += event("response.content_part.added",
                   {{"item_id", item_id_}, {"output_index", index_}, {"content_index", 0},
                    {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}, {"logprobs", json::array()}}}});
    }
    text_ += delta;
    return out + event("response.output_text.delta", {{"item_id", item_id_}, {"output_index", index_}, {"content_index", 0},
                                                      {"delta", delta}, {"logprobs", json::array()}});
  }

  std::string tool_call(const ToolCallChunk& t) {
    std::string out;
    if (open_ != Kind::call || call_index_ != t.index) {
      out += close();
      open_item(Kind::call, random_id("fc_"));
      call_index_ = t.index;
      call_ = ToolCallChunk{.index = t.index, .id = t.id, .name = t.name, .arguments = ""};
      out += event("response.output_item.added", {{"output_index", index_}, {"item", function_call_item(item_id_, call_, "in_progress")}});
    }
    if (!t.arguments.empty()) {
      call_.arguments += t.arguments;
      out += event("response.function_call_arguments.delta", {{"item_id", item_id_}, {"output_index", index_}, {"delta", t.arguments}});
    }
    return out;
  }

  // Ends the open item; `truncated`: generation stopped at max_output_tokens.
  std::string close(bool truncated = false) {
    std::string out;
    switch (open_) {
      case Kind::none:
        return out;
      case Kind::reasoning: {
        out += event("response.reasoning_text.done", {{"item_id", item_id_}, {"output_index", index_}, {"content_index", 0}, {"text", text_}});
        out += event("response.content_part.done", {{"item_id", item_id_}, {"output_index", index_}, {"content_index", 0},
                                                    {"part", {{"type", "reasoning_text"}, {"text", text_}}}});
        items_.push_back(reasoning_item(item_id_, text_));
        break;
      }
      case Kind::message: {
        out += event("response.output_text.done", {{"item_id", item_id_}, {"output_index", index_}, {"content_index", 0},
                                                   {"text", text_}, {"logprobs", json::array()}});
        json item = message_item(item_id_, text_, truncated ? "incomplete" : "completed");
        out += event("response.content_part.done",
                     {{"item_id", item_id_}, {"output_index", index_}, {"content_index", 0}, {"part", item["content"][0]}});
        items_.push_back(item);
        break;
      }
      case Kind::call: {
        out += event("response.function_call_arguments.done",
                     {{"item_id", item_id_}, {"output_index", index_}, {"name", call_.name}, {"arguments", call_.arguments}});
        items_.push_back(function_call_item(item_id_, call_, truncated ? "incomplete" : "completed"));
        break;
      }
    }
    out += event("response.output_item.done", {{"output_index", index_}, {"item", items_.back()}});
    open_ = Kind::none;
    return out;
  }

  const json& items() const { return items_; }

 private:
  enum class Kind { none, reasoning, message, call };
  void open_item(Kind k, std::string id) {
    open_ = k;
    item_id_ = std::move(id);
    index_ = int32_t(items_.size());
    text_.clear();
  }
  std::string response_id_;
  int64_t sequence_ = 0;
  Kind open_ = Kind::none;
  int32_t index_ = 0;
  std::string item_id_, text_;
  int32_t call_index_ = -1;
  ToolCallChunk call_;
  json items_ = json::array();
};

void create_response(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  check_not_draining(state);
  json body = parse_body(req.body);
  auto model = state.registry->get(get_string(body, "model").value_or(""));
  ResponsesRequest rr = parse_responses(state, req, body, *model);
  const bool stream = rr.chat.stream;
  PreparedChat prep = prepare_chat(*model, ChatRequest(rr.chat), state.options.max_tokens_ceiling);
  prep.spec.arrival = request_arrival_time();
  auto inflight = std::make_shared<InFlight>(state);
  auto job = start_generation(*model, std::move(prep.spec), &state.metrics);
  const std::string id = random_id("resp_");
  const int64_t created = unix_now();
  const std::string name = model->name;

  if (!stream) {
    auto results = collect_choices(*job, kResponsesStallTimeout, client_disconnect_probe());
    ChoiceResult& r = results.at(0);
    if (r.finish_reason == "error") throw HttpError(500, str_cat("generation failed: ", r.result.error));
    const bool truncated = r.finish_reason == "length";
    json output = json::array();
    if (!r.reasoning.empty()) output.push_back(reasoning_item(random_id("rs_"), r.reasoning));
    if (!r.content.empty() || r.tool_calls.empty())
      output.push_back(message_item(random_id("msg_"), r.content, truncated ? "incomplete" : "completed"));
    for (const auto& c : r.tool_calls) output.push_back(function_call_item(random_id("fc_"), c, truncated ? "incomplete" : "completed"));
    json response = response_object(id, created, name, rr.echo, truncated ? "incomplete" : "completed", std::move(output),
                                    &r.result, truncated);
    store_response(state, rr, response, r);
    reply_json(res, response);
    return;
  }

  struct StreamState {
    ResponseEventWriter writer;
    ChoiceResult total;
  };
  auto ss = std::make_shared<StreamState>(StreamState{ResponseEventWriter(id), {}});
  auto rr_shared = std::make_shared<ResponsesRequest>(std::move(rr));
  ServerState* st = &state;
  SseFormatter fmt;
  fmt.start = [=] {
    json initial = response_object(id, created, name, rr_shared->echo, "in_progress", json::array(), nullptr, false);
    std::string out = ss->writer.event("response.created", {{"response", initial}});
    return out + ss->writer.event("response.in_progress", {{"response", initial}});
  };
  fmt.event = [=](const ChoiceEvent& ev) {
    std::string out;
    ChoiceResult& tot = ss->total;
    if (!ev.reasoning.empty()) {
      tot.reasoning += ev.reasoning;
      out += ss->writer.reasoning(ev.reasoning);
    }
    if (!ev.content.empty()) {
      tot.content += ev.content;
      out += ss->writer.content(ev.content);
    }
    for (const auto& t : ev.tool_calls) {
      append_tool_call_delta(tot.tool_calls, t);
      out += ss->writer.tool_call(t);
    }
    if (ev.end) {
      tot.result = ev.result;
      tot.finish_reason = ev.finish_reason;
      if (ev.finish_reason == "error") {
        json failed = response_object(id, created, name, rr_shared->echo, "failed", ss->writer.items(), &ev.result, false);
        failed["error"] = {{"code", "server_error"}, {"message", str_cat("generation failed: ", ev.result.error)}};
        out += ss->writer.close();
        return out + ss->writer.event("response.failed", {{"response", failed}});
      }
      const bool truncated = ev.finish_reason == "length";
      if (ss->writer.items().empty() && tot.content.empty() && tot.tool_calls.empty()) out += ss->writer.content("");
      out += ss->writer.close(truncated);
      json final_response = response_object(id, created, name, rr_shared->echo, truncated ? "incomplete" : "completed",
                                            ss->writer.items(), &ev.result, truncated);
      store_response(*st, *rr_shared, final_response, tot);
      out += ss->writer.event(truncated ? "response.incomplete" : "response.completed", {{"response", final_response}});
    }
    return out;
  };
  fmt.finish = [] { return std::string(); };
  stream_job(res, std::move(job), std::move(fmt),
             std::make_shared<std::pair<std::shared_ptr<InFlight>, std::shared_ptr<LoadedModel>>>(inflight, model));
}

}  // namespace

void register_responses_routes(httplib::Server& http, ServerState& state) {
  ServerState* st = &state;
  add_post_route(http, state, "/v1/responses", "/v1/responses", Dialect::openai,
                 [st](const httplib::Request& req, httplib::Response& res) { create_response(*st, req, res); });
  add_get_route(http, state, "/v1/responses/([^/]+)", "/v1/responses/{id}", Dialect::openai,
                [st](const httplib::Request& req, httplib::Response& res) {
                  const std::string id = req.matches[1];
                  auto stored = st->responses->get(id);
                  if (!stored) throw HttpError(404, str_cat("response '", id, "' is not stored on this server"), "response_id");
                  reply_json(res, stored->response);
                });
  add_delete_route(http, state, "/v1/responses/([^/]+)", "/v1/responses/{id}", Dialect::openai,
                   [st](const httplib::Request& req, httplib::Response& res) {
                     const std::string id = req.matches[1];
                     if (!st->responses->erase(id))
                       throw HttpError(404, str_cat("response '", id, "' is not stored on this server"), "response_id");
                     reply_json(res, {{"id", id}, {"object", "response.deleted"}, {"deleted", true}});
                   });
}

}  // namespace brisk::server
