// The Ollama dialect of `brisk serve` on the fake engine: /api/chat and /api/generate (the
// answer the engine gives, NDJSON streaming equal to the one-object reply, options mapped to
// the sampler, format enforced), names with tags, keep_alive parsing and unloading, the model
// routes, the chat page's files, and errors in Ollama's shape.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <thread>

#include "fake_server.h"
#include "server/errors.h"
#include "server/ollama_common.h"

using namespace brisk;
using namespace brisk::server;
using brisk::testing::fake_answer;
using brisk::testing::TestServer;
using nlohmann::json;

namespace {

const std::string kOllamaPromptHi = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n";

httplib::Result ollama_post(httplib::Client& c, const std::string& path, const json& body) {
  return c.Post(path.c_str(), body.dump(), "application/json");
}

json ollama_chat_body(const std::string& text, int num_predict) {
  return {{"model", "fake"},
          {"messages", {{{"role", "user"}, {"content", text}}}},
          {"options", {{"temperature", 0}, {"num_predict", num_predict}}}};
}

json with_field(json body, const std::string& key, json value) {
  body[key] = std::move(value);
  return body;
}

std::vector<json> ndjson(const std::string& body) {
  std::vector<json> out;
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line, nullptr, false));
  return out;
}

}  // namespace

TEST(ServerOllama, ChatAnswersAsTheEngineStreamedOrNot) {
  TestServer ts;
  auto c = ts.client();
  json body = ollama_chat_body("hi", 12);
  body["stream"] = false;
  auto r = ollama_post(c, "/api/chat", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json one = json::parse(r->body);
  EXPECT_EQ(one["model"], "fake");
  EXPECT_EQ(one["message"]["role"], "assistant");
  EXPECT_EQ(one["message"]["content"], fake_answer(kOllamaPromptHi, 12));
  EXPECT_EQ(one["done"], true);
  EXPECT_EQ(one["done_reason"], "length");
  EXPECT_EQ(one["eval_count"], 12);
  EXPECT_EQ(one["prompt_eval_count"], 21);
  for (const char* k : {"total_duration", "load_duration", "prompt_eval_duration", "eval_duration"})
    EXPECT_TRUE(one[k].is_number_integer() && one[k].get<int64_t>() >= 0) << k;
  EXPECT_TRUE(one["created_at"].is_string());

  body.erase("stream");  // streamed by default
  r = ollama_post(c, "/api/chat", body);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/x-ndjson");
  const auto parts = ndjson(r->body);
  ASSERT_GE(parts.size(), 2u) << r->body;
  std::string text;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    EXPECT_EQ(parts[i]["done"], false);
    text += parts[i]["message"]["content"].get<std::string>();
  }
  EXPECT_EQ(text, one["message"]["content"]);
  EXPECT_EQ(parts.back()["done"], true);
  EXPECT_EQ(parts.back()["eval_count"], 12);
  // The name as Ollama clients write it, echoed back.
  body["model"] = "fake:latest";
  body["stream"] = false;
  r = ollama_post(c, "/api/chat", body);
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["model"], "fake:latest");
}

