// libFuzzer target: the server's request-body parsing on arbitrary bytes. parse_body (depth
// bound, JSON, object check), then the typed field readers the OpenAI and Anthropic routes
// use: sampling fields (parse_sampling, logit_bias ids bounded by a vocabulary size), stop /
// stop_sequences, function tools, scalar fields, and the Ollama routes' `options`,
// `keep_alive` and model name; the body is re-serialized with dump_json. HttpError (a
// 400 for the client) and brisk::Error are the only acceptable failures.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "core/error.h"
#include "runtime/sampler.h"
#include "server/chat_request.h"
#include "server/errors.h"
#include "server/json_fields.h"
#include "server/ollama_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace brisk;
  using namespace brisk::server;
  if (size > (1u << 20)) return 0;
  json body;
  try {
    body = parse_body(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const HttpError&) {
    return 0;
  } catch (const Error&) {
    return 0;
  }
  volatile size_t sink = dump_json(body).size();
  // Each reader on its own: one rejected field must not hide a crash in the next.
  auto guarded = [&](auto&& fn) {
    try {
      fn();
    } catch (const HttpError&) {
    } catch (const Error&) {
    }
  };
  guarded([&] {
    SamplerParams p;
    parse_sampling(body, p, 32000);
    sink = sink + p.logit_bias.size();
  });
  guarded([&] { sink = sink + parse_stop(body, "stop").size(); });
  guarded([&] { sink = sink + parse_stop(body, "stop_sequences").size(); });
  guarded([&] { sink = sink + get_string(body, "model").value_or("").size(); });
  guarded([&] { sink = sink + get_bool(body, "stream").value_or(false); });
  guarded([&] { sink = sink + size_t(get_int(body, "max_tokens", 1, 1 << 30).value_or(0)); });
  guarded([&] { sink = sink + size_t(get_int(body, "n", 1, 16).value_or(0)); });
  guarded([&] {
    const auto v = get_int(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
    sink = sink + size_t(v.value_or(0));
  });
  guarded([&] { sink = sink + size_t(get_number(body, "temperature", 0.0, 2.0).value_or(0.0)); });
  guarded([&] { sink = sink + parse_function_tools(body).size(); });
  guarded([&] {
    SamplerParams p;
    const OllamaOptions o = parse_ollama_options(body, p, 32000);
    sink = sink + o.stop.size() + size_t(o.num_predict.value_or(0)) + size_t(o.num_ctx.value_or(0));
  });
  guarded([&] { sink = sink + size_t(parse_keep_alive(body).value_or(0.0) != 0.0); });
  guarded([&] { sink = sink + ollama_model_field(body).size(); });
  return 0;
}
