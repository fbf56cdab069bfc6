// Forced tool call in the Gemma 4 call syntax (ChatFormat kGemma4), for tool_choice required /
// named:
//   <|tool_call>call:NAME{key:value,key:value}<tool_call|>
// with bare keys, strings quoted by <|"|> (no escapes: the text may not contain <|"|> or
// <tool_call|>),
// numbers / true / false / null bare, objects {key:value,...} and arrays [value,...], and no
// whitespace between tokens (as the chat template writes calls). NAME is one of the allowed
// functions; the top-level keys are its parameters, each at most once, every required one
// before the closing brace. A parameter's value follows its ToolParamSpec: kText a string,
// kChoice one of the strings, kJson a value whose first byte the schema admits (integers
// without fraction or exponent); what is nested inside objects and arrays is not checked
// against the schema.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/json_constraint.h"
#include "runtime/tool_function_spec.h"

namespace brisk {

class Gemma4ToolCallConstraint {
 public:
  // free_text_until: any text first, up to this marker (the reasoning close), then whitespace.
  explicit Gemma4ToolCallConstraint(std::vector<ToolFunctionSpec> functions, std::string free_text_until = "");
  bool accepts(std::string_view piece) const;
  void advance(std::string_view piece);  // throws brisk::Error when !accepts(piece)
  bool complete() const { return phase_ == Phase::kDone; }
  bool in_plain_string() const { return false; }
  bool accepts_any_text() const { return phase_ == Phase::kFreeText; }
  Gemma4ToolCallConstraint borrowed_copy() const;
  bool step(uint8_t byte);

  static constexpr int kMaxDepth = 32;

 private:
  enum class Phase : uint8_t { kFreeText, kOpen, kName, kArgs, kClose, kDone };
  // Inside the arguments: what the next byte belongs to.
  enum class Leaf : uint8_t { kNone, kKey, kQuoteOpen, kString, kChoice, kQuoteClose, kScalar };
  enum class Slot : uint8_t { kFirst, kAfterValue, kNeedKey, kNeedValue };
  struct Level {
    bool array;
    Slot slot;
  };
  struct Shared {
    std::vector<ToolFunctionSpec> functions;
    std::string free_text_until;
  };
  Gemma4ToolCallConstraint() = default;
  bool step_args(uint8_t b);
  bool begin_value(uint8_t b);
  bool end_value();
  bool end_key();
  const ToolParamSpec* top_param() const;  // the top-level parameter whose value is being read

  std::shared_ptr<const Shared> owner_;  // null in borrowed copies
  const Shared* shared_ = nullptr;
  Phase phase_ = Phase::kOpen;
  uint32_t pos_ = 0;         // kOpen / kClose: position in the literal; quotes and choices too
  int32_t fn_ = -1;
  int32_t param_ = -1;       // top-level parameter being written (-1: an open name)
  uint64_t seen_ = 0;
  Leaf leaf_ = Leaf::kNone;
  bool integer_ = false;     // kScalar: no fraction or exponent
  uint32_t lo_ = 0, hi_ = 0; // kChoice: candidates sharing the first pos_ bytes
  std::string buf_;          // names, keys, the free-text / string tail
  JsonConstraint scalar_;    // kScalar
  int32_t depth_ = 0;
  std::array<Level, kMaxDepth> levels_{};
};

}  // namespace brisk