TEST(ServerOllama, GenerateRawAndTemplatedWithContext) {
  TestServer ts;
  auto c = ts.client();
  auto r = ollama_post(c, "/api/generate", {{"model", "fake"}, {"prompt", "hi"}, {"stream", false},
                                            {"options", {{"temperature", 0}, {"num_predict", 5}}}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json g = json::parse(r->body);
  EXPECT_EQ(g["response"], fake_answer(kOllamaPromptHi, 5));
  ASSERT_TRUE(g["context"].is_array());
  EXPECT_EQ(g["context"].size(), 21u + 5u);  // the prompt's ids, then the answer's
  // raw: the prompt as written.
  r = ollama_post(c, "/api/generate", {{"model", "fake"}, {"prompt", "abc"}, {"raw", true}, {"stream", false},
                                       {"options", {{"temperature", 0}, {"num_predict", 4}}}});
  ASSERT_TRUE(r);
  g = json::parse(r->body);
  EXPECT_EQ(g["response"], fake_answer("<|im_start|>abc", 4));
  // options.stop ends the answer before the stop string.
  const std::string full = fake_answer(kOllamaPromptHi, 12);
  const std::string stop = full.substr(6, 2);
  r = ollama_post(c, "/api/generate", {{"model", "fake"}, {"prompt", "hi"}, {"stream", false},
                                       {"options", {{"temperature", 0}, {"num_predict", 12}, {"stop", {stop}}}}});
  ASSERT_TRUE(r);
  g = json::parse(r->body);
  EXPECT_EQ(g["response"], full.substr(0, full.find(stop)));
  EXPECT_EQ(g["done_reason"], "stop");
  // num_ctx bounds prompt + answer.
  r = ollama_post(c, "/api/generate", {{"model", "fake"}, {"prompt", "hi"}, {"stream", false},
                                       {"options", {{"temperature", 0}, {"num_predict", 12}, {"num_ctx", 24}}}});
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["eval_count"], 3);
}

TEST(ServerOllama, FormatSchemaIsEnforced) {
  TestServer ts;
  auto c = ts.client();
  json body = ollama_chat_body("hi", 40);
  body["stream"] = false;
  body["format"] = {{"type", "object"},
                    {"properties", {{"a", {{"type", "string"}, {"maxLength", 4}}}}},
                    {"required", {"a"}},
                    {"additionalProperties", false}};
  auto r = ollama_post(c, "/api/chat", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json out = json::parse(json::parse(r->body)["message"]["content"].get<std::string>());
  EXPECT_LE(out["a"].get<std::string>().size(), 4u);
}

TEST(ServerOllama, BadInputIsAnOllamaError) {
  TestServer ts;
  auto c = ts.client();
  const json base = ollama_chat_body("hi", 4);
  const std::vector<std::pair<json, int>> cases = {
      {json::object({{"model", "nope"}, {"messages", base["messages"]}}), 404},
      {with_field(base, "messages", {{{"role", "user"}, {"content", "x"}, {"images", {"aGk="}}}}), 400},
      {with_field(base, "options", {{"top_k", "many"}}), 400},
      {with_field(base, "options", {{"typical_p", 0.5}}), 400},
      {with_field(base, "format", "xml"), 400},
      {with_field(base, "keep_alive", "5 minutes"), 400},
      {with_field(base, "think", 3), 400},
      {with_field(base, "tools", {{{"type", 1}, {"function", {{"name", "f"}}}}}), 400},
  };
  for (const auto& [body, status] : cases) {
    auto r = ollama_post(c, "/api/chat", body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << body << " -> " << r->body;
    const json e = json::parse(r->body, nullptr, false);
    EXPECT_TRUE(e.is_object() && e.size() == 1 && e["error"].is_string()) << r->body;
  }
  auto r = ollama_post(c, "/api/embed", {{"model", "fake"}, {"input", "x"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("embeddings are not supported by this model"), std::string::npos);
  r = c.Post("/api/chat", "{oops", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_TRUE(json::parse(r->body)["error"].is_string());
}

TEST(ServerOllama, ModelRoutesAndKeepAliveZero) {
  TestServer ts({}, {"fake", "org/other:Q8_0"});
  auto c = ts.client();
  auto tags = c.Get("/api/tags");
  ASSERT_TRUE(tags);
  const json t = json::parse(tags->body);
  ASSERT_EQ(t["models"].size(), 2u);
  EXPECT_EQ(t["models"][0]["name"], "fake:latest");
  EXPECT_EQ(t["models"][1]["name"], "org/other:Q8_0");
  EXPECT_EQ(ts.loads, 0);  // listing loads nothing
  // A load-only request, then ps lists it; keep_alive 0 unloads it after the request.
  auto r = ollama_post(c, "/api/generate", {{"model", "fake:latest"}, {"stream", false}});
  ASSERT_TRUE(r);
  EXPECT_EQ(json::parse(r->body)["done_reason"], "load");
  auto ps = c.Get("/api/ps");
  ASSERT_TRUE(ps);
  EXPECT_EQ(json::parse(ps->body)["models"].size(), 1u);
  json body = ollama_chat_body("hi", 3);
  body["keep_alive"] = 0;
  r = ollama_post(c, "/api/chat", body);  // streamed: unloaded once the reply is done with
  ASSERT_TRUE(r);
  size_t resident = 1;
  for (int i = 0; i < 100 && resident != 0; ++i) {
    ps = c.Get("/api/ps");
    ASSERT_TRUE(ps);
    resident = json::parse(ps->body)["models"].size();
    if (resident) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(resident, 0u);
  auto show = ollama_post(c, "/api/show", {{"model", "fake"}});
  ASSERT_TRUE(show);
  const json s = json::parse(show->body);
  EXPECT_TRUE(s["template"].is_string());
  EXPECT_NE(std::find(s["capabilities"].begin(), s["capabilities"].end(), "tools"), s["capabilities"].end());
  auto v = c.Get("/api/version");
  ASSERT_TRUE(v);
  EXPECT_TRUE(json::parse(v->body)["version"].is_string());
  auto del = c.Delete("/api/delete", json({{"model", "fake"}}).dump(), "application/json");
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 400);  // a command-line model is not deleted
}

TEST(ServerOllama, ChatPageIsServedWithAnETag) {
  ServerOptions with_key;
  with_key.api_key = "k";
  TestServer ts(with_key);
  auto c = ts.client();
  auto r = c.Get("/");  // no key needed for the page
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  const std::string etag = r->get_header_value("ETag");
  ASSERT_FALSE(etag.empty());
  EXPECT_NE(r->body.find("/webui/app.js"), std::string::npos);
  auto again = c.Get("/", {{"If-None-Match", etag}});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 304);
  auto js = c.Get("/webui/markdown.js");
  ASSERT_TRUE(js);
  EXPECT_EQ(js->status, 200);
  auto api = c.Get("/api/tags");
  ASSERT_TRUE(api);
  EXPECT_EQ(api->status, 401);
  EXPECT_TRUE(json::parse(api->body)["error"].is_string()) << api->body;  // Ollama's shape
  ServerOptions page_off;
  page_off.webui = false;
  TestServer off(page_off);
  auto c2 = off.client();
  r = c2.Get("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "brisk is running\n");
  EXPECT_EQ(c2.Get("/webui/app.js")->status, 404);
}

TEST(OllamaCommon, ToolCallsHaveObjectArguments) {
  const json calls = ollama_tool_calls({{.index = 0, .id = "call_a", .name = "get_weather", .arguments = R"({"city": "Oslo"})"},
                                        {.index = 1, .id = "call_b", .name = "cut", .arguments = R"({"a": 1, "b": "xy)"},
                                        {.index = 2, .id = "call_c", .name = "junk", .arguments = "not json"}});
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0]["id"], "call_a");
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(calls[0]["function"]["arguments"], json({{"city", "Oslo"}}));
  EXPECT_EQ(calls[1]["function"]["index"], 1);
  EXPECT_EQ(calls[1]["function"]["arguments"]["a"], 1);  // cut short: what was written, closed
  EXPECT_EQ(calls[2]["function"]["arguments"], json::object());
}

TEST(OllamaCommon, KeepAliveNamesAndOptions) {
  auto ka = [](json v) { return parse_keep_alive({{"keep_alive", v}}); };
  EXPECT_EQ(ka("5m"), 300.0);
  EXPECT_EQ(ka("1h30m"), 5400.0);
  EXPECT_EQ(ka("300ms"), 0.3);
  EXPECT_EQ(ka("-1"), -1.0);
  EXPECT_EQ(ka(0), 0.0);
  EXPECT_EQ(ka("-1m"), -60.0);
  EXPECT_FALSE(parse_keep_alive(json::object()).has_value());
  for (json bad : {json("5 m"), json("m"), json(""), json("1e999"), json("5d"), json::array(), json(true)})
    EXPECT_THROW(ka(bad), HttpError) << bad;

  EXPECT_EQ(ollama_listed_name("qwen3"), "qwen3:latest");
  EXPECT_EQ(ollama_listed_name("org/name:Q8_0"), "org/name:Q8_0");
  EXPECT_EQ(ollama_listed_name("host:8080/org/name"), "host:8080/org/name:latest");

  SamplerParams p;
  const OllamaOptions o = parse_ollama_options(
      {{"options", {{"temperature", 0.3}, {"top_k", 7}, {"top_p", 0.5}, {"min_p", 0.1}, {"repeat_penalty", 1.2},
                    {"repeat_last_n", 32}, {"seed", 9}, {"num_predict", 20}, {"num_ctx", 512}, {"stop", {"x"}},
                    {"num_gpu", 99}, {"mirostat", 0}}}},
      p, 100);
  EXPECT_FLOAT_EQ(p.temperature, 0.3f);
  EXPECT_EQ(p.top_k, 7);
  EXPECT_FLOAT_EQ(p.top_p, 0.5f);
  EXPECT_FLOAT_EQ(p.min_p, 0.1f);
  EXPECT_FLOAT_EQ(p.repeat_penalty, 1.2f);
  EXPECT_EQ(p.penalty_last_n, 32);
  EXPECT_EQ(p.seed, 9u);
  EXPECT_EQ(o.num_predict, 20);
  EXPECT_EQ(o.num_ctx, 512);
  EXPECT_EQ(o.stop, std::vector<std::string>{"x"});
  SamplerParams q;
  EXPECT_FALSE(parse_ollama_options({{"options", {{"num_predict", -1}}}}, q, 100).num_predict.has_value());
  try {
    parse_ollama_options({{"options", {{"temperature", 9}}}}, q, 100);
    FAIL() << "temperature 9 accepted";
  } catch (const HttpError& e) {
    EXPECT_EQ(e.param(), "options");
    EXPECT_NE(std::string(e.what()).find("options: "), std::string::npos) << e.what();
  }
}
