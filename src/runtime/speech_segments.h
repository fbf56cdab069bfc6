// One decoded window of speech cut into segments, and where the next window starts, as
// transformers' speech seq2seq generation does it (WhisperGenerationMixin._retrieve_segment):
//   - a segment boundary is every pair of consecutive timestamp tokens (ids >= timestamp_begin);
//     the tokens after the last pair form an unfinished segment that is dropped, and the next
//     window starts at the last pair's FIRST timestamp (the end of the last complete segment);
//   - a window that ends on a single timestamp (text, then one timestamp) has no speech after
//     it: every segment is kept, up to the end, and the next window starts after this one;
//   - without any pair the whole window is one segment, ending at its last timestamp (other
//     than <|0.00|>) or at the window's length, and the next window starts after this one.
// The rule reads token ids only: transformers applies it whether or not the timestamp rules
// were on (a model that emits timestamp ids after <|notimestamps|> still seeks by them). One
// choice of ours: a segment that opens with a text token starts at the window's start (0.0).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace brisk {

struct SpeechWindowSegment {
  size_t begin = 0;      // token range [begin, end) in the window's tokens
  size_t end = 0;
  double start = 0.0;    // seconds from the window's start
  double end_time = 0.0;
};

struct SpeechWindowSplit {
  std::vector<SpeechWindowSegment> segments{};
  int64_t seek_advance = 0;  // mel frames from this window's start to the next one's
};

struct SpeechSplitParams {
  int32_t timestamp_begin = 0;  // <|0.00|>; every id from it on is a time
  int64_t window_frames = 0;    // mel frames this window covers (the rest of the input, at most a window)
  int32_t input_stride = 2;     // mel frames per timestamp step
  double time_precision = 0.02; // seconds per timestamp step
  double frame_seconds = 0.01;  // seconds per mel frame
};

// tokens: the window's generated ids, end-of-text removed.
SpeechWindowSplit speech_split_window(const std::vector<int32_t>& tokens, const SpeechSplitParams& p);

}  // namespace brisk
