// Tool-call bodies of each model family, turned into (name, JSON arguments). The chat output
// parser (chat_output.h) finds where a body starts and ends; these functions read what is
// between the markers. All return false on malformed input (never throw on model output).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace brisk {

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // serialized JSON object
  std::string id;         // when the format carries one (Mistral JSON list), else empty
};

enum class ToolBodyKind {
  kHermesJson,     // {"name": N, "arguments": {...}}
  kQwenXml,        // <function=N><parameter=P>\nvalue\n</parameter>...</function>
  kLlamaTag,       // after <|python_tag|>: JSON call(s) separated by ';', or N.call(k="v")
  kBareJson,       // one {"name": N, "parameters"|"arguments": {...}} object
  kMistral,        // [{"name":..,"arguments":..,"id":..}, ...]  or  N[ARGS]{...}
  kGemmaToolCode,  // python calls, one per line: N(k=v, ...)
  kGemma4,         // N{key:value,...} with <|"|>-quoted strings
  kDeepSeek,       // <｜tool▁call▁begin｜>...<｜tool▁sep｜>...<｜tool▁call▁end｜>, repeated
  kGptOss,         // functions.N ... <|message|>{...}
};

// `tools` (optional OpenAI tools array) gives parameter types for kQwenXml values.
bool tool_call_parse_body(ToolBodyKind kind, std::string_view body, const nlohmann::json& tools,
                          std::vector<ParsedToolCall>& out);

// Length of the JSON object at the start of `s` (brackets and strings balanced), 0 when `s`
// does not start with '{' or the object is not closed yet. Validity is checked separately.
size_t json_object_span(std::string_view s);

// Python keyword arguments `k=1, s="x", l=[1, 'a'], d={'k': None}` -> JSON object text.
bool tool_call_python_kwargs_to_json(std::string_view kwargs, std::string& json_out);
// Gemma 4 argument syntax `key:<|"|>text<|"|>,n:3,o:{k:true}` (no braces) -> JSON object text.
bool tool_call_gemma4_args_to_json(std::string_view args, std::string& json_out);

}  // namespace brisk
