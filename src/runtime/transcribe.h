// Speech to text over audio of any length, as transformers' speech seq2seq generation does it
// (long-form: sequential windows that seek by the last timestamp):
//   - the log-mel spectrogram of the whole audio (media/log_mel.h); windows of n_frames frames
//     cut from it at `seek`, padded with 0.0 past its end;
//   - the language, when not given, detected once from the first window (the likeliest
//     language token after start-of-transcript);
//   - each window decoded from [<|startofprev|> previous text | the initial prompt]
//     <|startoftranscript|> <|lang|> <|task|> [<|notimestamps|>], with temperature fallback:
//     a result whose token compression ratio exceeds the threshold or whose average
//     log-probability is below its threshold is decoded again at the next temperature, and a
//     window whose no-speech probability exceeds its threshold while the log-probability is low
//     is skipped;
//   - segments split at consecutive timestamp tokens; the next window starts at the last
//     complete segment's end (or after the window when the output ends on a single timestamp
//     or has no pair: runtime/speech_segments.h), while frames remain, also for input of one
//     window or less;
//   - word timestamps (optional): the alignment heads' cross-attention over the window's text
//     tokens, normalised per frame, median-filtered, averaged and aligned by dynamic time
//     warping (runtime/speech_align.h).
// The Transcriber owns one Context of the model; transcribe() may be called from several
// threads: each window's encode and decode hold the context's lock, so requests interleave
// window by window.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/engine_api.h"
#include "runtime/speech_config.h"

namespace brisk {

namespace media {
struct LogMel;
}

struct TranscriptWord {
  std::string word{};   // with its leading space, as decoded
  double start = 0.0;   // seconds
  double end = 0.0;
  double probability = 0.0;
};

struct TranscriptSegment {
  int32_t id = 0;
  int64_t seek = 0;             // first mel frame of its window
  double start = 0.0;           // seconds
  double end = 0.0;
  std::string text{};           // decoded text tokens (leading space kept)
  std::vector<int32_t> tokens{};  // text and timestamp tokens
  double temperature = 0.0;
  double avg_logprob = 0.0;
  double compression_ratio = 0.0;
  double no_speech_prob = 0.0;
  std::vector<TranscriptWord> words{};
};

// One decoder run over a window, as the fallback kept it (for checking and --show-ids).
struct TranscriptWindow {
  int64_t seek = 0;               // first mel frame of the window
  std::vector<int32_t> tokens{};  // generated after the prompt, end-of-text kept when produced
  double temperature = 0.0;
  bool skipped = false;           // no speech: no segment came of it
};

struct Transcript {
  std::string task = "transcribe";
  std::string language{};       // code, e.g. "en" ("" when the model has no language tokens)
  double duration = 0.0;        // seconds of audio
  std::string text{};           // all segments' text
  std::vector<TranscriptSegment> segments{};
  std::vector<TranscriptWindow> windows{};  // in decoding order
  int64_t n_tokens = 0;         // tokens generated (fallbacks included)
  int32_t n_windows = 0;        // encoder passes
  double encode_seconds = 0.0;  // time in the encoder (and the cross-attention K/V)
  double decode_seconds = 0.0;  // time in decoder passes (fallbacks and word alignment included)
};

struct TranscribeOptions {
  std::string task = "transcribe";   // or "translate"
  std::string language{};            // code or name; "": detect (multilingual models)
  bool timestamps = true;            // timestamp tokens (always on beyond one window)
  bool word_timestamps = false;
  std::vector<float> temperatures = {0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f};
  int32_t beam_size = 1;             // > 1: beam search at temperature 0
  int32_t top_k = 50;                // sampling at temperature > 0 (transformers' default)
  double compression_ratio_threshold = 1.35;  // zlib ratio of the tokens' bytes; <= 0: off
  double logprob_threshold = -1.0;   // average log-probability; <= -1e9: off
  double no_speech_threshold = 0.6;  // > 1: off
  bool condition_on_previous = false;  // previous windows' tokens as the prompt
  std::string prompt{};              // initial prompt (text)
  int32_t max_new_tokens = 0;        // per window; 0: the decoder context
  uint64_t seed = 0;
  // Called as each segment is final (streaming); returning false cancels.
  std::function<bool(const TranscriptSegment&)> on_segment{};
};

// The checking path: a forced decoder prefix, plain logits (no rules), n tokens.
struct ForcedDecodeResult {
  std::vector<int32_t> tokens{};
  std::vector<float> prefix_logits{};  // [n_vocab] at the prefix's last position
};

struct TranscriberOptions {
  std::string device = "cpu";
  int32_t n_threads = 0;
  QuantType kv_type = QuantType::F16;
  int32_t max_beams = 5;
};

class Transcriber {
 public:
  Transcriber(std::shared_ptr<const Model> model, const TranscriberOptions& o);
  ~Transcriber();
  const SpeechConfig& config() const { return cfg_; }
  const Model& model() const { return *model_; }
  const std::string& device() const;

  // samples: mono at config().mel.sample_rate.
  Transcript transcribe(const std::vector<float>& samples, const TranscribeOptions& o);
  // From log-mel frames [n, n_mels] (as transformers' generate takes input_features): windows
  // cut at the seek position, padded with 0.0 past the last frame, until the seek passes n.
  Transcript transcribe_features(const std::vector<float>& features, const TranscribeOptions& o);
  ForcedDecodeResult decode_forced(const std::vector<float>& samples, const std::vector<int32_t>& prefix, int32_t n,
                                   float temperature, uint64_t seed);
  // The log-mel features of the first window (checking): [n_frames, n_mels].
  std::vector<float> first_window_features(const std::vector<float>& samples) const;

 private:
  struct Impl;
  struct RunInput {
    int64_t max_frames = 0;   // seeking stops at this frame
    bool short_form = true;   // one window of input or less (timestamps optional)
    double duration = 0.0;    // seconds of audio
  };
  Transcript run(const media::LogMel& mel, const RunInput& in, const TranscribeOptions& o);
  std::shared_ptr<const Model> model_;
  SpeechConfig cfg_;
  std::unique_ptr<Impl> impl_;
};

// Whether a loaded model is an encoder-decoder speech model (Transcriber runs it).
bool model_is_speech(const Model& model);

// A transcript's text: its segments' texts joined, without surrounding whitespace (isspace).
std::string transcript_text(const std::vector<TranscriptSegment>& segments);

// Stream deltas of a transcript, one call per segment as it is final: the deltas add up to
// transcript_text of the segments seen so far, whatever whitespace the segments end with
// (whitespace at the end is held back until a later segment's text follows it). An empty
// delta means nothing to send.
class TranscriptDeltas {
 public:
  std::string next(const std::string& segment_text);

 private:
  bool started_ = false;
  std::string held_{};  // trailing whitespace of the text sent so far
};

// The language name of a code ("en" -> "english"), or the code itself when unknown.
std::string speech_language_name(const std::string& code);

}  // namespace brisk
