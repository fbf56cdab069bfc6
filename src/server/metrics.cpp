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

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  counts_[i]++;
  sum_ += v;
  count_++;
}

void Histogram::render(std::ostringstream& os, const char* name) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    os << name << "_bucket{le=\"";
    if (i < bounds_.size()) os << bounds_[i];
    else os << "+Inf";
    os << "\"} " << cumulative << '\n';
  }
  os << name << "_sum " << sum_ << '\n' << name << "_count " << count_ << '\n';
}

// Bucket bounds in seconds, as vLLM's histograms of the same names.
Metrics::Metrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}),
      tpot_({0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0}),
      e2e_({0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0}),
      queue_({0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0}) {}

void Metrics::count_request(const std::string& route, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  requests_[{route, status}]++;
}

void Metrics::count_generation(const GenerationResult& r, double e2e_seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  prompt_tokens_ += uint64_t(r.prompt_tokens);
  cached_tokens_ += uint64_t(r.cached_tokens);
  completion_tokens_ += uint64_t(r.completion_tokens);
  finished_[int(r.reason) & 3]++;
  if (r.reason == FinishReason::error) return;
  queue_.observe(r.queue_ms / 1000.0);
  if (r.completion_tokens >= 1) ttft_.observe((r.queue_ms + r.prefill_ms) / 1000.0);
  if (r.completion_tokens >= 2) tpot_.observe(r.decode_ms / 1000.0 / double(r.completion_tokens - 1));
  e2e_.observe(e2e_seconds);
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

std::string Metrics::render(const ModelRegistry& registry, const ConnectionGauges& connections) const {
  std::ostringstream os;
  {
    std::lock_guard<std::mutex> lock(mu_);
    metric(os, "brisk_requests_total", "counter", "HTTP replies by route and status (route 'connection': refused before a request was read)");
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
    metric(os, "brisk_time_to_first_token_seconds", "histogram", "from the request's arrival at the scheduler to its first token");
    ttft_.render(os, "brisk_time_to_first_token_seconds");
    metric(os, "brisk_time_per_output_token_seconds", "histogram", "mean time between output tokens, one sample per choice");
    tpot_.render(os, "brisk_time_per_output_token_seconds");
    metric(os, "brisk_e2e_request_latency_seconds", "histogram", "from the HTTP request's arrival to the choice's last token");
    e2e_.render(os, "brisk_e2e_request_latency_seconds");
    metric(os, "brisk_request_queue_time_seconds", "histogram", "time waiting for a sequence slot");
    queue_.render(os, "brisk_request_queue_time_seconds");
  }
  metric(os, "brisk_http_connections", "gauge", "open HTTP connections");
  os << "brisk_http_connections " << connections.open_connections << '\n';
  metric(os, "brisk_http_connections_refused_total", "counter", "connections closed at accept: over the connection limits and the reserve");
  os << "brisk_http_connections_refused_total " << connections.refused_connections << '\n';
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
  metric(os, "brisk_state_snapshots", "gauge", "recurrent-state snapshots held for prefix reuse (hybrid models)");
  for (const auto& m : models)
    os << "brisk_state_snapshots{model=\"" << label(m->name) << "\"} " << m->scheduler->stats().state_snapshots << '\n';
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
  metric(os, "brisk_spec_verify_steps_total", "counter",
         "speculative decoding: verify steps (one per sequence and step with drafted tokens)");
  for (const auto& m : models)
    os << "brisk_spec_verify_steps_total{model=\"" << label(m->name) << "\"} " << m->scheduler->stats().spec_verify << '\n';
  metric(os, "brisk_spec_draft_tokens_total", "counter", "speculative decoding: drafted tokens verified");
  for (const auto& m : models)
    os << "brisk_spec_draft_tokens_total{model=\"" << label(m->name) << "\"} " << m->scheduler->stats().spec_drafted << '\n';
  metric(os, "brisk_spec_accepted_tokens_total", "counter", "speculative decoding: drafted tokens kept");
  for (const auto& m : models)
    os << "brisk_spec_accepted_tokens_total{model=\"" << label(m->name) << "\"} " << m->scheduler->stats().spec_accepted
       << '\n';
  metric(os, "brisk_spec_acceptance_rate", "gauge", "speculative decoding: drafted tokens kept / drafted");
  for (const auto& m : models) {
    const auto s = m->scheduler->stats();
    os << "brisk_spec_acceptance_rate{model=\"" << label(m->name) << "\"} "
       << (s.spec_drafted ? double(s.spec_accepted) / double(s.spec_drafted) : 0.0) << '\n';
  }
  metric(os, "brisk_spec_mean_accepted_length", "gauge", "speculative decoding: drafted tokens kept per verify step");
  for (const auto& m : models) {
    const auto s = m->scheduler->stats();
    os << "brisk_spec_mean_accepted_length{model=\"" << label(m->name) << "\"} "
       << (s.spec_verify ? double(s.spec_accepted) / double(s.spec_verify) : 0.0) << '\n';
  }
  metric(os, "brisk_spec_steps_total", "counter",
         "speculative decoding: scheduler steps by mode (batched: every decoding sequence verified in one batch; "
         "plain: more sequences decoding than --spec-max-seqs, decoded without drafts)");
  for (const auto& m : models) {
    const auto s = m->scheduler->stats();
    os << "brisk_spec_steps_total{model=\"" << label(m->name) << "\",mode=\"batched\"} " << s.spec_batched_steps << '\n';
    os << "brisk_spec_steps_total{model=\"" << label(m->name) << "\",mode=\"plain\"} " << s.spec_plain_steps << '\n';
  }
  metric(os, "brisk_resident_memory_bytes", "gauge", "resident set size of the server process");
  os << "brisk_resident_memory_bytes " << process_rss_bytes() << '\n';
  return os.str();
}

}  // namespace brisk::server
