// libFuzzer target: ChatOutputParser on arbitrary model output. The first input byte picks the
// chunk sizes; the rest is the text. For every chat format the text is parsed whole
// (chat_output_parse) and streamed in chunks through ChatOutputParser, with calls streamed and
// not. The documented contract is checked: after finish() the streamed result() equals the
// whole-text parse, however the text was split. brisk::Error is the only acceptable failure.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/chat_output.h"

namespace {

using brisk::ChatFormat;

constexpr ChatFormat kFormats[] = {
    ChatFormat::kContentOnly, ChatFormat::kHermes,  ChatFormat::kQwenXml,
    ChatFormat::kLlama3,      ChatFormat::kMistral, ChatFormat::kGemma,
    ChatFormat::kGemma4,      ChatFormat::kDeepSeek, ChatFormat::kGptOss,
};

const nlohmann::json& tools() {
  static const nlohmann::json t = nlohmann::json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                     "units": {"type": "string", "enum": ["c", "f"]}}}}}])");
  return t;
}

bool same(const brisk::ChatOutput& a, const brisk::ChatOutput& b) {
  if (a.content != b.content || a.reasoning != b.reasoning || a.warning != b.warning) return false;
  if (a.tool_calls.size() != b.tool_calls.size()) return false;
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    const auto &x = a.tool_calls[i], &y = b.tool_calls[i];
    if (x.id != y.id || x.name != y.name || x.arguments != y.arguments) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace brisk;
  if (size < 1 || size > (64u << 10)) return 0;
  const uint8_t ctl = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t chunk_a = 1 + (ctl & 7), chunk_b = 1 + ((ctl >> 3) & 15);
  for (ChatFormat format : kFormats) {
    for (bool stream_calls : {true, false}) {
      const ChatOutputOptions opt = {
          .format = format,
          .starts_in_reasoning = (ctl & 0x80) != 0,
          .parse_tool_calls = (ctl & 0x40) == 0,
          .id_seed = "fuzz",
          .tools = tools(),
          .stream_tool_calls = stream_calls,
      };
      try {
        const ChatOutput whole = chat_output_parse(text, opt);
        ChatOutputParser parser(opt);
        size_t pos = 0;
        for (size_t k = 0; pos < text.size(); ++k) {
          const size_t n = std::min(text.size() - pos, (k & 1) ? chunk_b : chunk_a);
          (void)parser.feed(text.substr(pos, n));
          pos += n;
        }
        (void)parser.finish();
        (void)parser.finish();  // idempotent
        if (!same(parser.result(), whole)) std::abort();  // streaming must equal whole-text parse
      } catch (const Error&) {
      }
    }
  }
  return 0;
}
