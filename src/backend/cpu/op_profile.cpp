#include "backend/cpu/op_profile.h"

#include <cstdio>
#include <vector>
#include <algorithm>

namespace brisk {

OpProfile::~OpProfile() {
  if (!on_ || entries_.empty()) return;
  double total = 0.0;
  for (const auto& [name, e] : entries_) total += e.seconds;
  std::vector<std::pair<std::string, Entry>> rows(entries_.begin(), entries_.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  std::fprintf(stderr, "%-28s %10s %10s %10s %7s %9s\n", "op", "calls", "total ms", "us/call", "share", "GB/s");
  for (const auto& [name, e] : rows)
    std::fprintf(stderr, "%-28s %10lld %10.2f %10.2f %6.1f%% %9.2f\n", name.c_str(), static_cast<long long>(e.calls),
                 e.seconds * 1e3, e.seconds * 1e6 / double(e.calls), 100.0 * e.seconds / total,
                 e.bytes > 0 ? e.bytes / e.seconds / 1e9 : 0.0);
}

}  // namespace brisk
