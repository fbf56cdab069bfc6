// Forced tool calls in the Gemma 4 syntax: accepted and refused texts, round trips through the
// chat output parser, random byte walks whose calls parse and follow the schemas' top level,
// and the token mask against a brute-force check.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "forced_call_tools.h"
#include "runtime/gemma4_tool_call_constraint.h"
#include "runtime/json_constraint.h"
#include "text/chat_output.h"

using namespace brisk;
using nlohmann::json;

namespace {

using forced_call_fixture::specs;
using forced_call_fixture::tools;

bool full_match(const std::string& text) {
  Gemma4ToolCallConstraint c(specs());
  if (!c.accepts(text)) return false;
  c.advance(text);
  return c.complete();
}

const std::string Q = "<|\"|>";
std::string call(const std::string& name, const std::string& args) { return "<|tool_call>call:" + name + "{" + args + "}<tool_call|>"; }

}  // namespace

TEST(Gemma4ToolCallConstraint, AcceptsCallsThatFollowTheSchemas) {
  EXPECT_TRUE(full_match(call("get_weather", "city:" + Q + "Paris" + Q + ",unit:" + Q + "celsius" + Q)));
  EXPECT_TRUE(full_match(call("get_weather", "unit:" + Q + "fahrenheit" + Q + ",days:3,city:" + Q + "New\nYork {a:b}" + Q +
                                                 ",opts:{hourly:true,extra:[1,-2.5," + Q + "x" + Q + ",null,{}]}")));
  EXPECT_TRUE(full_match(call("get_time", "")));
  EXPECT_TRUE(full_match(call("get_time", "tz:" + Q + "UTC" + Q)));
  EXPECT_TRUE(full_match(call("free", "anything:[],x:1")));
}

TEST(Gemma4ToolCallConstraint, RefusesWhatTheParserWouldMisread) {
  EXPECT_FALSE(full_match(call("get_wether", "")));
  EXPECT_FALSE(full_match(call("get_weather", "city:" + Q + "Paris" + Q)));                    // unit required
  EXPECT_FALSE(full_match(call("get_weather", "city:" + Q + "a" + Q + ",unit:" + Q + "kelvin" + Q)));
  EXPECT_FALSE(full_match(call("get_weather", "city:" + Q + "a" + Q + ",unit:" + Q + "celsius" + Q + ",days:2.5")));
  EXPECT_FALSE(full_match(call("get_weather", "city:" + Q + "a" + Q + ",unit:" + Q + "celsius" + Q + ",days:" + Q + "2" + Q)));
  EXPECT_FALSE(full_match(call("get_weather", "city:" + Q + "a" + Q + ",city:" + Q + "b" + Q + ",unit:" + Q + "celsius" + Q)));
  EXPECT_FALSE(full_match(call("get_weather", "city:" + Q + "a" + Q + ",unit:" + Q + "celsius" + Q + ",zip:1")));
  EXPECT_FALSE(full_match(call("get_weather", "city:3,unit:" + Q + "celsius" + Q)));           // a string
  EXPECT_FALSE(full_match(call("get_weather", "city:\"a\",unit:" + Q + "celsius" + Q)));     // JSON quotes
  EXPECT_FALSE(full_match(call("get_weather", "city: " + Q + "a" + Q + ",unit:" + Q + "celsius" + Q)));  // spaces
  EXPECT_FALSE(full_match(call("free", "x:1,")));
  EXPECT_FALSE(full_match(call("get_time", "tz:" + Q + "a}<tool_call|>" + Q)));
  EXPECT_FALSE(full_match("Sure! " + call("get_time", "")));
  EXPECT_THROW(Gemma4ToolCallConstraint(std::vector<ToolFunctionSpec>{}), Error);
}

TEST(Gemma4ToolCallConstraint, CallsRoundTripThroughTheParser) {
  const std::string text = call("get_weather", "city:" + Q + "New\nYork" + Q + ",days:3,opts:{hourly:false},unit:" + Q +
                                                  "celsius" + Q);
  ASSERT_TRUE(full_match(text));
  const ChatOutput out = chat_output_parse(text, {.format = ChatFormat::kGemma4, .tools = tools()});
  ASSERT_EQ(out.tool_calls.size(), 1u) << out.content;
  EXPECT_EQ(out.tool_calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(out.tool_calls[0].arguments),
            json::parse(R"({"unit":"celsius","days":3,"city":"New\nYork","opts":{"hourly":false}})"));
}

TEST(Gemma4ToolCallConstraint, FreeTextUntilReasoningCloses) {
  EXPECT_EQ(chat_prompt_reasoning_close("<start_of_turn>model\n<|channel>thought\n", ChatFormat::kGemma4), "<channel|>");
  Gemma4ToolCallConstraint c(specs(), "<channel|>");
  const std::string text = "Let me check.<channel|>" + call("get_time", "");
  ASSERT_TRUE(c.accepts(text));
  c.advance(text);
  EXPECT_TRUE(c.complete());
}

TEST(Gemma4ToolCallConstraint, RandomWalksYieldParseableConformingCalls) {
  std::mt19937_64 rng(forced_call_fixture::walk_seed(5));
  const auto fns = specs();
  int done = 0;
  for (int run = 0; run < 40; ++run) {
    const auto walk = forced_call_fixture::random_walk(Gemma4ToolCallConstraint(fns), rng,
                                                       {"<|\"|>", "}<tool_call|>", "}", "]", ","}, "<:}],");
    ASSERT_FALSE(walk.dead_end) << "dead end after " << walk.text;
    if (!walk.complete) continue;
    ++done;
    const ChatOutput out = chat_output_parse(walk.text, {.format = ChatFormat::kGemma4, .tools = tools()});
    forced_call_fixture::expect_conforming_call(out, walk.text);
    if (!out.tool_calls.empty() && out.tool_calls[0].name == "get_weather") {
      EXPECT_TRUE(json::parse(out.tool_calls[0].arguments)["city"].is_string()) << walk.text;
    }
  }
  EXPECT_GT(done, 30);  // of 40
}

TEST(Gemma4ToolCallConstraint, TokenMaskMatchesBruteForce) {
  const std::vector<std::string> vocab = {
      "<|tool_call>", "call:", "get", "_weather", "get_weather{", "{", "}", "city", "unit", ":", ":<|\"|>", "<|\"|>",
      "celsius", "fahr", "enheit", "days", "12", "3.", ",", "}<tool_call|>", "<tool_call|>", "Paris", "<", "|",
      "<|end|>", "opts", "{hourly:", "true}", " ", "[", "]", "\"|>"};
  const int32_t end_id = 24;
  TokenMask mask(vocab, {end_id});
  const std::string text =
      call("get_weather", "city:" + Q + "Paris <" + Q + ",days:12,unit:" + Q + "fahrenheit" + Q + ",opts:{hourly:true}");
  Gemma4ToolCallConstraint c(specs());
  for (size_t i = 0; i <= text.size(); ++i) {
    std::vector<bool> allowed;
    mask.compute(c, allowed);
    for (size_t t = 0; t < vocab.size(); ++t) {
      const bool expect = int32_t(t) == end_id ? c.complete() : c.accepts(vocab[t]);
      EXPECT_EQ(allowed[t], expect) << "token [" << vocab[t] << "] after [" << text.substr(0, i) << "]";
    }
    if (i < text.size()) c.advance(text.substr(i, 1));
  }
  EXPECT_TRUE(c.complete());
}
