// Server counters and their Prometheus text exposition (GET /metrics).
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "server/model_registry.h"

namespace brisk::server {

class Metrics {
 public:
  void count_request(const std::string& route, int status);
  void count_generation(const GenerationResult& r);
  std::string render(const ModelRegistry& registry) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  uint64_t prompt_tokens_ = 0, cached_tokens_ = 0, completion_tokens_ = 0;
  uint64_t finished_[4] = {0, 0, 0, 0};  // by FinishReason
};

// Resident set size of this process in bytes (0 when unknown).
uint64_t process_rss_bytes();

}  // namespace brisk::server
