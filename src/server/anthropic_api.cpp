// Anthropic dialect: POST /v1/messages (streamed with the message_start / content_block_* /
// message_delta / message_stop event sequence, or not) and POST /v1/messages/count_tokens.
// Requests are converted to the OpenAI message convention the chat templates expect:
// tool_use blocks become assistant tool_calls, tool_result blocks become `tool` messages,
// thinking blocks become reasoning_content.
#include <chrono>

#include "core/error.h"
#include "server/chat_request.h"
#include "server/json_fields.h"
#include "server/route_util.h"
#include "server/sse.h"

namespace brisk::server {
namespace {

constexpr auto kStallTimeout = std::chrono::minutes(10);

std::string blocks_text(const json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad_request("messages", where + " must be a string or an array of content blocks");
  std::string out;
  for (const auto& b : content) {
    if (!b.is_object() || b.value("type", "") != "text" || !b.contains("text") || !b["text"].is_string())
      bad_request("messages", where + ": only text blocks are allowed here");
    out += b["text"].get<std::string>();
  }
  return out;
}

json convert_messages(const json& body) {
  json out = json::array();
  if (const json* sys = field(body, "system")) out.push_back({{"role", "system"}, {"content", blocks_text(*sys, "system")}});
  const json* msgs = field(body, "messages");
  if (!msgs || !msgs->is_array() || msgs->empty()) bad_request("messages", "'messages' must be a non-empty array");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string where = str_cat("messages[", i, "]");
    if (!m.is_object()) bad_request("messages", where + " must be an object");
    const auto role = get_string(m, "role");
    if (!role || (*role != "user" && *role != "assistant"))
      bad_request("messages", where + ".role must be 'user' or 'assistant'");
    const json* content = field(m, "content");
    if (!content) bad_request("messages", where + ".content is missing");
    if (content->is_string()) {
      out.push_back({{"role", *role}, {"content", content->get<std::string>()}});
      continue;
    }
    if (!content->is_array()) bad_request("messages", where + ".content must be a string or an array of blocks");
    json msg = {{"role", *role}, {"content", ""}};
    std::string text, thinking;
    json calls = json::array();
    for (size_t j = 0; j < content->size(); ++j) {
      const json& b = (*content)[j];
      const std::string bw = str_cat(where, ".content[", j, "]");
      const std::string type = b.is_object() ? b.value("type", "") : "";
      if (type == "text" && b.contains("text") && b["text"].is_string()) {
        text += b["text"].get<std::string>();
      } else if (type == "thinking" && *role == "assistant") {
        if (b.contains("thinking") && b["thinking"].is_string()) thinking += b["thinking"].get<std::string>();
      } else if (type == "redacted_thinking") {
        // Opaque to a local model.
      } else if (type == "tool_use" && *role == "assistant") {
        if (!b.contains("name") || !b["name"].is_string()) bad_request("messages", bw + ".name must be a string");
        const json input = b.contains("input") ? b["input"] : json::object();
        calls.push_back({{"type", "function"},
                         {"id", b.value("id", "")},
                         {"function", {{"name", b["name"]}, {"arguments", input}}}});
      } else if (type == "tool_result" && *role == "user") {
        std::string result;
        if (b.contains("content") && !b["content"].is_null()) {
          const json& c = b["content"];
          if (c.is_string()) {
            result = c.get<std::string>();
          } else if (c.is_array()) {
            for (const auto& cb : c)
              if (cb.is_object() && cb.value("type", "") == "text" && cb.contains("text") && cb["text"].is_string())
                result += cb["text"].get<std::string>();
          } else {
            bad_request("messages", bw + ".content must be a string or text blocks");
          }
        }
        if (b.value("is_error", false)) result = "Error: " + result;
        out.push_back({{"role", "tool"}, {"tool_call_id", b.value("tool_use_id", "")}, {"content", result}});
      } else {
        bad_request("messages", str_cat(bw, ": block type '", type, "' is not supported for role ", *role));
      }
    }
    if (*role == "user" && text.empty() && calls.empty()) continue;  // only tool results
    msg["content"] = text;
    if (!thinking.empty()) msg["reasoning_content"] = thinking;
    if (!calls.empty()) msg["tool_calls"] = calls;
    out.push_back(std::move(msg));
  }
  return out;
}

json convert_tools(const json& body) {
  const json* tools = field(body, "tools");
  if (!tools) return nullptr;
  if (!tools->is_array()) bad_request("tools", "'tools' must be an array");
  json out = json::array();
  for (size_t i = 0; i < tools->size(); ++i) {
    const json& t = (*tools)[i];
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string())
      bad_request("tools", str_cat("tools[", i, "] needs a string 'name'"));
    json fn = {{"name", t["name"]}};
    if (t.contains("description") && t["description"].is_string()) fn["description"] = t["description"];
    fn["parameters"] = t.contains("input_schema") ? t["input_schema"] : json{{"type", "object"}};
    out.push_back({{"type", "function"}, {"function", fn}});
  }
  return out.empty() ? json(nullptr) : out;
}

