#include "server/response_store.h"

namespace brisk::server {

void ResponseStore::put(const std::string& id, StoredResponse r) {
  const size_t bytes = r.response.dump().size() + r.history.dump().size() + r.session.size() + id.size();
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = entries_.find(id); it != entries_.end()) {
    bytes_ -= it->second.bytes;
    lru_.erase(it->second.lru);
    entries_.erase(it);
  }
  if (bytes > max_bytes_ || max_count_ == 0) return;
  lru_.push_front(id);
  entries_[id] = Entry{.value = std::move(r), .bytes = bytes, .lru = lru_.begin()};
  bytes_ += bytes;
  evict_locked();
}

std::optional<StoredResponse> ResponseStore::get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.value;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  bytes_ -= it->second.bytes;
  lru_.erase(it->second.lru);
  entries_.erase(it);
  return true;
}

size_t ResponseStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

size_t ResponseStore::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

void ResponseStore::evict_locked() {
  while (!lru_.empty() && (entries_.size() > max_count_ || bytes_ > max_bytes_)) {
    auto it = entries_.find(lru_.back());
    bytes_ -= it->second.bytes;
    entries_.erase(it);
    lru_.pop_back();
  }
}

}  // namespace brisk::server
