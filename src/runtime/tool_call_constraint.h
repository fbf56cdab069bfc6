// ToolCallConstraint forces one tool call in a chat format's syntax:
//   before_name NAME between_name_and_arguments {JSON object} after_arguments
// with NAME one of the allowed names (tool_choice "required": all tools; named: one) and the
// arguments conforming to that function's parameters schema (SchemaConstraint) when given.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/json_constraint.h"
#include "runtime/schema_constraint.h"
#include "text/chat_output.h"

namespace brisk {

// How a format writes one tool call whose arguments are a JSON object.
struct ToolCallSyntax {
  std::string before_name;                // e.g. "<tool_call>\n{\"name\": \""
  std::string between_name_and_arguments; // e.g. "\", \"arguments\": "
  std::string after_arguments;            // e.g. "}\n</tool_call>"
  // When set, any text is allowed first, up to and including this marker, then whitespace:
  // the reasoning close when the prompt opened a reasoning block (e.g. "</think>").
  std::string free_text_until = {};
};

// The forced-call syntax of a chat output format whose call arguments are a JSON object
// (hermes, mistral, llama3, gemma, deepseek, gpt_oss); throws brisk::Error for the others.
ToolCallSyntax tool_call_syntax(ChatFormat format);

class ToolCallConstraint {
 public:
  // names: the allowed function names (non-empty; each non-empty). schemas: empty, or one per
  // name: the function's parameters schema, which its arguments then conform to (null, or a
  // schema that does not require an object: any JSON object). arguments_options: only
  // max_whitespace_run is used; the arguments are always an object.
  ToolCallConstraint(ToolCallSyntax syntax, std::vector<std::string> names,
                     JsonConstraintOptions arguments_options = {.require_object = true},
                     std::vector<std::shared_ptr<const CompiledSchema>> schemas = {});
  bool accepts(std::string_view piece) const;
  void advance(std::string_view piece);  // throws brisk::Error when !accepts(piece)
  bool complete() const { return phase_ == Phase::kDone; }
  bool in_plain_string() const { return phase_ == Phase::kArguments && args_.in_plain_string(); }
  // Before free_text_until has appeared every byte is accepted.
  bool accepts_any_text() const { return phase_ == Phase::kFreeText; }
  bool step(uint8_t byte);

 private:
  enum class Phase : uint8_t { kFreeText, kBefore, kName, kBetween, kArguments, kAfter, kDone };
  struct Shared {
    ToolCallSyntax syntax;
    std::vector<std::string> names;
    std::vector<std::shared_ptr<const CompiledSchema>> schemas;  // [names.size()], never null
    int32_t max_whitespace_run = 0;
  };
  void enter_after();
  void start_arguments();  // name_ is complete: its schema governs the arguments
  friend class TokenMask;
  // A copy for the mask walk: borrows the syntax from `this` (no reference count traffic).
  ToolCallConstraint borrowed_copy() const;
  ToolCallConstraint() = default;

  std::shared_ptr<const Shared> owner_;  // null in borrowed copies
  const Shared* shared_ = nullptr;
  Phase phase_ = Phase::kBefore;
  size_t pos_ = 0;           // position in the current literal
  std::string tail_;         // kFreeText: the last bytes, to spot free_text_until
  std::string name_;         // name bytes read so far
  SchemaConstraint args_;
};

}  // namespace brisk
