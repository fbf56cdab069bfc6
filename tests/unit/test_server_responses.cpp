// OpenAI Responses API on the fake engine: the response object, the event stream, function
// calls and their outputs, instructions, previous_response_id and the bounded store.
#include <gtest/gtest.h>

#include "fake_server.h"

using namespace brisk;
using namespace brisk::server;
using brisk::testing::chat_body;
using brisk::testing::fake_answer;
using brisk::testing::post_json;
using brisk::testing::sse_payloads;
using brisk::testing::TestServer;
using nlohmann::json;

namespace {

json responses_body(const json& input, int max_output_tokens) {
  return {{"model", "fake"}, {"input", input}, {"max_output_tokens", max_output_tokens}};
}

std::string response_text(const json& response) {
  std::string out;
  for (const auto& item : response["output"])
    if (item["type"] == "message")
      for (const auto& part : item["content"])
        if (part["type"] == "output_text") out += part["text"].get<std::string>();
  return out;
}

}  // namespace

TEST(ServerResponses, CreateReturnsTheResponseObject) {
  TestServer ts;
  auto c = ts.client();
  json r = post_json(c, "/v1/responses", responses_body("hi", 6));
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["id"].get<std::string>().rfind("resp_", 0), 0u);
  EXPECT_EQ(r["status"], "incomplete");  // 6 tokens is where max_output_tokens cut it
  EXPECT_EQ(r["incomplete_details"]["reason"], "max_output_tokens");
  ASSERT_EQ(r["output"].size(), 1u) << r;
  const json& msg = r["output"][0];
  EXPECT_EQ(msg["type"], "message");
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(msg["content"][0]["type"], "output_text");
  EXPECT_TRUE(msg["content"][0]["annotations"].is_array());
  EXPECT_EQ(response_text(r), fake_answer("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", 6));
  EXPECT_EQ(r["usage"]["output_tokens"], 6);
  EXPECT_EQ(r["usage"]["total_tokens"], r["usage"]["input_tokens"].get<int>() + 6);
  EXPECT_TRUE(r["usage"]["input_tokens_details"].contains("cached_tokens"));
  EXPECT_TRUE(r["error"].is_null());
  EXPECT_EQ(r["model"], "fake");
  EXPECT_TRUE(r["tools"].is_array());
}

