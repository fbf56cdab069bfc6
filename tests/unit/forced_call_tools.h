// Tools of the forced-call tests (Qwen XML, Gemma 4): a function with a string, an enum, an
// integer and an object parameter (two required), one with a nullable string, one with any
// parameters.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/tool_function_spec.h"
#include "text/chat_output.h"

namespace forced_call_fixture {

using nlohmann::json;

inline const json& tools() {
  static const json t = json::parse(R"([
    {"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{
      "city":{"type":"string"},"unit":{"enum":["celsius","fahrenheit"]},"days":{"type":"integer"},
      "opts":{"type":"object","properties":{"hourly":{"type":"boolean"}}}},
      "required":["city","unit"]}}},
    {"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{
      "tz":{"anyOf":[{"type":"string"},{"type":"null"}]}}}}},
    {"type":"function","function":{"name":"free","parameters":{"type":"object"}}}])");
  return t;
}

inline std::vector<brisk::ToolFunctionSpec> specs() {
  std::vector<brisk::ToolFunctionSpec> out;
  for (const auto& t : tools()) out.push_back(brisk::tool_function_spec(t["function"]["name"], &t["function"]["parameters"]));
  return out;
}

// Seed of the random walks: BRISK_TEST_SEED when set (to try others), else `fallback`.
inline uint64_t walk_seed(uint64_t fallback) {
  const char* s = std::getenv("BRISK_TEST_SEED");
  return s ? uint64_t(std::atoi(s)) : fallback;
}

struct Walk {
  std::string text;
  bool complete = false;
  bool dead_end = false;  // no byte was accepted before completion
};

// A random byte walk through a forced-call recognizer: now and then one of `pieces` when it is
// accepted whole, else a byte among the accepted ones, those in `heavy` weighted up (towards
// closing), bytes >= 0x80 down.
template <class C>
Walk random_walk(C c, std::mt19937_64& rng, const std::vector<std::string>& pieces, std::string_view heavy) {
  Walk w;
  for (int step = 0; step < 3000 && !c.complete(); ++step) {
    const std::string& piece = pieces[rng() % pieces.size()];
    if (rng() % 7 == 0 && c.accepts(piece)) {
      c.advance(piece);
      w.text += piece;
      continue;
    }
    std::vector<uint8_t> ok;
    std::vector<double> weight;
    for (int b = 0; b < 256; ++b) {
      if (!c.accepts(std::string(1, char(b)))) continue;
      ok.push_back(uint8_t(b));
      weight.push_back(heavy.find(char(b)) != std::string_view::npos ? 20.0 : b >= 0x80 ? 0.02 : 1.0);
    }
    if (ok.empty()) {
      w.dead_end = true;
      return w;
    }
    const uint8_t b = ok[std::discrete_distribution<size_t>(weight.begin(), weight.end())(rng)];
    c.advance(std::string(1, char(b)));
    w.text += char(b);
  }
  w.complete = c.complete();
  return w;
}

// The parsed call names a function of tools() and, for get_weather, writes only its
// parameters, both required ones, an enum value for unit and typed days / opts.
inline void expect_conforming_call(const brisk::ChatOutput& out, const std::string& text) {
  ASSERT_EQ(out.tool_calls.size(), 1u) << text;
  const std::string& name = out.tool_calls[0].name;
  const json args = json::parse(out.tool_calls[0].arguments);
  if (name != "get_weather") {
    EXPECT_TRUE(name == "get_time" || name == "free") << text;
    return;
  }
  EXPECT_TRUE(args.contains("city") && args.contains("unit")) << text;
  for (auto it = args.begin(); it != args.end(); ++it)
    EXPECT_TRUE(it.key() == "city" || it.key() == "unit" || it.key() == "days" || it.key() == "opts") << text;
  EXPECT_TRUE(args["unit"] == "celsius" || args["unit"] == "fahrenheit") << text;
  if (args.contains("days")) {
    EXPECT_TRUE(args["days"].is_number_integer()) << text;
  }
  if (args.contains("opts")) {
    EXPECT_TRUE(args["opts"].is_object()) << text;
  }
}

}  // namespace forced_call_fixture
