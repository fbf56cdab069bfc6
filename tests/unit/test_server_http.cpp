// The HTTP layer of `brisk serve` on the fake engine: both dialects, streaming, usage,
// prefix-cache reporting, errors, auth, limits, disconnects, several models.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "fake_server.h"

using namespace brisk;
using namespace brisk::server;
using brisk::testing::fake_answer;
using brisk::testing::TestServer;
using nlohmann::json;

namespace {

json post(httplib::Client& c, const std::string& path, const json& body, int expect_status = 200,
          httplib::Headers headers = {}) {
  auto r = c.Post(path.c_str(), headers, body.dump(), "application/json");
  EXPECT_TRUE(r) << "no response from " << path;
  if (!r) return json();
  EXPECT_EQ(r->status, expect_status) << r->body;
  return json::parse(r->body, nullptr, false);
}

std::vector<std::string> sse_data(const std::string& body, std::vector<std::string>* events = nullptr) {
  return brisk::testing::sse_payloads(body, events);
}

json user_chat(const std::string& text, int max_tokens) {
  return {{"model", "fake"}, {"messages", {{{"role", "user"}, {"content", text}}}}, {"max_tokens", max_tokens}};
}

const std::string kPromptHi = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n";

}  // namespace

TEST(ServerHttp, HealthAndModels) {
  TestServer ts({}, {"fake", "other"});
  auto c = ts.client();
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto m = c.Get("/v1/models");
  ASSERT_TRUE(m);
  json j = json::parse(m->body);
  ASSERT_EQ(j["data"].size(), 2u);
  EXPECT_EQ(j["data"][0]["id"], "fake");
  EXPECT_EQ(j["data"][1]["id"], "other");
  EXPECT_EQ(ts.loads, 0);  // listing loads nothing
}

TEST(ServerHttp, ChatCompletionMatchesEngine) {
  TestServer ts;
  auto c = ts.client();
  json r = post(c, "/v1/chat/completions", user_chat("hi", 12));
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["choices"][0]["message"]["content"], fake_answer(kPromptHi, 12));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["usage"]["prompt_tokens"], 21);  // 3 specials of one token each + 18 bytes
  EXPECT_EQ(r["usage"]["completion_tokens"], 12);
  EXPECT_EQ(r["usage"]["total_tokens"], r["usage"]["prompt_tokens"].get<int>() + 12);
  EXPECT_TRUE(r["usage"]["prompt_tokens_details"].contains("cached_tokens"));
}

