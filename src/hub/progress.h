// Download progress on stderr: on a terminal one bar redrawn in place (percent, bytes, rate,
// ETA) for all files together; otherwise plain lines (a line per file started and finished,
// and a percent / rate / ETA line every 10 s).
// Thread-safe: parallel shard downloads report into one Progress.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "hub/options.h"

namespace brisk::hub {

class Progress {
 public:
  Progress(HubProgress style, uint64_t total_bytes);
  ~Progress();

  void file_started(const std::string& name, uint64_t size, uint64_t resumed_from);
  void add(uint64_t n_bytes);          // bytes received (any thread)
  void rewind(uint64_t n_bytes);       // bytes thrown away (a restarted download)
  void skip(uint64_t n_bytes) { done_ += n_bytes; }  // bytes present without a download
  void file_done(const std::string& name, uint64_t size);
  void message(const std::string& line);  // a line that must not be overwritten by the bar
  void finish();

 private:
  void draw_locked(bool final_draw);
  HubProgress style_;
  uint64_t total_ = 0;
  std::atomic<uint64_t> done_{0};       // bytes of the total present so far
  std::atomic<uint64_t> received_{0};   // bytes received over the network in this run
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
  std::mutex mu_;
  bool bar_shown_ = false;
  bool finished_ = false;
};

// "1.5 GB", "12.0 MB", "512 B"
std::string format_bytes(uint64_t n);

}  // namespace brisk::hub
