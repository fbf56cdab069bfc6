#include "server/ollama_common.h"

#include <cmath>
#include <cstdlib>
#include <ctime>
#include <limits>

#include "core/error.h"
#include "server/chat_request.h"
#include "server/errors.h"
#include "server/json_fields.h"

namespace brisk::server {

namespace {

constexpr const char* kLatestTag = ":latest";

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::string ollama_served_name(const ModelRegistry& registry, const std::string& name) {
  if (name.empty()) bad_request("model", "'model' is required");
  if (registry.has(name)) return name;
  if (ends_with(name, kLatestTag)) {
    const std::string bare = name.substr(0, name.size() - std::char_traits<char>::length(kLatestTag));
    if (!bare.empty() && registry.has(bare)) return bare;
  }
  throw HttpError(404, str_cat("model \"", name, "\" not found, try pulling it first"), "model");
}

std::string ollama_listed_name(const std::string& served) {
  // A tag follows the last ':' of the last path component ("org/name:Q8_0").
  const size_t slash = served.rfind('/');
  const size_t colon = served.find(':', slash == std::string::npos ? 0 : slash + 1);
  return colon == std::string::npos ? served + kLatestTag : served;
}

std::string ollama_model_field(const nlohmann::json& body) {
  if (auto m = get_string(body, "model"); m && !m->empty()) return *m;
  return get_string(body, "name").value_or("");
}

std::string ollama_time(std::chrono::system_clock::time_point t) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  const std::time_t secs = std::time_t(ns / 1000000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[48];
  const size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof(buf) - n, ".%09lldZ", static_cast<long long>(ns % 1000000000));
  return buf;
}

int64_t ollama_nanos(std::chrono::steady_clock::duration d) {
  return std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

std::optional<double> parse_keep_alive(const nlohmann::json& body) {
  const json* f = field(body, "keep_alive");
  if (!f) return std::nullopt;
  if (f->is_number()) {
    const double v = f->get<double>();
    if (!std::isfinite(v)) bad_request("keep_alive", "'keep_alive' must be a finite number of seconds");
    return v;
  }
  if (!f->is_string()) bad_request("keep_alive", "'keep_alive' must be a number of seconds or a duration such as \"5m\"");
  const std::string s = f->get<std::string>();
  const auto malformed = [&] {
    bad_request("keep_alive", str_cat("'keep_alive' \"", s, "\" is not a duration (e.g. \"30s\", \"5m\", \"1h\", \"-1\")"));
  };
  if (s.empty()) malformed();
  // A bare number is seconds; otherwise NUMBER UNIT pairs (ns, us, ms, s, m, h), as Go writes them.
  char* end = nullptr;
  const double bare = std::strtod(s.c_str(), &end);
  if (end && *end == '\0') {
    if (!std::isfinite(bare)) malformed();
    return bare;
  }
  size_t i = 0;
  double sign = 1.0, total = 0.0;
  if (s[i] == '-' || s[i] == '+') sign = s[i++] == '-' ? -1.0 : 1.0;
  if (i >= s.size()) malformed();
  while (i < s.size()) {
    const char* start = s.c_str() + i;
    const double v = std::strtod(start, &end);
    if (end == start || v < 0 || !std::isfinite(v)) malformed();
    i = size_t(end - s.c_str());
    const size_t u = i;
    while (i < s.size() && std::isalpha(static_cast<unsigned char>(s[i]))) ++i;
    const std::string unit = s.substr(u, i - u);
    double scale = 0;
    if (unit == "h") scale = 3600;
    else if (unit == "m") scale = 60;
    else if (unit == "s") scale = 1;
    else if (unit == "ms") scale = 1e-3;
    else if (unit == "us") scale = 1e-6;
    else if (unit == "ns") scale = 1e-9;
    else malformed();
    total += v * scale;
  }
  return sign * total;
}

OllamaOptions parse_ollama_options(const nlohmann::json& body, SamplerParams& sampling, int32_t n_vocab) {
  OllamaOptions out;
  const json* o = field(body, "options");
  json sampler = json::object();
  if (o) {
    if (!o->is_object()) bad_request("options", "'options' must be an object");
    // The sampler options under brisk's (OpenAI-convention) names, parsed by the same code.
    for (const char* k : {"temperature", "top_k", "top_p", "min_p", "presence_penalty", "frequency_penalty", "seed"})
      if (const json* v = field(*o, k)) sampler[k] = *v;
    if (const json* v = field(*o, "repeat_penalty")) sampler["repetition_penalty"] = *v;
    for (const char* k : {"mirostat"})
      if (const json* v = field(*o, k); v && !(v->is_number() && v->get<double>() == 0.0))
        bad_request("options", str_cat("options.", k, " is not supported (brisk samples with top_k / top_p / min_p)"));
    for (const char* k : {"typical_p", "tfs_z"})
      if (const json* v = field(*o, k); v && !(v->is_number() && v->get<double>() == 1.0))
        bad_request("options", str_cat("options.", k, " is not supported; only its off value 1.0 is accepted"));
  }
  try {
    parse_sampling(sampler, sampling, n_vocab);
    if (o) {
      if (auto v = get_int(*o, "repeat_last_n", -1, 1 << 20)) sampling.penalty_last_n = int32_t(*v);
      out.num_predict = get_int(*o, "num_predict", std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
      out.num_ctx = get_int(*o, "num_ctx", 1, std::numeric_limits<int32_t>::max());
      out.stop = parse_stop(*o, "stop");
    }
  } catch (const HttpError& e) {
    throw HttpError(e.status(), str_cat("options: ", e.what()), "options");
  }
  if (out.num_predict && *out.num_predict <= 0) out.num_predict.reset();
  return out;
}

nlohmann::json ollama_tool_calls(const std::vector<ToolCallChunk>& calls) {
  json out = json::array();
  for (const auto& c : calls) {
    json args = json::parse(c.arguments, nullptr, false);
    if (!args.is_object()) args = json::parse(close_partial_json(c.arguments), nullptr, false);
    if (!args.is_object()) args = json::object();
    out.push_back({{"id", c.id}, {"function", {{"index", c.index}, {"name", c.name}, {"arguments", args}}}});
  }
  return out;
}

std::string ndjson_line(const nlohmann::json& j) { return dump_json(j) + "\n"; }

}  // namespace brisk::server
