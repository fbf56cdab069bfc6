#include "server/metrics.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace brisk::server {

uint64_t process_rss_bytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(f >> size >> resident)) return 0;
  return resident * uint64_t(sysconf(_SC_PAGESIZE));
}

void Metrics::count_request(const std::string& route, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  requests_[{route, status}]++;
}

void Metrics::count_generation(const GenerationResult& r) {
  std::lock_guard<std::mutex> lock(mu_);
  prompt_tokens_ += uint64_t(r.prompt_tokens);
  cached_tokens_ += uint64_t(r.cached_tokens);
  completion_tokens_ += uint64_t(r.completion_tokens);
  finished_[int(r.reason) & 3]++;
}

namespace {
void metric(std::ostringstream& os, const char* name, const char* type, const char* help) {
  os << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') { out += "\\n"; continue; }
    out += c;
  }
  return out;
}
}  // namespace

std::string Metrics::render(const ModelRegistry& registry) const {
  std::ostringstream os;
  {
    std::lock_guard<std::mutex> lock(mu_);
    metric(os, "brisk_requests_total", "counter", "HTTP requests by route and status");
    for (const auto& [k, n] : requests_)
      os << "brisk_requests_total{route=\"" << label(k.first) << "\",status=\"" << k.second << "\"} " << n << '\n';
    metric(os, "brisk_prompt_tokens_total", "counter", "prompt tokens of finished generations");
    os << "brisk_prompt_tokens_total " << prompt_tokens_ << '\n';
    metric(os, "brisk_cache_hit_tokens_total", "counter", "prompt tokens reused from the prefix cache");
    os << "brisk_cache_hit_tokens_total " << cached_tokens_ << '\n';
    metric(os, "brisk_generated_tokens_total", "counter", "completion tokens of finished generations");
    os << "brisk_generated_tokens_total " << completion_tokens_ << '\n';
    metric(os, "brisk_generations_total", "counter", "finished generations by finish reason");
    const char* reasons[] = {"stop", "length", "cancelled", "error"};
    for (int i = 0; i < 4; ++i)
      os << "brisk_generations_total{reason=\"" << reasons[i] << "\"} " << finished_[i] << '\n';
  }
  auto models = registry.resident();
  metric(os, "brisk_models_resident", "gauge", "models loaded now");
  os << "brisk_models_resident " << models.size() << '\n';
  // Speech models have no scheduler (no queue or sequence slots of their own to report).
  std::erase_if(models, [](const auto& m) { return !m->scheduler; });
  metric(os, "brisk_queue_depth", "gauge", "requests waiting for a sequence slot");
  for (const auto& m : models)
    os << "brisk_queue_depth{model=\"" << label(m->name) << "\"} " << m->scheduler->stats().queue_depth << '\n';
  metric(os, "brisk_active_sequences", "gauge", "sequences prefilling or decoding");
  for (const auto& m : models)
    os << "brisk_active_sequences{model=\"" << label(m->name) << "\"} " << m->scheduler->stats().active << '\n';
  metric(os, "brisk_prefix_cache_tokens", "gauge", "tokens held by idle cached sequences");
  for (const auto& m : models)
    os << "brisk_prefix_cache_tokens{model=\"" << label(m->name) << "\"} "
       << m->scheduler->stats().cache_resident_tokens << '\n';
  metric(os, "brisk_prefill_tokens_per_second", "gauge", "prompt tokens decoded per second of step time");
  for (const auto& m : models) {
    const auto s = m->scheduler->stats();
    os << "brisk_prefill_tokens_per_second{model=\"" << label(m->name) << "\"} "
       << (s.prefill_seconds > 0 ? double(s.prefill_tokens) / s.prefill_seconds : 0.0) << '\n';
  }
  metric(os, "brisk_decode_tokens_per_second", "gauge", "generated tokens per second of step time (all streams)");
  for (const auto& m : models) {
    const auto s = m->scheduler->stats();
    os << "brisk_decode_tokens_per_second{model=\"" << label(m->name) << "\"} "
       << (s.decode_seconds > 0 ? double(s.generated_tokens) / s.decode_seconds : 0.0) << '\n';
  }
  metric(os, "brisk_resident_memory_bytes", "gauge", "resident set size of the server process");
  os << "brisk_resident_memory_bytes " << process_rss_bytes() << '\n';
  return os.str();
}

}  // namespace brisk::server