ChatRequest parse_messages(const httplib::Request& http_req, const json& body, const LoadedModel& model,
                           bool for_count) {
  ChatRequest r;
  r.render.messages = convert_messages(body);
  r.render.tools = convert_tools(body);
  if (const json* tc = field(body, "tool_choice")) {
    const std::string type = tc->is_object() ? tc->value("type", "") : "";
    if (type == "auto") r.tool_choice = ToolChoice::auto_;
    else if (type == "any") r.tool_choice = ToolChoice::required;
    else if (type == "none") r.tool_choice = ToolChoice::none;
    else if (type == "tool" && tc->contains("name") && (*tc)["name"].is_string()) {
      r.tool_choice = ToolChoice::named;
      r.tool_name = (*tc)["name"].get<std::string>();
    } else {
      bad_request("tool_choice", "tool_choice must be {type: auto | any | none | tool (with name)}");
    }
    if (tc->value("disable_parallel_tool_use", false)) r.parallel_tool_calls = false;
  }
  // thinking: enabled (a budget; the model's own end of reasoning is kept), adaptive and
  // between_tools (the model decides when and how much: thinking on, as the template allows)
  // or disabled; display "omitted" returns thinking blocks without their text.
  if (const json* th = field(body, "thinking")) {
    const std::string type = th->is_object() ? th->value("type", "") : "";
    if (type == "enabled" || type == "adaptive" || type == "between_tools") r.render.kwargs["enable_thinking"] = true;
    else if (type == "disabled") r.render.kwargs["enable_thinking"] = false;
    else bad_request("thinking", "thinking.type must be 'enabled', 'adaptive', 'between_tools' or 'disabled'");
    if (type == "enabled") {
      const auto budget = get_int(*th, "budget_tokens", 1, INT32_MAX);
      if (!budget) bad_request("thinking", "thinking.budget_tokens is required with type 'enabled'");
    }
    if (const json* d = field(*th, "display")) {
      if (!d->is_string() || (*d != "summarized" && *d != "omitted"))
        bad_request("thinking", "thinking.display must be 'summarized' or 'omitted'");
      r.omit_thinking = *d == "omitted";
    }
  }
  if (for_count) return r;
  r.max_tokens = get_int(body, "max_tokens", INT32_MIN, INT32_MAX);
  if (!r.max_tokens) bad_request("max_tokens", "'max_tokens' is required");
  if (auto v = get_number(body, "temperature", 0.0, 1.0)) r.sampling.temperature = float(*v);
  if (auto v = get_number(body, "top_p", 0.0, 1.0)) r.sampling.top_p = float(*v);
  if (auto v = get_int(body, "top_k", -1, 1 << 20)) r.sampling.top_k = int32_t(*v);
  r.sampling.seed = fresh_sampling_seed();  // the Messages API has no seed
  r.draft_max = parse_speculative(body);
  r.stop = parse_stop(body, "stop_sequences");
  // Structured output: output_config.format, or the earlier output_format; {type: json_schema, schema}.
  const json* format = nullptr;
  const char* format_param = "output_config";
  if (const json* oc = field(body, "output_config")) {
    if (!oc->is_object()) bad_request("output_config", "'output_config' must be an object");
    format = field(*oc, "format");
  }
  if (!format) {
    format = field(body, "output_format");
    format_param = "output_format";
  }
  if (format) {
    if (!format->is_object() || format->value("type", json()) != "json_schema")
      bad_request(format_param, "the output format must be {type: json_schema, schema}");
    const json* schema = field(*format, "schema");
    if (!schema) bad_request(format_param, "the output format needs a 'schema'");
    r.json_object = true;
    r.json_schema = parse_json_schema(*schema, format_param, str_cat(format_param, format_param == std::string("output_config") ? ".format.schema" : ".schema"));
  }
  r.stream = get_bool(body, "stream").value_or(false);
  std::string user;
  if (const json* md = field(body, "metadata")) {
    if (!md->is_object()) bad_request("metadata", "'metadata' must be an object");
    user = get_string(*md, "user_id").value_or("");
  }
  r.session = session_key(http_req, user);
  (void)model;
  return r;
}

