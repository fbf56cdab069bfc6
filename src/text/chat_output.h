// Parsing a model's chat output into content, reasoning and tool calls, whole or while it
// streams.
//
// Each model family marks reasoning and tool calls its own way (see tool_call_parse.h for the
// call bodies). ChatOutputParser is fed text deltas and returns deltas: content and reasoning
// come out as soon as they cannot be the start of a marker any more (only a possible marker
// prefix, and trailing whitespace of a section, is held back); a tool call's id and name come
// out as soon as they are known and its arguments in fragments as they arrive (for the forms
// whose arguments are a verbatim JSON object; other forms report each call whole when it
// closes). finish() flushes what is held back; the accumulated result() then equals
// chat_output_parse() of the whole text, however the text was split, and so do the deltas
// added up. A malformed call is returned as content with `warning` set, never thrown; if its
// name had already been streamed, that announced call is abandoned (the deltas then hold one
// call more than result(), and the raw text arrives as content with warning set).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/tool_call_parse.h"

namespace brisk {

enum class ChatFormat {
  kContentOnly,  // no tool calls; <think> reasoning still recognized
  kHermes,       // Qwen 2.5 / Qwen3 / QwQ / Hermes: <tool_call>{"name":..,"arguments":..}</tool_call>
  kQwenXml,      // Qwen3-Coder / Qwen3.5: <tool_call><function=N><parameter=P>v</parameter>...
  kLlama3,       // <|python_tag|>... and bare {"name":..,"parameters":..}
  kMistral,      // [TOOL_CALLS][{...}] or [TOOL_CALLS]name[ARGS]{...}; [THINK]...[/THINK]
  kGemma,        // ```tool_code\nname(k=v)\n``` and bare {"name":..,"parameters":..}
  kGemma4,       // <|channel>thought..<channel|>, <|tool_call>call:N{k:v}<tool_call|>
  kDeepSeek,     // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>...<｜tool▁sep｜>... (R1 and V3.1)
  kGptOss,       // harmony channels: analysis (reasoning), final, commentary to=functions.N
};

const char* chat_format_name(ChatFormat format);
// Parses a name as printed by chat_format_name ("hermes", "qwen_xml", ...); throws on unknown.
ChatFormat chat_format_from_name(std::string_view name);

// Picks the format from the chat template text; when the template says nothing conclusive,
// from the model family (config.json model_type or GGUF general.architecture, e.g. "qwen3",
// "llama", "gemma3"). kContentOnly when neither is known.
ChatFormat chat_format_detect(std::string_view template_text, std::string_view model_family = {});

// True when the rendered prompt leaves a reasoning block open (e.g. it ends with "<think>\n"),
// so the output starts inside reasoning.
bool chat_prompt_opens_reasoning(std::string_view rendered_prompt, ChatFormat format);
// The marker that closes the reasoning block the prompt left open ("</think>", Gemma 4's
// "<channel|>"), or empty when none is open.
std::string_view chat_prompt_reasoning_close(std::string_view rendered_prompt, ChatFormat format);

struct ChatOutputOptions {
  ChatFormat format = ChatFormat::kContentOnly;
  bool starts_in_reasoning = false;  // see chat_prompt_opens_reasoning
  bool parse_tool_calls = true;      // false: markers of calls stay content (no tools offered)
  std::string id_seed = {};          // tool call ids are derived from this and the call index
  // OpenAI-style tools array (optional): parameter types from its JSON schemas decide how
  // untyped values of XML-style calls are read (a "string" parameter stays a string).
  nlohmann::json tools = {};
  // Report a call's name as soon as it is known and its arguments as they arrive (forms with
  // verbatim JSON arguments: hermes, llama3/gemma bare JSON, mistral N[ARGS], gpt_oss; qwen_xml
  // one parameter at a time); other forms, and false here, report each call when it closes.
  bool stream_tool_calls = true;
};

struct ToolCall {
  std::string id = {};
  std::string name = {};
  std::string arguments = {};  // a JSON object, as the model wrote it or re-serialized
};

struct ChatOutput {
  std::string content;
  std::string reasoning;
  std::vector<ToolCall> tool_calls;
  bool warning = false;  // some text looked like a tool call but did not parse (kept as content)
};

// One call's part of a delta: id and name the first time the call appears, then argument
// fragments to append.
struct ToolCallDelta {
  size_t index = 0;  // position in ChatOutput::tool_calls
  std::string id = {};
  std::string name = {};
  std::string arguments = {};
};

struct ChatOutputDelta {
  std::string content;
  std::string reasoning;
  std::vector<ToolCallDelta> tool_calls;
  bool warning = false;  // a malformed call was turned into content in this delta
  bool empty() const { return content.empty() && reasoning.empty() && tool_calls.empty() && !warning; }
};

class ChatOutputParser {
 public:
  explicit ChatOutputParser(ChatOutputOptions options);
  ChatOutputDelta feed(std::string_view text);
  ChatOutputDelta finish();  // idempotent; feed() after finish() throws
  const ChatOutput& result() const { return result_; }

  struct Marker {
    std::string text;
    enum Kind { kReasoningOpen, kReasoningClose, kToolOpen, kToolClose, kDrop } kind;
    size_t index;  // which reasoning or tool block spec
  };

 private:
  enum class Mode { kContent, kReasoning, kToolBody, kBareJson, kAfterBareCall };
  void process(ChatOutputDelta& delta, bool at_end);
  void emit_text(ChatOutputDelta& delta, std::string_view text, bool reasoning);
  void close_tool_body(ChatOutputDelta& delta, std::string_view close);
  void add_calls(ChatOutputDelta& delta, std::vector<ParsedToolCall> calls);
  void malformed(ChatOutputDelta& delta, std::string_view raw);
  void stream_call(ChatOutputDelta& delta, ToolBodyKind kind, std::string_view body);

  ChatOutputOptions options_;
  ChatOutput result_;
  std::vector<Marker> content_markers_;
  Mode mode_ = Mode::kContent;
  size_t block_ = 0;           // index of the open reasoning or tool block spec
  std::string buf_;            // text received and not classified yet
  std::string body_;           // body of the open tool block / bare JSON candidate
  std::string pending_ws_[2];  // trailing whitespace held back: [0] content, [1] reasoning
  bool started_[2] = {false, false};
  bool finished_ = false;
  bool content_seen_ = false;  // any non-whitespace content or call so far (bare JSON check)
  bool call_announced_ = false;  // the open call's id and name went out in a delta
  std::string announced_id_, announced_name_;
  std::string streamed_args_;    // the open call's arguments sent so far
  JsonObjectScanner args_scanner_;  // over the open call's arguments
  size_t args_scanned_ = 0;
  JsonObjectScanner bare_scanner_;  // over the bare JSON candidate in body_
};

ChatOutput chat_output_parse(std::string_view text, const ChatOutputOptions& options);

}  // namespace brisk
