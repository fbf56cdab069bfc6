#include "hub/progress.h"

#include <unistd.h>

#include <cstdio>

#include "core/error.h"

namespace brisk::hub {

std::string format_bytes(uint64_t n) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  double v = double(n);
  int u = 0;
  while (v >= 1000.0 && u < 5) {
    v /= 1000.0;
    ++u;
  }
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
  else std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

Progress::Progress(HubProgress style, uint64_t total_bytes) : style_(style), total_(total_bytes) {
  if (style_ == HubProgress::automatic)
    style_ = isatty(STDERR_FILENO) ? HubProgress::bar : HubProgress::lines;
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

Progress::~Progress() { finish(); }

void Progress::file_started(const std::string& name, uint64_t size, uint64_t resumed_from) {
  done_ += resumed_from;
  if (style_ != HubProgress::lines) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (resumed_from > 0)
    std::fprintf(stderr, "downloading %s (%s, resuming at %s)\n", name.c_str(),
                 format_bytes(size).c_str(), format_bytes(resumed_from).c_str());
  else
    std::fprintf(stderr, "downloading %s (%s)\n", name.c_str(), format_bytes(size).c_str());
}

void Progress::add(uint64_t n_bytes) {
  done_ += n_bytes;
  received_ += n_bytes;
  if (style_ != HubProgress::bar && style_ != HubProgress::lines) return;
  // a bar redraw every 100 ms; a plain progress line every 10 s
  const auto every = style_ == HubProgress::bar ? std::chrono::milliseconds(100)
                                                : std::chrono::milliseconds(10000);
  const auto now = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock() || now - last_draw_ < every) return;
  last_draw_ = now;
  draw_locked(false);
}

void Progress::rewind(uint64_t n_bytes) {
  uint64_t cur = done_.load();
  while (!done_.compare_exchange_weak(cur, cur >= n_bytes ? cur - n_bytes : 0)) {
  }
}

void Progress::file_done(const std::string& name, uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  if (style_ == HubProgress::lines)
    std::fprintf(stderr, "downloaded %s (%s)\n", name.c_str(), format_bytes(size).c_str());
  else if (style_ == HubProgress::bar)
    draw_locked(false);
}

void Progress::message(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  if (style_ == HubProgress::quiet) return;
  if (bar_shown_) std::fprintf(stderr, "\r\033[K");
  std::fprintf(stderr, "%s\n", line.c_str());
  if (bar_shown_) draw_locked(false);
}

void Progress::finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  if (style_ == HubProgress::bar && bar_shown_) {
    draw_locked(true);
    std::fprintf(stderr, "\n");
  }
}

void Progress::draw_locked(bool final_draw) {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const uint64_t done = std::min(done_.load(), total_);
  const double rate = elapsed > 0.05 ? double(received_.load()) / elapsed : 0.0;
  const double frac = total_ ? double(done) / double(total_) : 1.0;
  constexpr int width = 24;
  const int filled = int(frac * width + 0.5);
  std::string bar(size_t(filled), '#');
  bar.append(size_t(width - filled), ' ');
  std::string eta = "--:--";
  if (final_draw) {
    eta = "done";
  } else if (rate > 0 && total_ > done) {
    const long s = long(double(total_ - done) / rate);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
    eta = buf;
  }
  if (style_ == HubProgress::lines) {
    std::fprintf(stderr, "%3d%% %s / %s  %s/s  ETA %s\n", int(frac * 100),
                 format_bytes(done).c_str(), format_bytes(total_).c_str(),
                 format_bytes(uint64_t(rate)).c_str(), eta.c_str());
    return;
  }
  std::fprintf(stderr, "\r\033[K%3d%% [%s] %s / %s  %s/s  ETA %s", int(frac * 100), bar.c_str(),
               format_bytes(done).c_str(), format_bytes(total_).c_str(),
               format_bytes(uint64_t(rate)).c_str(), eta.c_str());
  std::fflush(stderr);
  bar_shown_ = true;
}

}  // namespace brisk::hub
