// A chat request in neutral form (what both dialects parse into) and its preparation into a
// GenerationSpec: chat template render, tokenization, context and max_tokens checks, sampling,
// stop strings and output constraints (tool_choice, response_format).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/schema_constraint.h"
#include "server/generation.h"
#include "server/model_registry.h"

namespace brisk::server {

enum class ToolChoice { auto_, none, required, named };

struct ChatRequest {
  std::string model;
  ChatPromptInput render;                 // messages / tools in the OpenAI (HF template) convention
  std::optional<int64_t> max_tokens;
  const char* max_tokens_param = "max_tokens";
  SamplerParams sampling;
  std::vector<std::string> stop;
  std::string session;
  int32_t n = 1;
  int32_t logprobs = -1;
  bool stream = false;
  bool include_usage = false;
  ToolChoice tool_choice = ToolChoice::auto_;
  std::string tool_name;                  // for ToolChoice::named
  bool parallel_tool_calls = true;
  bool json_object = false;               // response_format json_object / json_schema
  std::shared_ptr<const CompiledSchema> json_schema;  // json_schema: the output conforms to it
  bool ignore_eos = false;                // extension: generate through end-of-generation tokens
  bool omit_thinking = false;             // Anthropic thinking.display "omitted"
  int32_t draft_max = -1;                 // "speculative.n_max" (parse_speculative)
};

struct PreparedChat {
  GenerationSpec spec;
  std::string prompt_text;
};

// tool_choice none: the tools are left out of the prompt and call markers stay text;
// required / named: the output is forced to one call (ToolCallConstraint); json_object: the
// output is forced to a JSON object. Throws HttpError 400 for what the model cannot honor.
PreparedChat prepare_chat(LoadedModel& model, ChatRequest req, int32_t max_tokens_ceiling);

// A request's JSON Schema (response_format.json_schema.schema, output_config.format.schema),
// compiled; HttpError 400 naming `param` (the request field) when it is malformed or asks for
// what is not enforced, the message starting with `where` (its full path in the request).
std::shared_ptr<const CompiledSchema> parse_json_schema(const nlohmann::json& schema, const std::string& param,
                                                        const std::string& where);

// A seed for a request that names none: different for every request (as OpenAI, vLLM and
// llama.cpp sample), so repeated requests at temperature > 0 give different answers.
uint64_t fresh_sampling_seed();
// Sampling fields shared by the dialects (temperature, top_p, top_k, min_p, penalties, seed,
// logit_bias); `n_vocab` bounds logit_bias ids; without `seed`, fresh_sampling_seed().
void parse_sampling(const nlohmann::json& body, SamplerParams& p, int32_t n_vocab);
// `tools`: function tools `{type: function, function: {name, description, parameters}}` (the
// OpenAI and Ollama shape), checked; null when absent or empty.
nlohmann::json parse_function_tools(const nlohmann::json& body);
// llama.cpp server's "speculative.n_max": drafted tokens per step at most for this request, 0
// turning speculative decoding off; -1 when absent (the server's --draft-max).
int32_t parse_speculative(const nlohmann::json& body);
// `stop` / `stop_sequences`: a string or an array of strings.
std::vector<std::string> parse_stop(const nlohmann::json& body, const char* name);
// Tokens of a prompt text (special tokens in the text are parsed, as rendered templates need).
// A text over prompt_byte_limit() is refused (HttpError 400) before it is tokenized.
std::vector<int32_t> tokenize_prompt(const LoadedModel& model, const std::string& text, bool add_special,
                                     const char* param = "messages");
// The bytes of the longest prompt text that can fit in the model's context: no token covers
// more than the longest token text (plus a leading space some decoders drop).
size_t prompt_byte_limit(const LoadedModel& model);

}  // namespace brisk::server
