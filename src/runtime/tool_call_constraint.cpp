// Forced tool call recognizer (see tool_call_constraint.h).
#include "runtime/tool_call_constraint.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/constraint_steps.h"

namespace brisk {

ToolCallConstraint::ToolCallConstraint(ToolCallSyntax syntax, std::vector<std::string> names,
                                       JsonConstraintOptions arguments_options,
                                       std::vector<std::shared_ptr<const CompiledSchema>> schemas) {
  BRISK_CHECK(!names.empty(), "tool call constraint: no function names given");
  for (const std::string& n : names) {
    BRISK_CHECK(!n.empty(), "tool call constraint: empty function name");
  }
  BRISK_CHECK(arguments_options.require_object,
              "tool call constraint: arguments must be constrained to a JSON object");
  BRISK_CHECK(!syntax.before_name.empty() || syntax.free_text_until.empty(),
              "tool call constraint: free text needs a non-empty opening to end it");
  BRISK_CHECK(schemas.empty() || schemas.size() == names.size(),
              "tool call constraint: one parameters schema per name, or none");
  static const std::shared_ptr<const CompiledSchema> any_object =
      compile_json_schema(nlohmann::json{{"type", "object"}});
  schemas.resize(names.size());
  for (auto& s : schemas)
    if (!s || !json_schema_requires_object(*s)) s = any_object;
  owner_ = std::make_shared<const Shared>(
      Shared{std::move(syntax), std::move(names), std::move(schemas), arguments_options.max_whitespace_run});
  shared_ = owner_.get();
  if (!shared_->syntax.free_text_until.empty()) {
    phase_ = Phase::kFreeText;
  } else if (shared_->syntax.before_name.empty()) {
    phase_ = Phase::kName;
  }
}

ToolCallConstraint ToolCallConstraint::borrowed_copy() const {
  ToolCallConstraint c;
  c.shared_ = shared_;
  c.phase_ = phase_;
  c.pos_ = pos_;
  c.tail_ = tail_;
  c.name_ = name_;
  c.args_ = args_;
  return c;
}

bool ToolCallConstraint::accepts(std::string_view piece) const {
  ToolCallConstraint copy = *this;
  for (char c : piece) {
    if (!copy.step(static_cast<uint8_t>(c))) return false;
  }
  return true;
}

void ToolCallConstraint::advance(std::string_view piece) {
  ToolCallConstraint copy = *this;
  for (size_t i = 0; i < piece.size(); ++i) {
    BRISK_CHECK(copy.step(static_cast<uint8_t>(piece[i])), "tool call constraint: byte ", i,
                " of the appended piece does not continue the forced tool call");
  }
  *this = std::move(copy);
}

void ToolCallConstraint::start_arguments() {
  const auto it = std::find(shared_->names.begin(), shared_->names.end(), name_);
  const size_t i = size_t(it - shared_->names.begin());
  args_ = SchemaConstraint::unowned(shared_->schemas[i].get(), shared_->max_whitespace_run);
}

void ToolCallConstraint::enter_after() {
  phase_ = shared_->syntax.after_arguments.empty() ? Phase::kDone : Phase::kAfter;
  pos_ = 0;
}

bool ToolCallConstraint::step(uint8_t b) {
  const ToolCallSyntax& syn = shared_->syntax;
  switch (phase_) {
    case Phase::kFreeText:
      if (marker_reached(tail_, syn.free_text_until, b)) {
        phase_ = Phase::kBefore;
        pos_ = 0;
      }
      return true;
    case Phase::kBefore:
      // Whitespace may separate the reasoning close from the call.
      if (pos_ == 0 && !syn.free_text_until.empty() &&
          (b == ' ' || b == '\n' || b == '\t' || b == '\r') &&
          static_cast<uint8_t>(syn.before_name[0]) != b) {
        return true;
      }
      if (b != static_cast<uint8_t>(syn.before_name[pos_])) return false;
      if (++pos_ == syn.before_name.size()) {
        phase_ = Phase::kName;
        pos_ = 0;
      }
      return true;
    case Phase::kName: {
      // A complete name followed by the separator's first byte ends the name; otherwise the
      // byte must extend some allowed name.
      const std::string& sep = syn.between_name_and_arguments;
      const bool name_done =
          std::find(shared_->names.begin(), shared_->names.end(), name_) != shared_->names.end();
      if (name_done && !sep.empty() && b == static_cast<uint8_t>(sep[0])) {
        start_arguments();
        phase_ = Phase::kBetween;
        pos_ = 1;
        if (pos_ == sep.size()) phase_ = Phase::kArguments;
        return true;
      }
      if (name_done && sep.empty()) {
        start_arguments();
        phase_ = Phase::kArguments;
        return step(b);
      }
      name_.push_back(static_cast<char>(b));
      for (const std::string& n : shared_->names) {
        if (n.size() >= name_.size() && n.compare(0, name_.size(), name_) == 0) return true;
      }
      return false;
    }
    case Phase::kBetween:
      if (b != static_cast<uint8_t>(syn.between_name_and_arguments[pos_])) return false;
      if (++pos_ == syn.between_name_and_arguments.size()) phase_ = Phase::kArguments;
      return true;
    case Phase::kArguments:
      if (!args_.step(b)) return false;
      if (args_.complete()) enter_after();
      return true;
    case Phase::kAfter:
      if (b != static_cast<uint8_t>(syn.after_arguments[pos_])) return false;
      if (++pos_ == syn.after_arguments.size()) phase_ = Phase::kDone;
      return true;
    case Phase::kDone:
      return false;
  }
  return false;
}

ToolCallSyntax tool_call_syntax(ChatFormat format) {
  switch (format) {
    case ChatFormat::kHermes:
      return {.before_name = "<tool_call>\n{\"name\": \"",
              .between_name_and_arguments = "\", \"arguments\": ",
              .after_arguments = "}\n</tool_call>"};
    case ChatFormat::kMistral:
      return {.before_name = "[TOOL_CALLS]", .between_name_and_arguments = "[ARGS]",
              .after_arguments = ""};
    case ChatFormat::kLlama3:
    case ChatFormat::kGemma:
      return {.before_name = "{\"name\": \"",
              .between_name_and_arguments = "\", \"parameters\": ",
              .after_arguments = "}"};
    case ChatFormat::kDeepSeek:
      return {.before_name = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>",
              .between_name_and_arguments = "<｜tool▁sep｜>",
              .after_arguments = "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"};
    case ChatFormat::kGptOss:
      return {.before_name = "<|channel|>commentary to=functions.",
              .between_name_and_arguments = " <|constrain|>json<|message|>",
              .after_arguments = "<|call|>"};
    case ChatFormat::kContentOnly:
    case ChatFormat::kQwenXml:
    case ChatFormat::kGemma4:
      break;
  }
  fail("tool call constraint: format ", chat_format_name(format),
       " has no JSON-object call syntax to force (tool_choice required/named is supported for "
       "hermes, mistral, llama3, gemma, deepseek and gpt_oss)");
}

}  // namespace brisk