TEST(ServerHttp, StreamingEqualsNonStreamingAndUsageOnlyWhenAsked) {
  TestServer ts;
  auto c = ts.client();
  json body = user_chat("hi", 9);
  body["stream"] = true;
  auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  auto frames = sse_data(r->body);
  ASSERT_GE(frames.size(), 3u);
  EXPECT_EQ(frames.back(), "[DONE]");
  std::string text;
  std::string finish;
  for (size_t i = 0; i + 1 < frames.size(); ++i) {
    json f = json::parse(frames[i]);
    EXPECT_FALSE(f.contains("usage"));
    ASSERT_EQ(f["choices"].size(), 1u);
    const json& d = f["choices"][0]["delta"];
    if (d.contains("content")) text += d["content"].get<std::string>();
    if (!f["choices"][0]["finish_reason"].is_null()) finish = f["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, fake_answer(kPromptHi, 9));
  EXPECT_EQ(finish, "length");

  body["stream_options"] = {{"include_usage", true}};
  r = c.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(r);
  frames = sse_data(r->body);
  ASSERT_GE(frames.size(), 3u);
  json usage_chunk = json::parse(frames[frames.size() - 2]);
  EXPECT_TRUE(usage_chunk["choices"].empty());
  EXPECT_EQ(usage_chunk["usage"]["completion_tokens"], 9);
  EXPECT_GT(usage_chunk["usage"]["prompt_tokens"].get<int>(), 0);
  for (size_t i = 0; i + 2 < frames.size(); ++i) EXPECT_TRUE(json::parse(frames[i])["usage"].is_null());
}

TEST(ServerHttp, StopStringsLogprobsAndN) {
  TestServer ts;
  auto c = ts.client();
  const std::string full = fake_answer(kPromptHi, 20);
  json body = user_chat("hi", 20);
  body["stop"] = json::array({full.substr(5, 3)});
  json r = post(c, "/v1/chat/completions", body);
  const std::string expect = full.substr(0, full.find(full.substr(5, 3)));
  EXPECT_EQ(r["choices"][0]["message"]["content"], expect);
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");

  body = user_chat("hi", 6);
  body["logprobs"] = true;
  body["top_logprobs"] = 3;
  body["n"] = 2;
  r = post(c, "/v1/chat/completions", body);
  ASSERT_EQ(r["choices"].size(), 2u);
  for (const auto& ch : r["choices"]) {
    const json& lp = ch["logprobs"]["content"];
    ASSERT_EQ(lp.size(), 6u);
    for (const auto& e : lp) {
      EXPECT_LT(e["logprob"].get<double>(), 0.0);
      ASSERT_EQ(e["top_logprobs"].size(), 3u);
      EXPECT_EQ(e["top_logprobs"][0]["token"], e["token"]);
    }
  }
  EXPECT_EQ(r["usage"]["completion_tokens"], 12);
}

TEST(ServerHttp, SecondTurnReportsCachedTokensPerSession) {
  TestServer ts;
  auto c = ts.client();
  json t1 = user_chat("tell me something long enough to fill blocks", 16);
  t1["user"] = "alice";
  json r1 = post(c, "/v1/chat/completions", t1);
  EXPECT_EQ(r1["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  json t2 = t1;
  t2["messages"].push_back({{"role", "assistant"}, {"content", r1["choices"][0]["message"]["content"]}});
  t2["messages"].push_back({{"role", "user"}, {"content", "and more"}});
  json r2 = post(c, "/v1/chat/completions", t2);
  const int cached = r2["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_GE(cached, r1["usage"]["prompt_tokens"].get<int>() - 8);  // whole blocks of 8
  // Same conversation under another session key (header wins over `user`): nothing shared.
  json r3 = post(c, "/v1/chat/completions", t2, 200, {{"x-brisk-session", "bob"}});
  EXPECT_EQ(r3["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(r3["choices"][0]["message"]["content"], r2["choices"][0]["message"]["content"]);
}

TEST(ServerHttp, BadInputGetsDialectErrors) {
  server::ServerOptions opt;
  opt.max_body_bytes = 4096;
  opt.max_tokens_ceiling = 100;
  TestServer ts(opt);
  auto c = ts.client();
  auto raw = c.Post("/v1/chat/completions", "{not json", "application/json");
  ASSERT_TRUE(raw);
  EXPECT_EQ(raw->status, 400);
  EXPECT_TRUE(json::parse(raw->body)["error"]["message"].is_string());

  json b = user_chat("hi", 5);
  b["temperature"] = "hot";
  json e = post(c, "/v1/chat/completions", b, 400);
  EXPECT_EQ(e["error"]["param"], "temperature");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");

  b = user_chat("hi", 5);
  b["messages"] = "hello";
  post(c, "/v1/chat/completions", b, 400);
  b = user_chat("hi", 5);
  b["messages"][0]["role"] = "wizard";
  post(c, "/v1/chat/completions", b, 400);

  b = user_chat("hi", 5);
  b["model"] = "nope";
  e = post(c, "/v1/chat/completions", b, 404);
  EXPECT_EQ(e["error"]["code"], "model_not_found");

  e = post(c, "/v1/chat/completions", user_chat("hi", 101), 400);
  EXPECT_NE(e["error"]["message"].get<std::string>().find("100"), std::string::npos);

  // Context overflow: 1024-token context, ~1100-token prompt.
  e = post(c, "/v1/chat/completions", user_chat(std::string(1000, 'x').substr(0, 1000), 50), 400);
  std::string msg = e["error"]["message"];
  EXPECT_NE(msg.find("1024"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1019"), std::string::npos) << msg;  // prompt
  EXPECT_NE(msg.find("1069"), std::string::npos) << msg;  // prompt + max_tokens

  auto big = c.Post("/v1/chat/completions", std::string(10000, ' '), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_TRUE(json::parse(big->body, nullptr, false).contains("error"));

  std::string deep(200, '[');
  auto dj = c.Post("/v1/chat/completions", deep, "application/json");
  ASSERT_TRUE(dj);
  EXPECT_EQ(dj->status, 400);

  // Anthropic route: Anthropic error body.
  json a = {{"model", "fake"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  e = post(c, "/v1/messages", a, 400);
  EXPECT_EQ(e["type"], "error");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  auto nf = c.Get("/v1/nothing");
  ASSERT_TRUE(nf);
  EXPECT_EQ(nf->status, 404);

  // Still serving.
  json ok = post(c, "/v1/chat/completions", user_chat("hi", 3));
  EXPECT_EQ(ok["choices"][0]["message"]["content"], fake_answer(kPromptHi, 3));
}

TEST(ServerHttp, ApiKey) {
  server::ServerOptions opt;
  opt.api_key = "sekrit";
  TestServer ts(opt);
  auto c = ts.client();
  json e = post(c, "/v1/chat/completions", user_chat("hi", 2), 401);
  EXPECT_EQ(e["error"]["type"], "authentication_error");
  e = post(c, "/v1/messages", user_chat("hi", 2), 401, {{"x-api-key", "wrong"}});
  EXPECT_EQ(e["type"], "error");
  EXPECT_EQ(e["error"]["type"], "authentication_error");
  post(c, "/v1/chat/completions", user_chat("hi", 2), 200, {{"Authorization", "Bearer sekrit"}});
  post(c, "/v1/messages", user_chat("hi", 2), 200, {{"x-api-key", "sekrit"}});
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 401);
}

TEST(ServerHttp, AnthropicMessages) {
  TestServer ts;
  auto c = ts.client();
  json body = {{"model", "fake"},
               {"max_tokens", 7},
               {"system", "be brief"},
               {"metadata", {{"user_id", "carol"}}},
               {"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "hi"}}}}}}}};
  json r = post(c, "/v1/messages", body);
  const std::string prompt = "<|im_start|>system\nbe brief<|im_end|>\n" + kPromptHi;
  EXPECT_EQ(r["type"], "message");
  EXPECT_EQ(r["role"], "assistant");
  ASSERT_EQ(r["content"].size(), 1u);
  EXPECT_EQ(r["content"][0]["type"], "text");
  EXPECT_EQ(r["content"][0]["text"], fake_answer(prompt, 7));
  EXPECT_EQ(r["stop_reason"], "max_tokens");
  EXPECT_EQ(r["usage"]["output_tokens"], 7);

  json count = post(c, "/v1/messages/count_tokens", body);
  EXPECT_EQ(count["input_tokens"].get<int>(),
            r["usage"]["input_tokens"].get<int>() + r["usage"]["cache_read_input_tokens"].get<int>());

  body["stream"] = true;
  auto s = c.Post("/v1/messages", body.dump(), "application/json");
  ASSERT_TRUE(s);
  std::vector<std::string> events;
  auto frames = sse_data(s->body, &events);
  ASSERT_GE(events.size(), 6u);
  EXPECT_EQ(events[0], "message_start");
  EXPECT_EQ(events[1], "ping");
  EXPECT_EQ(events[2], "content_block_start");
  EXPECT_EQ(events[events.size() - 3], "content_block_stop");
  EXPECT_EQ(events[events.size() - 2], "message_delta");
  EXPECT_EQ(events.back(), "message_stop");
  std::string text;
  for (const auto& f : frames) {
    json j = json::parse(f);
    if (j["type"] == "content_block_delta") text += j["delta"]["text"].get<std::string>();
    if (j["type"] == "message_delta") {
      EXPECT_EQ(j["delta"]["stop_reason"], "max_tokens");
      EXPECT_EQ(j["usage"]["output_tokens"], 7);
      EXPECT_GT(j["usage"]["cache_read_input_tokens"].get<int>(), 0);  // same session as above
    }
  }
  EXPECT_EQ(text, fake_answer(prompt, 7));

  // Tool use in the history converts to the template's convention.
  json tools_body = {{"model", "fake"},
                     {"max_tokens", 3},
                     {"tools", {{{"name", "get_weather"}, {"input_schema", {{"type", "object"}}}}}},
                     {"messages",
                      {{{"role", "user"}, {"content", "weather?"}},
                       {{"role", "assistant"},
                        {"content", {{{"type", "tool_use"}, {"id", "t1"}, {"name", "get_weather"}, {"input", {{"city", "Oslo"}}}}}}},
                       {{"role", "user"},
                        {"content", {{{"type", "tool_result"}, {"tool_use_id", "t1"}, {"content", "sunny"}}}}}}}};
  json tr = post(c, "/v1/messages", tools_body);
  EXPECT_EQ(tr["usage"]["output_tokens"], 3);
  json stop_body = body;
  stop_body["stream"] = false;
  stop_body["max_tokens"] = 30;
  const std::string ans = fake_answer(prompt, 30);
  stop_body["stop_sequences"] = {ans.substr(4, 2)};
  json sr = post(c, "/v1/messages", stop_body);
  EXPECT_EQ(sr["stop_reason"], "stop_sequence");
  EXPECT_EQ(sr["stop_sequence"], ans.substr(4, 2));
}

TEST(ServerHttp, CompletionsTokenizeDetokenize) {
  TestServer ts;
  auto c = ts.client();
  json r = post(c, "/v1/completions", {{"model", "fake"}, {"prompt", "abc"}, {"max_tokens", 5}});
  EXPECT_EQ(r["object"], "text_completion");
  // add_special on raw prompts: the fake adds <|im_start|>.
  EXPECT_EQ(r["choices"][0]["text"], fake_answer("<|im_start|>abc", 5));
  json ids = post(c, "/v1/completions", {{"prompt", {256, 97, 98, 99}}, {"max_tokens", 5}});
  EXPECT_EQ(ids["choices"][0]["text"], r["choices"][0]["text"]);
  post(c, "/v1/completions", {{"prompt", {1, 99999}}}, 400);

  json t = post(c, "/tokenize", {{"content", "a<|im_end|>"}});
  EXPECT_EQ(t["tokens"], json({97, 257}));
  json d = post(c, "/detokenize", {{"tokens", {104, 105, 257}}});
  EXPECT_EQ(d["content"], "hi<|im_end|>");
  post(c, "/detokenize", {{"tokens", {-1}}}, 400);
  post(c, "/detokenize", {{"tokens", "abc"}}, 400);
}

TEST(ServerHttp, QueueFullIs503) {
  brisk::testing::FakeModelOptions mo;
  mo.max_queue = 0;
  TestServer ts({}, {"fake"}, mo);
  auto c = ts.client();
  json e = post(c, "/v1/chat/completions", user_chat("hi", 3), 503);
  EXPECT_NE(e["error"]["message"].get<std::string>().find("busy"), std::string::npos);
  e = post(c, "/v1/messages", user_chat("hi", 3), 503);
  EXPECT_EQ(e["error"]["type"], "overloaded_error");
}

TEST(ServerHttp, DisconnectMidStreamCancelsAndFreesTheSlot) {
  brisk::testing::FakeModelOptions mo;
  mo.n_ctx = 200000;
  TestServer ts({}, {"fake"}, mo);
  {
    auto c = ts.client();
    post(c, "/v1/chat/completions", user_chat("warm", 1));  // load the model
  }
  auto model = ts.registry->get("fake");
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(ts.server->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  json body = user_chat("go on forever", 150000);
  body["stream"] = true;
  const std::string b = body.dump();
  const std::string req = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          "Content-Length: " + std::to_string(b.size()) + "\r\n\r\n" + b;
  ASSERT_EQ(::send(fd, req.data(), req.size(), 0), ssize_t(req.size()));
  char buf[4096];
  ASSERT_GT(::recv(fd, buf, sizeof buf, 0), 0);  // headers / first chunks arrive
  for (int i = 0; i < 200 && model->scheduler->stats().active == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(model->scheduler->stats().active, 1);
  ::close(fd);
  bool freed = false;
  for (int i = 0; i < 500 && !freed; ++i) {
    freed = model->scheduler->stats().active == 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(freed) << "generation kept running after the client left";
  auto c = ts.client();
  post(c, "/v1/chat/completions", user_chat("hi", 2));
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("brisk_generations_total{reason=\"cancelled\"} 1"), std::string::npos) << m->body;
}

TEST(ServerHttp, SixteenConcurrentStreamsEachGetTheirOwnTokens) {
  brisk::testing::FakeModelOptions mo;
  mo.n_seq_max = 8;
  TestServer ts({}, {"fake"}, mo);
  constexpr int kClients = 16;
  std::vector<std::string> got(kClients), want(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    const std::string q = "question " + std::to_string(i * 7919);
    want[size_t(i)] = fake_answer("<|im_start|>user\n" + q + "<|im_end|>\n<|im_start|>assistant\n", 24);
    threads.emplace_back([&, i, q] {
      auto c = ts.client();
      json body = user_chat(q, 24);
      body["stream"] = true;
      auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
      if (!r) { got[size_t(i)] = "transport error " + httplib::to_string(r.error()); return; }
      if (r->status != 200) { got[size_t(i)] = "status " + std::to_string(r->status) + r->body; return; }
      for (const auto& f : sse_data(r->body)) {
        if (f == "[DONE]") continue;
        json j = json::parse(f);
        if (j["choices"][0]["delta"].contains("content")) got[size_t(i)] += j["choices"][0]["delta"]["content"].get<std::string>();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) EXPECT_EQ(got[size_t(i)], want[size_t(i)]) << "client " << i;
}

TEST(ServerHttp, ResidentModelLimitUnloadsLeastRecentlyUsed) {
  TestServer ts({}, {"a", "b", "c"}, {}, 2);
  auto c = ts.client();
  for (const char* name : {"a", "b", "a", "c"}) {
    json body = user_chat("hi", 2);
    body["model"] = name;
    post(c, "/v1/chat/completions", body);
  }
  EXPECT_EQ(ts.loads, 3);
  auto resident = ts.registry->resident();
  ASSERT_EQ(resident.size(), 2u);
  std::vector<std::string> names;
  for (auto& m : resident) names.push_back(m->name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a", "c"}));  // b was least recently used
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("brisk_models_resident 2"), std::string::npos);
  EXPECT_NE(m->body.find("brisk_requests_total{route=\"/v1/chat/completions\",status=\"200\"} 4"), std::string::npos);
}

TEST(ServerHttp, GracefulStopEndsRunningStreams) {
  brisk::testing::FakeModelOptions mo;
  mo.n_ctx = 200000;
  server::ServerOptions opt;
  opt.shutdown_grace_seconds = 0.2;
  auto ts = std::make_unique<TestServer>(opt, std::vector<std::string>{"fake"}, mo);
  std::string body_seen;
  std::thread t([&] {
    auto c = ts->client();
    json body = user_chat("forever", 150000);
    body["stream"] = true;
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    if (r) body_seen = r->body;
  });
  auto model = ts->registry->get("fake");
  for (int i = 0; i < 500 && model->scheduler->stats().active == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  model.reset();
  const auto t0 = std::chrono::steady_clock::now();
  ts.reset();  // stop(): drain, cancel, close
  t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_NE(body_seen.find("[DONE]"), std::string::npos);
}

TEST(ServerHttp, ConstrainedOutputs) {
  TestServer ts;
  auto c = ts.client();
  // json_object: the output is always a valid JSON prefix (an object).
  json body = user_chat("json please", 120);
  body["response_format"] = {{"type", "json_object"}};
  json r = post(c, "/v1/chat/completions", body);
  const std::string out = r["choices"][0]["message"]["content"];
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0], '{') << out;
  // A schema the fake model can finish within max_tokens: the whole object, and it validates.
  body["response_format"] = {{"type", "json_schema"},
                             {"json_schema",
                              {{"name", "o"},
                               {"schema",
                                {{"type", "object"},
                                 {"properties", {{"a", {{"type", "string"}, {"maxLength", 4}}}}},
                                 {"required", {"a"}},
                                 {"additionalProperties", false}}}}}};
  r = post(c, "/v1/chat/completions", body);
  ASSERT_EQ(r["choices"][0]["finish_reason"], "stop") << r;
  const json obj = json::parse(r["choices"][0]["message"]["content"].get<std::string>());
  ASSERT_TRUE(obj.is_object());
  EXPECT_LE(obj["a"].get<std::string>().size(), 4u);

  const json tools = {{{"type", "function"},
                       {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}},
                      {{"type", "function"}, {"function", {{"name", "get_time"}, {"parameters", {{"type", "object"}}}}}}};
  // Named: the call (when it completes) is to that function; the text never escapes the syntax.
  body = user_chat("weather?", 200);
  body["tools"] = tools;
  body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_time"}}}};
  r = post(c, "/v1/chat/completions", body);
  const json& ch = r["choices"][0];
  if (ch["finish_reason"] == "stop") {  // a named tool_choice ends with "stop", as OpenAI's does
    ASSERT_EQ(ch["message"]["tool_calls"].size(), 1u);
    EXPECT_EQ(ch["message"]["tool_calls"][0]["function"]["name"], "get_time");
    EXPECT_TRUE(json::parse(ch["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>(), nullptr, false)
                    .is_object());
  } else {
    EXPECT_EQ(ch["finish_reason"], "length");
    // Cut by max_tokens: what was known of the call is a call, never markup in the content.
    EXPECT_TRUE(ch["message"]["content"].is_null()) << ch;
    ASSERT_EQ(ch["message"]["tool_calls"].size(), 1u) << ch;
    EXPECT_EQ(ch["message"]["tool_calls"][0]["function"]["name"], "get_time");
  }
  // Naming a function that is not offered, or required without tools: 400.
  body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "nope"}}}};
  post(c, "/v1/chat/completions", body, 400);
  json no_tools = user_chat("weather?", 4);
  no_tools["tool_choice"] = "required";
  post(c, "/v1/chat/completions", no_tools, 400);
  // none: the tools are not shown to the model (same prompt as without tools).
  body["tool_choice"] = "none";
  body["max_tokens"] = 4;
  json with_none = post(c, "/v1/chat/completions", body);
  json plain = post(c, "/v1/chat/completions", user_chat("weather?", 4));
  EXPECT_EQ(with_none["usage"]["prompt_tokens"], plain["usage"]["prompt_tokens"]);
  EXPECT_FALSE(with_none["choices"][0]["message"].contains("tool_calls"));
}
