// What a forced tool call in a non-JSON call syntax (Qwen XML, Gemma 4) needs from a function's
// parameters schema: the parameter names, the required ones, and per parameter how its value
// is written: kText (may be a string: free text), kChoice (an enum of strings: one of them),
// kJson (no string: a value conforming to the compiled schema).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "runtime/schema_constraint.h"

namespace brisk {

struct ToolParamSpec {
  enum class Kind : uint8_t { kText, kChoice, kJson };
  std::string name;
  Kind kind = Kind::kText;
  std::vector<std::string> choices;            // kChoice: raw texts, sorted
  std::shared_ptr<const CompiledSchema> json;  // kJson
};

struct ToolFunctionSpec {
  std::string name;
  std::vector<ToolParamSpec> params;  // sorted by name, at most 64
  uint64_t required = 0;              // bit i: params[i] must be written
  bool open_params = false;           // names beyond params are allowed (free values)
};

// From a function's parameters schema (null or not an object schema: any parameters).
// Properties whose schema does not compile become kText.
ToolFunctionSpec tool_function_spec(std::string name, const nlohmann::json* parameters);

}  // namespace brisk
