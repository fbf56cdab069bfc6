// Forced tool call in the XML syntax of Qwen3-Coder / Qwen3.5 chat templates (ChatFormat
// kQwenXml), for tool_choice required / named:
//   <tool_call>\n<function=NAME>\n
//   (<parameter=PARAM>\nVALUE\n</parameter>\n)*
//   </function>\n</tool_call>
// NAME is one of the allowed functions; PARAM one of its parameters not yet written (or any
// name when its schema leaves names open); every required parameter comes before
// </function>. A VALUE follows how the output parser (text/tool_call_parse.cpp) reads it back:
// parameters that may be strings are raw text (enums of strings: exactly one of the strings),
// the others JSON conforming to the parameter's schema (SchemaConstraint). Raw text may not
// contain "</parameter>", "<parameter=", "</function>" or "</tool_call>", which would end it
// early.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "runtime/schema_constraint.h"
#include "runtime/tool_function_spec.h"

namespace brisk {

class XmlToolCallConstraint {
 public:
  // free_text_until: any text first, up to this marker (the reasoning close), then whitespace.
  explicit XmlToolCallConstraint(std::vector<ToolFunctionSpec> functions, std::string free_text_until = "",
                                 int32_t max_whitespace_run = 4);
  bool accepts(std::string_view piece) const;
  void advance(std::string_view piece);  // throws brisk::Error when !accepts(piece)
  bool complete() const { return phase_ == Phase::kDone; }
  bool in_plain_string() const { return phase_ == Phase::kJson && json_.in_plain_string(); }
  bool accepts_any_text() const { return phase_ == Phase::kFreeText; }
  XmlToolCallConstraint borrowed_copy() const;
  bool step(uint8_t byte);

 private:
  enum class Phase : uint8_t {
    kFreeText, kOpen, kName, kTag, kParamName, kParamNewline, kText, kChoice, kJson, kLiteral, kDone,
  };
  struct Shared {
    std::vector<ToolFunctionSpec> functions;
    std::string free_text_until;
    int32_t max_whitespace_run = 4;
  };
  XmlToolCallConstraint() = default;
  bool start_value();
  void expect(const char* literal, uint32_t pos, Phase then);

  std::shared_ptr<const Shared> owner_;  // null in borrowed copies
  const Shared* shared_ = nullptr;
  Phase phase_ = Phase::kOpen;
  const char* literal_ = nullptr;  // kLiteral: the fixed text being matched, then `then_`
  Phase then_ = Phase::kDone;
  uint32_t pos_ = 0;               // position in the literal / tag / choice
  int32_t fn_ = -1;                // the function named
  int32_t param_ = -1;             // the parameter being written (-1: an open name)
  uint64_t seen_ = 0;              // parameters written
  uint32_t lo_ = 0, hi_ = 0;       // kChoice: candidates sharing the first pos_ bytes
  std::string buf_;                // kFreeText / kText: recent bytes; kName / kParamName: the name
  SchemaConstraint json_;          // kJson
};

}  // namespace brisk