TEST(ServerResponses, InstructionsAndItemInputAreTheChatConversation) {
  TestServer ts;
  auto c = ts.client();
  json body = responses_body(json::array({{{"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "hello"}}}}}}), 5);
  body["instructions"] = "be brief";
  json r = post_json(c, "/v1/responses", body);
  const std::string prompt = "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(response_text(r), fake_answer(prompt, 5));
  json chat = chat_body("hello", 5);
  chat["messages"] = {{{"role", "system"}, {"content", "be brief"}}, {{"role", "user"}, {"content", "hello"}}};
  json cr = post_json(c, "/v1/chat/completions", chat);
  EXPECT_EQ(r["usage"]["input_tokens"], cr["usage"]["prompt_tokens"]);
  // Unsupported input is refused by name.
  json e = post_json(c, "/v1/responses", responses_body(json::array({{{"type", "input_image"}}}), 5), 400);
  EXPECT_NE(e["error"]["message"].get<std::string>().find("input_image"), std::string::npos) << e;
  body["tools"] = {{{"type", "web_search"}}};
  e = post_json(c, "/v1/responses", body, 400);
  EXPECT_EQ(e["error"]["param"], "tools");
}

TEST(ServerResponses, PreviousResponseIdContinuesTheConversation) {
  TestServer ts;
  auto c = ts.client();
  json body = responses_body("first question", 5);
  body["instructions"] = "sys";
  json r1 = post_json(c, "/v1/responses", body);
  const std::string id = r1["id"];
  json follow = responses_body("and then?", 5);
  follow["previous_response_id"] = id;
  json r2 = post_json(c, "/v1/responses", follow);
  // The history, without the first request's instructions (they do not carry over).
  const std::string prompt = "<|im_start|>user\nfirst question<|im_end|>\n<|im_start|>assistant\n" + response_text(r1) +
                             "<|im_end|>\n<|im_start|>user\nand then?<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(response_text(r2), fake_answer(prompt, 5));
  EXPECT_EQ(r2["previous_response_id"], id);
  auto g = c.Get(("/v1/responses/" + id).c_str());
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, 200);
  EXPECT_EQ(json::parse(g->body), r1);
  auto d = c.Delete(("/v1/responses/" + id).c_str());
  ASSERT_TRUE(d);
  EXPECT_EQ(json::parse(d->body)["deleted"], true);
  g = c.Get(("/v1/responses/" + id).c_str());
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, 404);
  json e = post_json(c, "/v1/responses", follow, 404);
  EXPECT_EQ(e["error"]["param"], "previous_response_id");
}

TEST(ServerResponses, TheStoreIsBounded) {
  ServerOptions opt;
  opt.stored_responses = 2;
  TestServer ts(opt);
  auto c = ts.client();
  std::vector<std::string> ids;
  for (const char* q : {"q0", "q1", "q2"}) ids.push_back(post_json(c, "/v1/responses", responses_body(q, 2))["id"]);
  auto g = c.Get(("/v1/responses/" + ids[0]).c_str());
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, 404);  // evicted, least recently used
  for (int i = 1; i < 3; ++i) {
    g = c.Get(("/v1/responses/" + ids[size_t(i)]).c_str());
    ASSERT_TRUE(g);
    EXPECT_EQ(g->status, 200);
  }
  json no_store = responses_body("q", 2);
  no_store["store"] = false;
  const std::string id = post_json(c, "/v1/responses", no_store)["id"];
  g = c.Get(("/v1/responses/" + id).c_str());
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, 404);
}

TEST(ServerResponses, StreamedEventsBuildTheSameResponse) {
  TestServer ts;
  auto c = ts.client();
  json body = responses_body("hi", 6);
  const json plain = post_json(c, "/v1/responses", body);
  body["stream"] = true;
  auto r = c.Post("/v1/responses", body.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  std::vector<std::string> names;
  const auto data = sse_payloads(r->body, &names);
  ASSERT_EQ(names.size(), data.size());
  const std::vector<std::string> want = {"response.created",      "response.in_progress",  "response.output_item.added",
                                         "response.content_part.added", "response.output_text.delta"};
  ASSERT_GE(names.size(), want.size() + 4);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(names[i], want[i]) << i;
  const size_t n = names.size();
  EXPECT_EQ(names[n - 4], "response.output_text.done");
  EXPECT_EQ(names[n - 3], "response.content_part.done");
  EXPECT_EQ(names[n - 2], "response.output_item.done");
  EXPECT_EQ(names[n - 1], "response.incomplete");
  std::string text, item_id;
  for (size_t i = 0; i < n; ++i) {
    const json e = json::parse(data[i]);
    EXPECT_EQ(e["type"], names[i]);
    EXPECT_EQ(e["sequence_number"], int(i));
    if (names[i] == "response.output_item.added") item_id = e["item"]["id"];
    if (names[i] == "response.output_text.delta") {
      EXPECT_EQ(e["item_id"], item_id);
      EXPECT_EQ(e["output_index"], 0);
      text += e["delta"].get<std::string>();
    }
  }
  const json final_response = json::parse(data[n - 1])["response"];
  EXPECT_EQ(text, response_text(plain));
  EXPECT_EQ(response_text(final_response), text);
  EXPECT_EQ(final_response["output"][0]["id"], item_id);
  EXPECT_EQ(final_response["status"], "incomplete");
}

TEST(ServerResponses, FunctionCallsAndTheirOutputs) {
  TestServer ts;
  auto c = ts.client();
  json body = responses_body("weather?", 200);
  body["tools"] = {{{"type", "function"},
                    {"name", "get_weather"},
                    {"parameters",
                     {{"type", "object"},
                      {"properties", {{"city", {{"type", "string"}, {"maxLength", 3}}}}},
                      {"required", {"city"}},
                      {"additionalProperties", false}}}}};
  body["tool_choice"] = "required";
  json r = post_json(c, "/v1/responses", body);
  EXPECT_EQ(r["status"], "completed") << r;
  json call;
  for (const auto& item : r["output"])
    if (item["type"] == "function_call") call = item;
  ASSERT_FALSE(call.is_null()) << r;
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(call["status"], "completed");
  EXPECT_EQ(call["id"].get<std::string>().rfind("fc_", 0), 0u);
  EXPECT_LE(json::parse(call["arguments"].get<std::string>())["city"].get<std::string>().size(), 3u);

  // The call's output goes back as an input item, after the stored conversation.
  json follow = responses_body(json::array({{{"type", "function_call_output"}, {"call_id", call["call_id"]}, {"output", "sunny"}}}), 4);
  follow["previous_response_id"] = r["id"];
  follow["tools"] = body["tools"];
  json r2 = post_json(c, "/v1/responses", follow);
  EXPECT_GT(r2["usage"]["input_tokens"].get<int>(), r["usage"]["input_tokens"].get<int>());
  // The same call and output given as items without a stored response.
  json items = json::array({{{"role", "user"}, {"content", "weather?"}},
                            {{"type", "function_call"}, {"call_id", call["call_id"]}, {"name", "get_weather"}, {"arguments", call["arguments"]}},
                            {{"type", "function_call_output"}, {"call_id", call["call_id"]}, {"output", "sunny"}}});
  json again = responses_body(items, 4);
  again["tools"] = body["tools"];
  EXPECT_EQ(response_text(post_json(c, "/v1/responses", again)), response_text(r2));

  body["stream"] = true;
  auto s = c.Post("/v1/responses", body.dump(), "application/json");
  ASSERT_TRUE(s);
  std::vector<std::string> names;
  const auto data = sse_payloads(s->body, &names);
  std::string args;
  bool added = false, done = false;
  for (size_t i = 0; i < names.size(); ++i) {
    const json e = json::parse(data[i]);
    if (names[i] == "response.output_item.added" && e["item"]["type"] == "function_call") added = true;
    if (names[i] == "response.function_call_arguments.delta") args += e["delta"].get<std::string>();
    if (names[i] == "response.function_call_arguments.done") {
      done = true;
      EXPECT_EQ(e["arguments"], args);
    }
  }
  EXPECT_TRUE(added && done) << s->body;
  EXPECT_EQ(names.back(), "response.completed");
}
