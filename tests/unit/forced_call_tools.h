// Tools of the forced-call tests (Qwen XML, Gemma 4): a function with a string, an enum, an
// integer and an object parameter (two required), one with a nullable string, one with any
// parameters.
#pragma once
#include <nlohmann/json.hpp>
#include <vector>

#include "runtime/tool_function_spec.h"

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

}  // namespace forced_call_fixture
