// Output constraints of chat requests as scheduler TokenConstraints:
//   response_format json_object -> JsonConstraint (top-level object), EOS only once complete;
//   response_format json_schema -> SchemaConstraint (the compiled schema), likewise;
//   tool_choice required / named -> ToolCallConstraint in the model's tool-call syntax, the
//   arguments following the function's parameters schema where it compiles
//   (XmlToolCallConstraint for the Qwen XML syntax, Gemma4ToolCallConstraint for Gemma 4's).
// Both use the model's TokenMask (a trie over the decoded token texts), built once per model
// on first use.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "runtime/json_constraint.h"
#include "runtime/schema_constraint.h"
#include "runtime/tool_call_constraint.h"
#include "runtime/gemma4_tool_call_constraint.h"
#include "runtime/xml_tool_call_constraint.h"
#include "server/model_registry.h"
#include "runtime/scheduler.h"

namespace brisk::server {

// The model's token mask (built on first call; thread-safe).
std::shared_ptr<const TokenMask> model_token_mask(LoadedModel& model);

std::unique_ptr<TokenConstraint> make_json_constraint(LoadedModel& model);
// response_format json_schema: the output conforms to the compiled schema (SchemaConstraint).
std::unique_ptr<TokenConstraint> make_schema_constraint(LoadedModel& model, std::shared_ptr<const CompiledSchema> schema);
// names: allowed function names. `free_text_until`: e.g. "</think>" when the prompt opened a
// reasoning block (text is free until it, then the call is forced).
// schemas: empty, or each name's parameters schema (null: any object), which its arguments follow.
std::unique_ptr<TokenConstraint> make_tool_call_constraint(LoadedModel& model, std::vector<std::string> names,
                                                           const std::string& free_text_until,
                                                           std::vector<std::shared_ptr<const CompiledSchema>> schemas = {});

// The same for the XML call syntax (ChatFormat kQwenXml) and the Gemma 4 one (kGemma4).
std::unique_ptr<TokenConstraint> make_xml_tool_call_constraint(LoadedModel& model, std::vector<ToolFunctionSpec> functions,
                                                               const std::string& free_text_until);
std::unique_ptr<TokenConstraint> make_gemma4_tool_call_constraint(LoadedModel& model,
                                                                  std::vector<ToolFunctionSpec> functions,
                                                                  const std::string& free_text_until);

}  // namespace brisk::server
