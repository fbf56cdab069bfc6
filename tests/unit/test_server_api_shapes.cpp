// Response shapes as the official clients expect them (refusal, finish_reason of a named
// tool_choice, a forced call cut by max_tokens, Anthropic thinking and model listing), and
// structured output that is refused rather than claimed when it cannot be enforced.
#include <gtest/gtest.h>

#include "fake_server.h"

using namespace brisk;
using namespace brisk::server;
using brisk::testing::chat_body;
using brisk::testing::post_json;
using brisk::testing::sse_payloads;
using brisk::testing::TestServer;
using nlohmann::json;

namespace {

const json kWeatherTools = {
    {{"type", "function"},
     {"function",
      {{"name", "get_weather"},
       {"parameters",
        {{"type", "object"},
         {"properties", {{"city", {{"type", "string"}, {"maxLength", 3}}}}},
         {"required", {"city"}},
         {"additionalProperties", false}}}}}},
    {{"type", "function"}, {"function", {{"name", "get_time"}, {"parameters", {{"type", "object"}}}}}}};

// Content and the finish reason of a streamed chat completion.
std::pair<std::string, std::string> stream_chat(httplib::Client& c, json body, json* first_delta = nullptr,
                                                json* tool_calls = nullptr) {
  body["stream"] = true;
  auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
  EXPECT_TRUE(r && r->status == 200);
  std::string content, finish;
  if (!r) return {content, finish};
  for (const auto& f : sse_payloads(r->body)) {
    if (f == "[DONE]") continue;
    const json j = json::parse(f);
    if (j["choices"].empty()) continue;
    const json& ch = j["choices"][0];
    if (first_delta && first_delta->is_null()) *first_delta = ch["delta"];
    if (ch["delta"].contains("content")) content += ch["delta"]["content"].get<std::string>();
    if (tool_calls && ch["delta"].contains("tool_calls"))
      for (const auto& t : ch["delta"]["tool_calls"]) tool_calls->push_back(t);
    if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
  }
  return {content, finish};
}

bool has_call_markup(const std::string& s) {
  return s.find("<tool_call>") != std::string::npos || s.find("{\"name\"") != std::string::npos;
}

}  // namespace

TEST(ServerApiShapes, OpenAIMessagesCarryRefusalNull) {
  TestServer ts;
  auto c = ts.client();
  json r = post_json(c, "/v1/chat/completions", chat_body("hi", 3));
  ASSERT_TRUE(r["choices"][0]["message"].contains("refusal"));
  EXPECT_TRUE(r["choices"][0]["message"]["refusal"].is_null());
  json first = nullptr;
  stream_chat(c, chat_body("hi", 3), &first);
  ASSERT_TRUE(first.contains("refusal")) << first;
  EXPECT_TRUE(first["refusal"].is_null());
  EXPECT_EQ(first["role"], "assistant");
}