std::string stop_reason(const std::string& finish, const std::string& stop_sequence) {
  if (finish == "length") return "max_tokens";
  if (finish == "tool_calls") return "tool_use";
  if (!stop_sequence.empty()) return "stop_sequence";
  return "end_turn";
}

json usage_json(const GenerationResult& r) {
  return {{"input_tokens", r.prompt_tokens - r.cached_tokens},
          {"output_tokens", r.completion_tokens},
          {"cache_read_input_tokens", r.cached_tokens},
          {"cache_creation_input_tokens", 0}};
}

// A tool_use block's input: the call's arguments object; a call cut by max_tokens gives what
// its arguments hold so far (closed), an unreadable one the raw text under "arguments".
json tool_input(const std::string& arguments, bool truncated) {
  json j = json::parse(arguments, nullptr, false);
  if (j.is_object()) return j;
  if (truncated) {
    j = json::parse(close_partial_json(arguments), nullptr, false);
    return j.is_object() ? j : json::object();
  }
  return json{{"arguments", arguments}};
}

void messages(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  check_not_draining(state);
  json body = parse_body(req.body);
  auto model_name = get_string(body, "model");
  if (!model_name) bad_request("model", "'model' is required");
  auto model = state.registry->get(*model_name);
  ChatRequest chat = parse_messages(req, body, *model, false);
  chat.max_tokens_param = "max_tokens";
  const bool stream = chat.stream;
  const bool omit_thinking = chat.omit_thinking;
  PreparedChat prep = prepare_chat(*model, std::move(chat), state.options.max_tokens_ceiling);
  prep.spec.arrival = request_arrival_time();
  const int32_t prompt_tokens = int32_t(prep.spec.prompt.size());
  auto inflight = std::make_shared<InFlight>(state);
  auto job = start_generation(*model, std::move(prep.spec), &state.metrics);
  const std::string id = random_id("msg_");
  const std::string name = *model_name;

  if (!stream) {
    auto results = collect_choices(*job, kStallTimeout, client_disconnect_probe());
    ChoiceResult& r = results.at(0);
    if (r.finish_reason == "error") throw HttpError(500, str_cat("generation failed: ", r.result.error));
    json content = json::array();
    if (!r.reasoning.empty())
      content.push_back({{"type", "thinking"}, {"thinking", omit_thinking ? "" : r.reasoning}, {"signature", ""}});
    if (!r.content.empty()) content.push_back({{"type", "text"}, {"text", r.content}});
    for (const auto& c : r.tool_calls)
      content.push_back({{"type", "tool_use"},
                         {"id", c.id},
                         {"name", c.name},
                         {"input", tool_input(c.arguments, r.finish_reason == "length")}});
    reply_json(res, {{"id", id},
                     {"type", "message"},
                     {"role", "assistant"},
                     {"model", name},
                     {"content", content},
                     {"stop_reason", stop_reason(r.finish_reason, r.stop_sequence)},
                     {"stop_sequence", r.stop_sequence.empty() ? json(nullptr) : json(r.stop_sequence)},
                     {"usage", usage_json(r.result)}});
    return;
  }

  // Streaming: one open content block at a time; a change of kind closes it.
  struct Blocks {
    bool started = false;
    int32_t index = -1;
    std::string open;  // "", "text", "thinking", "tool_use"
    int32_t open_tool = -1;
  };
  auto bs = std::make_shared<Blocks>();
  SseFormatter fmt;
  auto start_message = [=](int32_t cached) {
    if (bs->started) return std::string();
    bs->started = true;
    json msg = {{"id", id}, {"type", "message"}, {"role", "assistant"}, {"model", name}, {"content", json::array()},
                {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                {"usage", {{"input_tokens", prompt_tokens - std::max(cached, 0)}, {"output_tokens", 0},
                           {"cache_read_input_tokens", std::max(cached, 0)}, {"cache_creation_input_tokens", 0}}}};
    return sse_event("message_start", {{"type", "message_start"}, {"message", msg}}) +
           sse_event("ping", {{"type", "ping"}});
  };
  auto close_block = [=] {
    if (bs->open.empty()) return std::string();
    bs->open.clear();
    return sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", bs->index}});
  };
  auto open_block = [=](const std::string& kind, json block) {
    std::string out = close_block();
    bs->open = kind;
    bs->index++;
    return out + sse_event("content_block_start",
                           {{"type", "content_block_start"}, {"index", bs->index}, {"content_block", block}});
  };
  fmt.start = [] { return std::string(); };
  fmt.event = [=](const ChoiceEvent& ev) {
    std::string out = start_message(ev.end ? ev.result.cached_tokens : ev.cached_tokens);
    auto delta = [&](json d) {
      return sse_event("content_block_delta", {{"type", "content_block_delta"}, {"index", bs->index}, {"delta", d}});
    };
    if (!ev.reasoning.empty()) {
      if (bs->open != "thinking") out += open_block("thinking", {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
      if (!omit_thinking) out += delta({{"type", "thinking_delta"}, {"thinking", ev.reasoning}});
    }
    if (!ev.content.empty()) {
      if (bs->open != "text") out += open_block("text", {{"type", "text"}, {"text", ""}});
      out += delta({{"type", "text_delta"}, {"text", ev.content}});
    }
    for (const auto& t : ev.tool_calls) {
      if (bs->open != "tool_use" || bs->open_tool != t.index) {
        out += open_block("tool_use", {{"type", "tool_use"}, {"id", t.id}, {"name", t.name}, {"input", json::object()}});
        bs->open_tool = t.index;
      }
      if (!t.arguments.empty()) out += delta({{"type", "input_json_delta"}, {"partial_json", t.arguments}});
    }
    if (ev.end) {
      out += close_block();
      if (ev.finish_reason == "error")
        return out + sse_event("error", error_body(Dialect::anthropic, 500, str_cat("generation failed: ", ev.result.error)));
      out += sse_event("message_delta",
                       {{"type", "message_delta"},
                        {"delta", {{"stop_reason", stop_reason(ev.finish_reason, ev.stop_sequence)},
                                   {"stop_sequence", ev.stop_sequence.empty() ? json(nullptr) : json(ev.stop_sequence)}}},
                        {"usage", usage_json(ev.result)}});
      out += sse_event("message_stop", {{"type", "message_stop"}});
    }
    return out;
  };
  fmt.finish = [] { return std::string(); };
  stream_job(res, std::move(job), std::move(fmt),
             std::make_shared<std::pair<std::shared_ptr<InFlight>, std::shared_ptr<LoadedModel>>>(inflight, model));
}

void count_tokens(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  json body = parse_body(req.body);
  auto model_name = get_string(body, "model");
  if (!model_name) bad_request("model", "'model' is required");
  auto model = state.registry->get(*model_name);
  ChatRequest chat = parse_messages(req, body, *model, true);
  if (!model->render_chat) throw HttpError(400, str_cat("model '", model->name, "' has no chat template"), "model");
  std::string text;
  try {
    text = model->render_chat(chat.render);
  } catch (const std::exception& e) {
    throw HttpError(400, str_cat("the chat template failed on these messages: ", e.what()), "messages");
  }
  reply_json(res, {{"input_tokens", tokenize_prompt(*model, text, false).size()}});
}

}  // namespace

void register_anthropic_routes(httplib::Server& http, ServerState& state) {
  ServerState* st = &state;
  add_post_route(http, state, "/v1/messages", "/v1/messages", Dialect::anthropic,
                 [st](const httplib::Request& req, httplib::Response& res) { messages(*st, req, res); });
  add_post_route(http, state, "/v1/messages/count_tokens", "/v1/messages/count_tokens", Dialect::anthropic,
                 [st](const httplib::Request& req, httplib::Response& res) { count_tokens(*st, req, res); });
}

}  // namespace brisk::server
