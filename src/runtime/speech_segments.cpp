#include "runtime/speech_segments.h"

namespace brisk {

SpeechWindowSplit speech_split_window(const std::vector<int32_t>& tokens, const SpeechSplitParams& p) {
  const size_t n = tokens.size();
  auto is_ts = [&](size_t i) { return tokens[i] >= p.timestamp_begin; };
  auto seconds = [&](size_t i) { return double(tokens[i] - p.timestamp_begin) * p.time_precision; };
  SpeechWindowSplit out;
  std::vector<size_t> slices;  // one past each segment's last token
  for (size_t i = 0; i + 1 < n; ++i)
    if (is_ts(i) && is_ts(i + 1)) slices.push_back(i + 1);
  if (slices.empty()) {
    // One segment: it ends at the last timestamp when there is one (other than <|0.00|>),
    // else at the window's length in whole timestamp steps.
    double end = double(int64_t(double(p.window_frames) * p.frame_seconds / p.time_precision)) * p.time_precision;
    for (size_t i = n; i-- > 0;)
      if (is_ts(i)) {
        if (tokens[i] != p.timestamp_begin) end = seconds(i);
        break;
      }
    out.segments.push_back({.begin = 0, .end = n, .start = 0.0, .end_time = end});
    out.seek_advance = p.window_frames;
    return out;
  }
  const bool single_ending = n >= 2 && !is_ts(n - 2) && is_ts(n - 1);
  if (single_ending) slices.push_back(n);
  else slices.back() += 1;  // the last pair stays whole in the last segment
  size_t last = 0;
  for (size_t k = 0; k < slices.size(); ++k) {
    const size_t cur = slices[k];
    const bool last_slice = k + 1 == slices.size();
    // The last segment of a window that goes on ends at the first timestamp of its pair.
    const size_t end_index = last_slice && !single_ending ? cur - 2 : cur - 1;
    // A segment that opens with text (the first one, without the timestamp rules) starts with
    // the window: transformers would subtract <|0.00|> from a text id.
    const double start = is_ts(last) ? seconds(last) : 0.0;
    out.segments.push_back({.begin = last, .end = cur, .start = start, .end_time = seconds(end_index)});
    last = cur;
  }
  // Ending on a single timestamp: nothing was said after it, the next window follows this one.
  // Otherwise the unfinished segment after the last pair is dropped and decoded again from the
  // last pair's first timestamp.
  out.seek_advance = single_ending ? p.window_frames : int64_t(tokens[last - 2] - p.timestamp_begin) * p.input_stride;
  return out;
}

}  // namespace brisk
