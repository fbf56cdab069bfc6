// Server counters and their Prometheus text exposition (GET /metrics).
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "server/model_registry.h"

namespace brisk::server {

// A Prometheus histogram: cumulative counts per upper bound, sum and count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double v);
  void render(std::ostringstream& os, const char* name) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // [bounds + 1]: the last one is +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

struct ConnectionGauges {
  int32_t open_connections = 0;
  uint64_t refused_connections = 0;
};

class Metrics {
 public:
  Metrics();
  // One reply, whoever made it (route handler, router, connection layer).
  void count_request(const std::string& route, int status);
  // One finished choice; `e2e_seconds`: from the request's arrival to the choice's end.
  void count_generation(const GenerationResult& r, double e2e_seconds);
  std::string render(const ModelRegistry& registry, const ConnectionGauges& connections) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  uint64_t prompt_tokens_ = 0, cached_tokens_ = 0, completion_tokens_ = 0;
  uint64_t finished_[4] = {0, 0, 0, 0};  // by FinishReason
  Histogram ttft_, tpot_, e2e_, queue_;
};

// Resident set size of this process in bytes (0 when unknown).
uint64_t process_rss_bytes();

}  // namespace brisk::server
