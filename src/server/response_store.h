// The responses of POST /v1/responses kept in memory for `previous_response_id` and
// GET /v1/responses/{id}: least recently used first out, bounded by a count and by the bytes
// of their JSON (a response bigger than the byte bound is not kept).
#pragma once
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace brisk::server {

struct StoredResponse {
  nlohmann::json response;   // the Response object as returned
  nlohmann::json history;    // chat messages (OpenAI convention) up to and including its output
  std::string session;       // prefix-cache key it ran under
};

class ResponseStore {
 public:
  explicit ResponseStore(size_t max_count, size_t max_bytes = 64u << 20) : max_count_(max_count), max_bytes_(max_bytes) {}
  void put(const std::string& id, StoredResponse r);
  std::optional<StoredResponse> get(const std::string& id);
  bool erase(const std::string& id);
  size_t size() const;
  size_t bytes() const;

 private:
  struct Entry {
    StoredResponse value;
    size_t bytes = 0;
    std::list<std::string>::iterator lru;
  };
  void evict_locked();
  size_t max_count_, max_bytes_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;
  std::list<std::string> lru_;  // front: most recently used
  size_t bytes_ = 0;
};

}  // namespace brisk::server
