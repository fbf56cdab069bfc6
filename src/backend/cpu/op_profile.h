// BRISK_PROFILE=1: wall time per CPU backend op (and per weight format for matmuls), printed to
// stderr when the backend is destroyed. Each op is timed on the calling thread around its whole
// parallel region, so the figures include dispatch and the wait for the slowest thread; the
// bandwidth column is weight bytes over that time.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace brisk {

class OpProfile {
 public:
  explicit OpProfile(bool on) : on_(on) {}
  ~OpProfile();
  bool on() const { return on_; }
  void add(const std::string& op, double seconds, double bytes) {
    Entry& e = entries_[op];
    ++e.calls;
    e.seconds += seconds;
    e.bytes += bytes;
  }

  // Times one op: OpProfile::Scope s(profile, "rms_norm");
  class Scope {
   public:
    Scope(OpProfile& p, const char* op, double bytes = 0.0) : p_(p), op_(op), bytes_(bytes) {
      if (p_.on_) t0_ = std::chrono::steady_clock::now();
    }
    Scope(OpProfile& p, std::string op, double bytes) : p_(p), name_(std::move(op)), op_(nullptr), bytes_(bytes) {
      if (p_.on_) t0_ = std::chrono::steady_clock::now();
    }
    ~Scope() {
      if (!p_.on_) return;
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
      p_.add(op_ ? std::string(op_) : name_, s, bytes_);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    OpProfile& p_;
    std::string name_;
    const char* op_;
    double bytes_;
    std::chrono::steady_clock::time_point t0_;
  };

 private:
  struct Entry {
    int64_t calls = 0;
    double seconds = 0.0, bytes = 0.0;
  };
  bool on_;
  std::map<std::string, Entry> entries_;
};

}  // namespace brisk
