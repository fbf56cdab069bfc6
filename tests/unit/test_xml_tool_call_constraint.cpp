// Forced tool calls in the Qwen XML syntax: accepted and refused texts, round trips through
// the chat output parser, random byte walks whose calls parse and follow the schemas, and the
// token mask against a brute-force check.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "forced_call_tools.h"
#include "runtime/json_constraint.h"
#include "runtime/xml_tool_call_constraint.h"
#include "text/chat_output.h"

using namespace brisk;
using nlohmann::json;

namespace {

using forced_call_fixture::specs;
using forced_call_fixture::tools;

bool full_match(const std::string& text) {
  XmlToolCallConstraint c(specs());
  if (!c.accepts(text)) return false;
  c.advance(text);
  return c.complete();
}

std::string call(const std::string& name, const std::vector<std::pair<std::string, std::string>>& params) {
  std::string s = "<tool_call>\n<function=" + name + ">\n";
  for (const auto& [k, v] : params) s += "<parameter=" + k + ">\n" + v + "\n</parameter>\n";
  return s + "</function>\n</tool_call>";
}

}  // namespace

TEST(XmlToolCallConstraint, AcceptsCallsThatFollowTheSchemas) {
  EXPECT_TRUE(full_match(call("get_weather", {{"city", "Paris"}, {"unit", "celsius"}})));
  EXPECT_TRUE(full_match(call("get_weather", {{"unit", "fahrenheit"}, {"days", "3"}, {"city", "New\nYork <b>"}})));
  EXPECT_TRUE(full_match(call("get_weather", {{"city", ""}, {"unit", "celsius"}, {"opts", "{\"hourly\": true}"}})));
  EXPECT_TRUE(full_match(call("get_time", {})));
  EXPECT_TRUE(full_match(call("get_time", {{"tz", "UTC"}})));
  EXPECT_TRUE(full_match(call("free", {{"anything", "goes"}, {"x", "1"}})));
}

TEST(XmlToolCallConstraint, RefusesWhatTheParserWouldMisread) {
  EXPECT_FALSE(full_match(call("get_wether", {})));                                      // unknown function
  EXPECT_FALSE(full_match(call("get_weather", {{"city", "Paris"}})));                      // unit required
  EXPECT_FALSE(full_match(call("get_weather", {{"city", "a"}, {"unit", "kelvin"}})));      // not an enum value
  EXPECT_FALSE(full_match(call("get_weather", {{"city", "a"}, {"unit", "celsius"}, {"days", "2.5"}})));
  EXPECT_FALSE(full_match(call("get_weather", {{"city", "a"}, {"unit", "celsius"}, {"city", "b"}})));  // twice
  EXPECT_FALSE(full_match(call("get_weather", {{"city", "a"}, {"unit", "celsius"}, {"zip", "1"}})));  // not listed
  EXPECT_FALSE(full_match(call("get_weather", {{"city", "a</function>"}, {"unit", "celsius"}})));
  EXPECT_FALSE(full_match(call("get_weather", {{"city", "a<parameter=x>"}, {"unit", "celsius"}})));
  EXPECT_FALSE(full_match(call("get_weather", {{"city", "a</parameter>b"}, {"unit", "celsius"}})));
  EXPECT_FALSE(full_match(call("get_weather", {{"city", "a</tool_call>b"}, {"unit", "celsius"}})));
  EXPECT_FALSE(full_match(call("get_weather", {{"city", "a"}, {"unit", "celsius"}, {"opts", "{\"hourly\": 1}"}})));
  EXPECT_FALSE(full_match("Sure! " + call("get_time", {})));
  EXPECT_THROW(XmlToolCallConstraint(std::vector<ToolFunctionSpec>{}), Error);
}

TEST(XmlToolCallConstraint, CallsRoundTripThroughTheParser) {
  const std::string text = call("get_weather", {{"unit", "celsius"}, {"days", "3"}, {"city", "New\nYork"},
                                                {"opts", "{\"hourly\": false}"}});
  ASSERT_TRUE(full_match(text));
  const ChatOutput out = chat_output_parse(text, {.format = ChatFormat::kQwenXml, .tools = tools()});
  ASSERT_EQ(out.tool_calls.size(), 1u) << out.content;
  EXPECT_EQ(out.tool_calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(out.tool_calls[0].arguments),
            json::parse(R"({"unit":"celsius","days":3,"city":"New\nYork","opts":{"hourly":false}})"));
}

TEST(XmlToolCallConstraint, FreeTextUntilReasoningCloses) {
  XmlToolCallConstraint c(specs(), "</think>");
  const std::string text = "Let me check.</think>\n\n" + call("get_time", {});
  ASSERT_TRUE(c.accepts(text));
  c.advance(text);
  EXPECT_TRUE(c.complete());
}

// Random byte walks (biased towards closing): every finished call parses, names a function,
// writes only its parameters, all the required ones, and typed values of the right type.
TEST(XmlToolCallConstraint, RandomWalksYieldParseableConformingCalls) {
  std::mt19937_64 rng(forced_call_fixture::walk_seed(3));
  const auto fns = specs();
  int done = 0;
  for (int run = 0; run < 40; ++run) {
    const auto walk = forced_call_fixture::random_walk(
        XmlToolCallConstraint(fns), rng, {"\n</parameter>\n", "</function>\n</tool_call>", "<parameter=", "}"},
        "<\n}\"");
    ASSERT_FALSE(walk.dead_end) << "dead end after " << walk.text;
    if (!walk.complete) continue;
    ++done;
    forced_call_fixture::expect_conforming_call(
        chat_output_parse(walk.text, {.format = ChatFormat::kQwenXml, .tools = tools()}), walk.text);
  }
  EXPECT_GT(done, 30);  // of 40
}

TEST(XmlToolCallConstraint, TokenMaskMatchesBruteForce) {
  const std::vector<std::string> vocab = {
      "<tool_call>", "\n", "<function=", "get", "_weather", "get_time", ">", ">\n", "<parameter=", "city", "unit",
      "celsius", "fahr", "enheit", "days", "12", "3.", "</parameter>", "\n</parameter>\n", "</function>",
      "\n</tool_call>", "</tool_call>", "Paris", "<", "/", "<|end|>", "{\"hourly\": ", "true}", " ", "<p"};
  const int32_t end_id = 25;
  TokenMask mask(vocab, {end_id});
  const std::string text =
      call("get_weather", {{"city", "Paris <"}, {"days", "12"}, {"unit", "fahrenheit"}, {"opts", "{\"hourly\": true}"}});
  XmlToolCallConstraint c(specs());
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
