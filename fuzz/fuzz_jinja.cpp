// libFuzzer target: the Jinja template engine on arbitrary template source. Parses with the
// options chat templates use and renders a fixed small conversation (system, user, an assistant
// tool call, its result, a user turn, a tools array). Render limits are lowered so that every
// input does bounded work; brisk::Error is the only acceptable failure.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/jinja/template.h"

namespace {

const nlohmann::ordered_json& conversation() {
  static const nlohmann::ordered_json globals = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": "", "reasoning_content": "Use the tool.",
       "tool_calls": [{"id": "call_0", "type": "function",
                       "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "tool_call_id": "call_0", "content": "{\"temp\": 21}"},
      {"role": "user", "content": [{"type": "text", "text": "Thanks"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                              "required": ["city"]}}}],
    "add_generation_prompt": true,
    "bos_token": "<s>",
    "eos_token": "</s>",
    "enable_thinking": false
  })");
  return globals;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace brisk;
  if (size > (256u << 10)) return 0;
  const nlohmann::ordered_json& globals = conversation();
  try {
    const auto t = jinja::Template::parse(
        std::string(reinterpret_cast<const char*>(data), size),
        {.trim_blocks = true, .lstrip_blocks = true, .name = "fuzz.jinja",
         .limits = {.max_steps = 200'000, .max_call_depth = 64, .max_output_bytes = 1u << 20}});
    volatile size_t sink = t.render(globals).size();
    (void)sink;
  } catch (const Error&) {
  }
  return 0;
}
