// Read-bandwidth probe: the rate at which n threads stream a buffer much larger than the
// last-level cache (each thread sums its own contiguous part). Decode of a dense model streams
// every weight once per token, so this is its ceiling ("roofline") on the machine as it is now.
#pragma once
#include <cstdint>

namespace brisk {

struct BandwidthParams {
  int n_threads = 1;
  uint64_t buffer_bytes = uint64_t(512) << 20;  // 512 MiB: far beyond any LLC here
  int reps = 5;                                  // passes timed; the fastest counts
};

struct BandwidthResult {
  double bytes_per_s = 0;   // best pass
  double mean_bytes_per_s = 0;
  int n_threads = 0;
  uint64_t buffer_bytes = 0;
};

BandwidthResult measure_read_bandwidth(const BandwidthParams& params);

}  // namespace brisk
