#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace brisk {
namespace {

LogLevel level_from_env() {
  const char* v = std::getenv("BRISK_LOG");
  if (!v) return LogLevel::warn;
  if (!strcmp(v, "debug")) return LogLevel::debug;
  if (!strcmp(v, "info")) return LogLevel::info;
  if (!strcmp(v, "error")) return LogLevel::error;
  if (!strcmp(v, "off")) return LogLevel::off;
  return LogLevel::warn;
}

std::atomic<int>& level_ref() {
  static std::atomic<int> level{int(level_from_env())};
  return level;
}

}  // namespace

LogLevel log_level() { return LogLevel(level_ref().load(std::memory_order_relaxed)); }
void set_log_level(LogLevel level) { level_ref().store(int(level)); }

void log_write(LogLevel level, const std::string& message) {
  static std::mutex mu;
  static const char* names[] = {"debug", "info", "warning", "error", ""};
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "brisk: %s: %s\n", names[int(level)], message.c_str());
}

}  // namespace brisk
