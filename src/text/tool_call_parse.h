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

// What is already certain about a call body that is still streaming, for the forms whose
// arguments are one verbatim JSON object (kHermesJson, kBareJson with "name" first, kMistral
// N[ARGS]{...}, kGptOss), and for kQwenXml (name, then each closed parameter). Returns false when the body does not have that shape (the call is
// then only reported whole). For these forms tool_call_parse_body returns the arguments
// verbatim, so the streamed fragments add up to the final arguments.
struct PartialToolCall {
  bool has_name = false;
  std::string name;
  std::string id;               // Mistral [CALL_ID]
  bool has_arguments = false;
  size_t arguments_begin = 0;   // offset of the arguments' '{' in the body
  // kQwenXml: the start of the final (re-serialized) arguments, one closed parameter at a time.
  std::string arguments_prefix;
};
bool tool_call_partial(ToolBodyKind kind, std::string_view body, PartialToolCall& out,
                       const nlohmann::json& tools = nlohmann::json());

// `tools` (optional OpenAI tools array) gives parameter types for kQwenXml values.
bool tool_call_parse_body(ToolBodyKind kind, std::string_view body, const nlohmann::json& tools,
                          std::vector<ParsedToolCall>& out);

// Finds where a JSON object that arrives in pieces ends (brackets and strings balanced;
// validity is checked separately by a real parse). Work is proportional to the bytes fed.
class JsonObjectScanner {
 public:
  // Feeds the next bytes; returns the object's length once it has closed (then stops), else 0.
  size_t feed(std::string_view more);
  size_t span() const { return span_; }
  bool failed() const { return failed_; }  // did not start with '{', or brackets mismatched

 private:
  std::string open_;  // stack of open brackets
  size_t pos_ = 0, span_ = 0;
  bool in_string_ = false, escape_ = false, failed_ = false;
};

// Length of the JSON object at the start of `s`, 0 when `s` does not start with '{' or the
// object is not closed yet (JsonObjectScanner over the whole of `s`).
size_t json_object_span(std::string_view s);

// Python keyword arguments `k=1, s="x", l=[1, 'a'], d={'k': None}` -> JSON object text.
bool tool_call_python_kwargs_to_json(std::string_view kwargs, std::string& json_out);
// Gemma 4 argument syntax `key:<|"|>text<|"|>,n:3,o:{k:true}` (no braces) -> JSON object text.
bool tool_call_gemma4_args_to_json(std::string_view args, std::string& json_out);

}  // namespace brisk