TEST(ServerApiShapes, NamedToolChoiceEndsWithStopRequiredWithToolCalls) {
  TestServer ts;
  auto c = ts.client();
  json body = chat_body("weather?", 200);
  body["tools"] = kWeatherTools;
  body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  json r = post_json(c, "/v1/chat/completions", body);
  const json& ch = r["choices"][0];
  ASSERT_EQ(ch["message"]["tool_calls"].size(), 1u) << r;
  EXPECT_EQ(ch["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  const json args = json::parse(ch["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>());
  EXPECT_LE(args["city"].get<std::string>().size(), 3u);
  EXPECT_EQ(ch["finish_reason"], "stop");  // as OpenAI answers a named tool_choice
  json calls = json::array();
  EXPECT_EQ(stream_chat(c, body, nullptr, &calls).second, "stop");
  EXPECT_FALSE(calls.empty());

  body["tool_choice"] = "required";
  r = post_json(c, "/v1/chat/completions", body);
  EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls") << r;
  EXPECT_EQ(stream_chat(c, body).second, "tool_calls");
}

TEST(ServerApiShapes, ForcedCallCutByMaxTokensLeaksNoMarkup) {
  TestServer ts;
  auto c = ts.client();
  for (int max_tokens : {8, 20, 30, 40}) {
    json body = chat_body("weather?", max_tokens);
    body["tools"] = kWeatherTools;
    body["tool_choice"] = "required";
    json r = post_json(c, "/v1/chat/completions", body);
    const json& msg = r["choices"][0]["message"];
    EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
    const std::string content = msg["content"].is_string() ? msg["content"].get<std::string>() : "";
    EXPECT_FALSE(has_call_markup(content)) << max_tokens << ": " << r;
    const auto [streamed, finish] = stream_chat(c, body);
    EXPECT_EQ(finish, "length");
    EXPECT_FALSE(has_call_markup(streamed)) << max_tokens << ": " << streamed;

    json a = {{"model", "fake"},
              {"max_tokens", max_tokens},
              {"messages", {{{"role", "user"}, {"content", "weather?"}}}},
              {"tools", {{{"name", "get_weather"}, {"input_schema", kWeatherTools[0]["function"]["parameters"]}}}},
              {"tool_choice", {{"type", "any"}}}};
    json m = post_json(c, "/v1/messages", a);
    EXPECT_EQ(m["stop_reason"], "max_tokens");
    for (const auto& b : m["content"]) {
      if (b["type"] == "text") {
        EXPECT_FALSE(has_call_markup(b["text"].get<std::string>())) << m;
      }
      if (b["type"] == "tool_use") {
        EXPECT_TRUE(b["input"].is_object()) << m;
      }
    }
    a["stream"] = true;
    auto sr = c.Post("/v1/messages", a.dump(), "application/json");
    ASSERT_TRUE(sr);
    for (const auto& f : sse_payloads(sr->body)) {
      const json e = json::parse(f);
      if (e["type"] == "content_block_delta" && e["delta"]["type"] == "text_delta") {
        EXPECT_FALSE(has_call_markup(e["delta"]["text"].get<std::string>())) << sr->body;
      }
    }
  }
}

TEST(ServerApiShapes, AnthropicThinkingKindsAndModelList) {
  TestServer ts;
  auto c = ts.client();
  for (const char* kind : {"adaptive", "disabled", "between_tools"}) {
    json body = {{"model", "fake"}, {"max_tokens", 3}, {"messages", {{{"role", "user"}, {"content", "hi"}}}},
                 {"thinking", {{"type", kind}}}};
    post_json(c, "/v1/messages", body);
  }
  json body = {{"model", "fake"}, {"max_tokens", 3}, {"messages", {{{"role", "user"}, {"content", "hi"}}}},
               {"thinking", {{"type", "enabled"}}}};
  json e = post_json(c, "/v1/messages", body, 400);
  EXPECT_NE(e["error"]["message"].get<std::string>().find("budget_tokens"), std::string::npos) << e;
  body["thinking"] = {{"type", "sometimes"}};
  post_json(c, "/v1/messages", body, 400);

  auto r = c.Get("/v1/models", {{"anthropic-version", "2023-06-01"}});
  ASSERT_TRUE(r);
  const json list = json::parse(r->body);
  ASSERT_EQ(list["data"].size(), 1u) << list;
  EXPECT_EQ(list["data"][0]["type"], "model");
  EXPECT_EQ(list["data"][0]["id"], "fake");
  EXPECT_TRUE(list["data"][0]["display_name"].is_string());
  EXPECT_EQ(list["data"][0]["created_at"].get<std::string>().size(), 20u) << list;  // 2026-01-01T00:00:00Z
  EXPECT_EQ(list["has_more"], false);
  EXPECT_EQ(list["first_id"], "fake");
  EXPECT_EQ(list["last_id"], "fake");
  r = c.Get("/v1/models");
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["object"], "list");  // OpenAI clients keep their shape
  r = c.Get("/v1/models/fake", {{"anthropic-version", "2023-06-01"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["type"], "model");
}

TEST(ServerSchemas, UnenforcedOrInvalidSchemasAre400NamingKeywordAndPath) {
  TestServer ts;
  auto c = ts.client();
  const auto tool_body = [](const json& params, const json& tool_choice) {
    json b = chat_body("x", 4);
    b["tools"] = {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", params}}}}};
    b["tool_choice"] = tool_choice;
    return b;
  };
  struct Case {
    json body;
    std::string param, words;
  };
  const json with_not = {{"type", "object"}, {"properties", {{"a", {{"not", {{"type", "string"}}}}}}}};
  std::vector<Case> cases = {
      {tool_body({{"type", 42}}, "auto"), "tools", "tools[0].function.parameters"},
      {tool_body({{"type", "object"}, {"properties", {{"a", {{"type", "string"}}}}}, {"required", {"b"}}}, "required"),
       "tools", "\"b\""},
      {tool_body(with_not, {{"type", "function"}, {"function", {{"name", "f"}}}}), "tools",
       "#/properties/a"},
      {tool_body({{"type", "object"}, {"if", {{"required", {"a"}}}}, {"then", {{"required", {"b"}}}}}, "required"),
       "tools", "'if'"},
  };
  json rf = chat_body("x", 4);
  rf["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "n"}}}};
  cases.push_back({rf, "response_format", "schema"});
  rf["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "n"}, {"schema", with_not}}}};
  cases.push_back({rf, "response_format", "response_format.json_schema.schema: json schema: at #/properties/a: 'not'"});
  rf["response_format"]["json_schema"]["schema"] = {{"type", "object"}, {"patternProperties", {{"^x", {{"type", "string"}}}}}};
  cases.push_back({rf, "response_format", "patternProperties"});
  rf["response_format"]["json_schema"]["schema"] = {{"oneOf", {{{"type", "integer"}}, {{"type", "number"}, {"minimum", 0}}}}};
  cases.push_back({rf, "response_format", "oneOf"});
  for (const Case& k : cases) {
    json e = post_json(c, "/v1/chat/completions", k.body, 400);
    EXPECT_EQ(e["error"]["param"], k.param) << e;
    EXPECT_NE(e["error"]["message"].get<std::string>().find(k.words), std::string::npos) << k.words << " in " << e;
  }
  json a = {{"model", "fake"}, {"max_tokens", 4}, {"messages", {{{"role", "user"}, {"content", "x"}}}},
            {"output_config", {{"format", {{"type", "json_schema"}, {"schema", {{"type", "string"}, {"pattern", "^a+$"}}}}}}}};
  json e = post_json(c, "/v1/messages", a, 400);
  EXPECT_NE(e["error"]["message"].get<std::string>().find("'pattern'"), std::string::npos) << e;
}

TEST(ServerSchemas, NumericBoundsAndPropertyCountsAreEnforced) {
  TestServer ts;
  auto c = ts.client();
  json body = chat_body("numbers", 80);
  body["response_format"] = {
      {"type", "json_schema"},
      {"json_schema",
       {{"name", "n"},
        {"schema",
         {{"type", "object"},
          {"properties",
           {{"n", {{"type", "integer"}, {"minimum", 5}, {"exclusiveMaximum", 8}}},
            {"x", {{"type", "number"}, {"minimum", -1.5}, {"maximum", -0.25}}},
            {"m", {{"type", "object"}, {"maxProperties", 0}}}}},
          {"required", {"n", "x", "m"}},
          {"additionalProperties", false}}}}}};
  for (int seed = 0; seed < 4; ++seed) {
    body["seed"] = seed;
    body["temperature"] = 1.0;
    json r = post_json(c, "/v1/chat/completions", body);
    ASSERT_EQ(r["choices"][0]["finish_reason"], "stop") << r;
    const json v = json::parse(r["choices"][0]["message"]["content"].get<std::string>());
    EXPECT_GE(v["n"].get<int64_t>(), 5);
    EXPECT_LT(v["n"].get<int64_t>(), 8);
    EXPECT_GE(v["x"].get<double>(), -1.5);
    EXPECT_LE(v["x"].get<double>(), -0.25);
    EXPECT_TRUE(v["m"].empty()) << v;
  }
}
