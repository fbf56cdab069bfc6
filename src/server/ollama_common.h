// What the Ollama routes (ollama_api.cpp: chat / generate / embed; ollama_models.cpp: tags,
// show, ps, pull, delete, version) share: model names as Ollama clients write them, times,
// `keep_alive`, `options`, and newline-delimited JSON.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/sampler.h"
#include "server/generation.h"
#include "server/model_registry.h"

namespace brisk::server {

// The served name an Ollama model name refers to: the name itself, else the name without a
// ":latest" tag. HttpError 404 `model "NAME" not found` when neither is served.
std::string ollama_served_name(const ModelRegistry& registry, const std::string& name);
// How /api/tags lists a served name: "qwen3" -> "qwen3:latest"; a name with a tag stays.
std::string ollama_listed_name(const std::string& served);
// `model`, else `name` (clients send either); "" when neither.
std::string ollama_model_field(const nlohmann::json& body);

// RFC 3339 UTC with nanoseconds ("2026-12-05T06:00:00.123456789Z").
std::string ollama_time(std::chrono::system_clock::time_point t);
int64_t ollama_nanos(std::chrono::steady_clock::duration d);

// `keep_alive`: seconds (a number) or a duration ("5m", "1h30m", "300ms", "-1"); negative:
// forever. nullopt when absent; HttpError 400 naming the field when malformed.
std::optional<double> parse_keep_alive(const nlohmann::json& body);

// `options` mapped to brisk's sampler and limits. Hardware and load options (num_gpu,
// num_thread, num_batch, use_mmap, ...) are accepted and have no effect; sampler options
// brisk has no equivalent for (mirostat, typical_p, tfs_z other than their off values) are a
// 400 naming them.
struct OllamaOptions {
  std::optional<int64_t> num_predict;  // absent / negative: until the context is full
  std::optional<int64_t> num_ctx;      // prompt + output bound (capped by the server's --ctx)
  std::vector<std::string> stop;
};
OllamaOptions parse_ollama_options(const nlohmann::json& body, SamplerParams& sampling, int32_t n_vocab);

// Tool calls as Ollama writes them: {id, function: {index, name, arguments: object}}; the
// arguments text parsed (a call cut short: what was written of it, closed; unparseable: {}).
nlohmann::json ollama_tool_calls(const std::vector<ToolCallChunk>& calls);

// One line of a newline-delimited JSON stream.
std::string ndjson_line(const nlohmann::json& j);

}  // namespace brisk::server
