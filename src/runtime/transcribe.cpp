#include "runtime/transcribe.h"

#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "core/error.h"
#include "core/log.h"
#include "media/log_mel.h"
#include "runtime/loaded_model.h"
#include "runtime/speech_align.h"
#include "runtime/speech_decode.h"
#include "runtime/speech_segments.h"

namespace brisk {

namespace {

// zlib ratio of the tokens as little-endian integers of ceil(log2(vocab) / 8) bytes, as
// transformers measures repetition for its fallback rule.
double token_compression_ratio(const std::vector<int32_t>& tokens, int32_t n_vocab) {
  if (tokens.empty()) return 0.0;
  const int width = int(std::log2(double(n_vocab)) / 8.0) + 1;
  std::vector<uint8_t> bytes;
  for (int32_t t : tokens)
    for (int b = 0; b < width; ++b) bytes.push_back(uint8_t((uint32_t(t) >> (8 * b)) & 0xFF));
  uLongf out_len = compressBound(uLong(bytes.size()));
  std::vector<uint8_t> out(out_len);
  BRISK_CHECK(compress2(out.data(), &out_len, bytes.data(), uLong(bytes.size()), Z_DEFAULT_COMPRESSION) == Z_OK,
              "compression ratio: zlib failed");
  return double(bytes.size()) / double(out_len);
}

std::string speech_trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

}  // namespace

std::string transcript_text(const std::vector<TranscriptSegment>& segments) {
  std::string text;
  for (const TranscriptSegment& s : segments) text += s.text;
  return speech_trim(text);
}

std::string TranscriptDeltas::next(const std::string& segment_text) {
  auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  size_t a = 0, b = segment_text.size();
  if (!started_)
    while (a < b && space(segment_text[a])) ++a;
  size_t body_end = b;
  while (body_end > a && space(segment_text[body_end - 1])) --body_end;
  if (body_end == a) {  // only whitespace: kept for when text follows
    if (started_) held_.append(segment_text, a, b - a);
    return {};
  }
  std::string delta = std::move(held_);
  delta.append(segment_text, a, body_end - a);
  held_.assign(segment_text, body_end, b - body_end);
  started_ = true;
  return delta;
}

bool model_is_speech(const Model& model) {
  const auto* loaded = dynamic_cast<const LoadedModel*>(&model);
  return loaded && loaded->arch_->encoder() != nullptr;
}

std::string speech_language_name(const std::string& code) {
  for (const auto& [c, name] : speech_language_table())
    if (code == c) return name;
  return code;
}

struct Transcriber::Impl {
  std::unique_ptr<Context> ctx;
  std::mutex mu;  // the context: one window's encode and decode at a time
  std::unique_ptr<media::LogMelExtractor> mel;
  EncoderShape shape;
  const Tokenizer* tok = nullptr;

  // Window features [n_frames, n_mels] from rows [seek, seek + n_frames) of mel, 0 past its end.
  std::vector<float> window(const media::LogMel& m, int64_t seek) const {
    std::vector<float> w(size_t(shape.n_frames) * size_t(shape.n_features), 0.0f);
    const int64_t rows = std::max<int64_t>(0, std::min<int64_t>(shape.n_frames, m.n_frames - seek));
    if (rows > 0) std::copy(m.frame(seek), m.frame(seek) + rows * m.n_mels, w.begin());
    return w;
  }
  void encode(const std::vector<float>& features, Transcript* t = nullptr) {
    const auto t0 = std::chrono::steady_clock::now();
    ctx->seq_truncate(0, 0);
    ctx->encode({EncoderInput{.seq = 0, .features = features.data()}});
    if (t) {
      t->encode_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++t->n_windows;
    }
  }
};

Transcriber::Transcriber(std::shared_ptr<const Model> model, const TranscriberOptions& o)
    : model_(std::move(model)), impl_(std::make_unique<Impl>()) {
  auto loaded = std::dynamic_pointer_cast<const LoadedModel>(model_);
  BRISK_CHECK(loaded != nullptr, "transcriber: model was not loaded by Model::load");
  BRISK_CHECK(loaded->arch_->encoder() != nullptr, "model '", loaded->info().name, "' (", loaded->info().architecture,
              ") is not a speech model: it has no encoder");
  impl_->tok = model_->tokenizer();
  cfg_ = speech_config_from_hf(loaded->config_json_, loaded->generation_config_, loaded->preprocessor_config_,
                               loaded->config().n_vocab, impl_->tok);
  BRISK_CHECK(o.max_beams >= 1 && o.max_beams <= 16, "transcriber: max_beams ", o.max_beams, " out of range [1, 16]");
  impl_->ctx = Context::create(model_, {.n_ctx = loaded->config().n_ctx_train, .n_seq_max = 2 * o.max_beams,
                                        .n_batch = loaded->config().n_ctx_train, .kv_type = o.kv_type,
                                        .n_threads = o.n_threads, .device = o.device, .kv_block_size = 16});
  impl_->shape = impl_->ctx->encoder_shape();
  BRISK_CHECK(impl_->shape.n_features == cfg_.mel.n_mels, "speech model: preprocessor_config.json has ", cfg_.mel.n_mels,
              " mel bins, the model reads ", impl_->shape.n_features);
  BRISK_CHECK(impl_->shape.n_pos > 0 && impl_->shape.n_frames % impl_->shape.n_pos == 0, "speech model: ",
              impl_->shape.n_frames, " frames per window do not map onto ", impl_->shape.n_pos, " encoder positions");
  cfg_.input_stride = impl_->shape.n_frames / impl_->shape.n_pos;
  cfg_.n_text_ctx = impl_->ctx->options().n_ctx;
  impl_->mel = std::make_unique<media::LogMelExtractor>(cfg_.mel);
}

Transcriber::~Transcriber() = default;

const std::string& Transcriber::device() const { return impl_->ctx->options().device; }

std::vector<float> Transcriber::first_window_features(const std::vector<float>& samples) const {
  const media::LogMel m = impl_->mel->compute(samples.data(), int64_t(samples.size()));
  return impl_->window(m, 0);
}

ForcedDecodeResult Transcriber::decode_forced(const std::vector<float>& samples, const std::vector<int32_t>& prefix,
                                              int32_t n, float temperature, uint64_t seed) {
  BRISK_CHECK(!prefix.empty(), "forced decoding: empty prefix");
  for (int32_t t : prefix)
    BRISK_CHECK(t >= 0 && t < cfg_.n_vocab, "forced decoding: token id ", t, " out of range [0, ", cfg_.n_vocab, ")");
  const std::vector<float> features = first_window_features(samples);
  std::mt19937_64 rng(seed);
  ForcedDecodeResult out;
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->encode(features);
  // Plain logits, no end-of-text stop: n tokens exactly (one is decoded when n is 0 and dropped).
  const WindowDecodeOptions wo{.prompt = prefix, .sot_index = -1, .rules = {.cfg = &cfg_}, .apply_rules = false,
                               .temperature = temperature, .beam_size = 1, .top_k = 0,
                               .max_new_tokens = std::max(n, 1), .rng = &rng, .stop_at_eot = false,
                               .prompt_logits = &out.prefix_logits};
  out.tokens = speech_decode_window(*impl_->ctx, cfg_, wo).tokens;
  out.tokens.resize(size_t(std::max(0, std::min<int32_t>(n, int32_t(out.tokens.size())))));
  return out;
}

Transcript Transcriber::transcribe(const std::vector<float>& samples, const TranscribeOptions& o) {
  const media::LogMel mel = impl_->mel->compute(samples.data(), int64_t(samples.size()));
  // Audio of one window or less: its first window is the front end's padded 30 s, as
  // transformers' feature extractor gives it; seeking stops at the audio's end.
  const bool short_form = int64_t(samples.size()) <= int64_t(cfg_.mel.n_samples);
  const int64_t max_frames =
      short_form ? std::max<int64_t>(1, (int64_t(samples.size()) + cfg_.mel.hop - 1) / cfg_.mel.hop) : int64_t(mel.n_frames);
  return run(mel, {.max_frames = max_frames, .short_form = short_form,
                   .duration = double(samples.size()) / double(cfg_.mel.sample_rate)}, o);
}

Transcript Transcriber::transcribe_features(const std::vector<float>& features, const TranscribeOptions& o) {
  const int64_t n_mels = impl_->shape.n_features;
  BRISK_CHECK(!features.empty() && int64_t(features.size()) % n_mels == 0, "transcribe: ", features.size(),
              " feature values are not whole frames of ", n_mels, " mel bins");
  media::LogMel mel;
  mel.n_mels = int32_t(n_mels);
  mel.n_frames = int32_t(int64_t(features.size()) / n_mels);
  mel.data = features;
  return run(mel, {.max_frames = mel.n_frames, .short_form = mel.n_frames <= impl_->shape.n_frames,
                   .duration = double(mel.n_frames) * double(cfg_.mel.hop) / double(cfg_.mel.sample_rate)}, o);
}

Transcript Transcriber::run(const media::LogMel& mel, const RunInput& in, const TranscribeOptions& o) {
  const SpeechConfig& c = cfg_;
  Impl& im = *impl_;
  BRISK_CHECK(o.task == "transcribe" || o.task == "translate", "task '", o.task, "': use transcribe or translate");
  BRISK_CHECK(!o.temperatures.empty(), "transcribe: no temperature given");
  for (float t : o.temperatures)
    BRISK_CHECK(std::isfinite(t) && t >= 0.0f && t <= 2.0f, "temperature ", t, " out of range [0, 2]");
  BRISK_CHECK(o.beam_size >= 1 && 2 * o.beam_size <= im.ctx->options().n_seq_max, "beam size ", o.beam_size,
              " out of range [1, ", im.ctx->options().n_seq_max / 2, "]");
  Transcript tr;
  tr.task = o.task;
  tr.duration = in.duration;
  // Language and task tokens.
  std::optional<SpeechLanguage> lang;
  if (!o.language.empty()) {
    lang = c.find_language(o.language);
    // An English-only model transcribes English (transformers refuses any language for it;
    // English itself is accepted here).
    if (!c.multilingual)
      BRISK_CHECK(o.language == "en" || o.language == "english", "this model is English-only (language '",
                  o.language, "' given)");
    BRISK_CHECK(lang.has_value() || !c.multilingual, "unsupported language '", o.language, "'",
                c.languages.empty() ? " (this model has no language tokens)" : " (give an ISO-639-1 code such as 'en')");
  }
  BRISK_CHECK(!o.word_timestamps || c.word_timestamps_unavailable.empty(), "word timestamps are not available: ",
              c.word_timestamps_unavailable);
  if (o.task == "translate")
    BRISK_CHECK(c.multilingual && c.translate >= 0, "this model cannot translate (it has no <|translate|> token)");
  const int64_t n_frames = im.shape.n_frames, max_frames = in.max_frames;
  const bool timestamps = c.has_timestamps() && (o.timestamps || !in.short_form || o.word_timestamps);
  std::vector<float> features = im.window(mel, 0);
  std::unique_lock<std::mutex> lock(im.mu);
  const auto started = std::chrono::steady_clock::now();
  im.encode(features, &tr);
  if (!lang && c.multilingual && !c.languages.empty()) {
    // The likeliest language token after start-of-transcript, from the first window.
    std::vector<float> logits;
    speech_decode_window(*im.ctx, c, {.prompt = {c.sot}, .rules = {.cfg = &c}, .apply_rules = false, .max_new_tokens = 1,
                                      .prompt_logits = &logits});
    const SpeechLanguage* best = &c.languages.front();
    for (const SpeechLanguage& l : c.languages)
      if (logits[size_t(l.token)] > logits[size_t(best->token)]) best = &l;
    lang = *best;
  }
  tr.language = lang ? lang->code : (c.multilingual ? "" : "en");
  std::vector<int32_t> init = {c.sot};
  if (c.multilingual && lang) init.push_back(lang->token);
  if (c.multilingual) {
    const int32_t task = o.task == "translate" ? c.translate : c.transcribe;
    if (task >= 0) init.push_back(task);
  }
  if (!timestamps && c.no_timestamps >= 0) init.push_back(c.no_timestamps);
  // The initial prompt: <|startofprev|> + " " + text.
  const int32_t max_prev = c.n_text_ctx / 2 - 1;
  std::vector<int32_t> prompt_ids;
  if (!speech_trim(o.prompt).empty()) {
    BRISK_CHECK(im.tok != nullptr && c.prev_sot >= 0, "a text prompt needs the model's tokenizer and <|startofprev|>");
    std::string text = " ";  // transformers' get_prompt_ids: " " + text.strip()
    text += speech_trim(o.prompt);
    std::vector<int32_t> p = im.tok->encode(text);
    if (int32_t(p.size()) > max_prev) p.erase(p.begin(), p.end() - max_prev);
    prompt_ids.push_back(c.prev_sot);
    prompt_ids.insert(prompt_ids.end(), p.begin(), p.end());
  }
  std::vector<int32_t> history(prompt_ids.empty() ? prompt_ids.begin() : prompt_ids.begin() + 1, prompt_ids.end());
  std::mt19937_64 rng(o.seed);
  const double frame_seconds = double(c.mel.hop) / double(c.mel.sample_rate);
  bool condition = o.condition_on_previous;
  int64_t seek = 0;
  bool first_window = true;
  while (seek < max_frames) {
    const int64_t seek_frames = std::min(max_frames - seek, n_frames);
    const double time_offset = double(seek) * frame_seconds;
    if (!first_window) {
      lock.unlock();  // other requests may run a window meanwhile
      features = im.window(mel, seek);
      lock.lock();
      im.encode(features, &tr);
    }
    first_window = false;
    std::vector<int32_t> prompt;
    if (condition && !history.empty() && c.prev_sot >= 0) {
      prompt.push_back(c.prev_sot);
      prompt.insert(prompt.end(), history.end() - std::min<int64_t>(int64_t(history.size()), max_prev), history.end());
    } else {
      prompt = prompt_ids;
    }
    const int32_t sot_index = int32_t(prompt.size());
    prompt.insert(prompt.end(), init.begin(), init.end());
    WindowDecodeResult res;
    std::vector<int32_t> decoded;  // the window's tokens as generated (end-of-text kept)
    double ratio = 0.0, temperature = 0.0;
    bool skip = false;
    for (size_t ti = 0; ti < o.temperatures.size(); ++ti) {
      temperature = o.temperatures[ti];
      WindowDecodeOptions wo{.prompt = prompt, .sot_index = sot_index,
                             .rules = {.cfg = &c, .timestamps = timestamps, .suppress = true},
                             .temperature = float(temperature), .beam_size = temperature > 0.0 ? 1 : o.beam_size,
                             .top_k = o.top_k, .max_new_tokens = o.max_new_tokens, .rng = &rng};
      res = speech_decode_window(*im.ctx, c, wo);
      tr.n_tokens += int64_t(res.tokens.size());
      decoded = res.tokens;
      // As transformers' _need_fallback: the ratio of the tokens with their end-of-text.
      ratio = token_compression_ratio(decoded, c.n_vocab);
      if (!res.tokens.empty() && res.tokens.back() == c.eot) res.tokens.pop_back();
      bool fallback = (o.compression_ratio_threshold > 0.0 && ratio > o.compression_ratio_threshold) ||
                      res.avg_logprob < o.logprob_threshold;
      skip = o.no_speech_threshold <= 1.0 && res.avg_logprob < o.logprob_threshold &&
             res.no_speech_prob > o.no_speech_threshold;
      if (skip) fallback = false;
      condition = o.condition_on_previous && temperature < 0.5;
      if (!fallback) break;
    }
    tr.windows.push_back({.seek = seek, .tokens = decoded, .temperature = temperature, .skipped = skip});
    if (skip) {
      seek += seek_frames;
      continue;
    }
    // Segments at consecutive timestamp pairs; the next window starts after the last complete one.
    const std::vector<int32_t>& toks = res.tokens;
    const SpeechWindowSplit split = speech_split_window(
        toks, {.timestamp_begin = c.has_timestamps() ? c.timestamp_begin : INT32_MAX, .window_frames = seek_frames,
               .input_stride = c.input_stride, .time_precision = c.time_precision, .frame_seconds = frame_seconds});
    const size_t first_new = tr.segments.size();
    for (const SpeechWindowSegment& s : split.segments) {
      TranscriptSegment seg;
      seg.id = int32_t(tr.segments.size());
      seg.seek = seek;
      seg.start = time_offset + s.start;
      seg.end = time_offset + s.end_time;
      seg.tokens.assign(toks.begin() + int64_t(s.begin), toks.begin() + int64_t(s.end));
      std::vector<int32_t> text_ids;
      for (int32_t t : seg.tokens)
        if (t < c.eot) text_ids.push_back(t);
      if (im.tok) seg.text = im.tok->decode(text_ids, true);
      seg.temperature = temperature;
      seg.avg_logprob = res.avg_logprob;
      seg.compression_ratio = ratio;
      seg.no_speech_prob = res.no_speech_prob;
      if (seg.tokens.empty()) continue;
      // A segment that ends with a timestamp pair prompts later windows without its last
      // timestamp (transformers' _prepare_decoder_input_ids, as openai-whisper).
      const bool pair_end =
          seg.tokens.size() > 2 && c.has_timestamps() && seg.tokens[seg.tokens.size() - 2] >= c.timestamp_begin;
      history.insert(history.end(), seg.tokens.begin(), seg.tokens.end() - (pair_end ? 1 : 0));
      tr.segments.push_back(std::move(seg));
    }
    if (o.word_timestamps && im.tok) {
      // One decoder pass over the window's text for the alignment heads' cross-attention.
      std::vector<int32_t> text, owner;  // text tokens and the segment each belongs to
      for (size_t si = first_new; si < tr.segments.size(); ++si)
        for (int32_t t : tr.segments[si].tokens)
          if (t < c.eot) {
            text.push_back(t);
            owner.push_back(int32_t(si));
          }
      std::vector<int32_t> sot_seq(init.begin(), init.end());
      if (!sot_seq.empty() && sot_seq.back() == c.no_timestamps) sot_seq.pop_back();
      if (!text.empty() && c.no_timestamps >= 0 &&
          int32_t(sot_seq.size() + text.size() + 2) <= im.ctx->options().n_ctx) {
        std::vector<int32_t> all(sot_seq);
        all.push_back(c.no_timestamps);
        all.insert(all.end(), text.begin(), text.end());
        all.push_back(c.eot);
        im.ctx->seq_truncate(0, 0);
        im.ctx->set_cross_attention_probe(c.alignment_heads);
        std::vector<BatchToken> batch;
        const int32_t row0 = int32_t(sot_seq.size());  // the <|notimestamps|> position predicts text[0]
        for (int32_t i = 0; i < int32_t(all.size()); ++i)
          batch.push_back({.token = all[size_t(i)], .pos = i, .seq = 0, .want_logits = i >= row0 && i < row0 + int32_t(text.size())});
        im.ctx->decode(batch);
        const int64_t n_tok = int64_t(all.size()), n_cols = std::max<int64_t>(1, seek_frames / c.input_stride);
        std::vector<std::vector<float>> heads;
        for (size_t h = 0; h < c.alignment_heads.size(); ++h) {
          const float* p = im.ctx->cross_attention_probe(int32_t(h));
          std::vector<float> m(static_cast<size_t>(n_tok * n_cols));
          for (int64_t r = 0; r < n_tok; ++r)
            std::copy(p + r * im.shape.n_pos, p + r * im.shape.n_pos + n_cols, m.begin() + r * n_cols);
          heads.push_back(std::move(m));
        }
        const std::vector<int64_t> cols =
            speech_align_tokens(heads, n_tok, n_cols, c.median_filter_width, row0, row0 + int64_t(text.size()) + 1);
        std::vector<double> prob(text.size());
        for (size_t k = 0; k < text.size(); ++k) {
          const float* l = im.ctx->logits(int32_t(k));
          const int32_t nt = std::min(c.eot, c.n_vocab);
          float mx = -INFINITY;
          for (int32_t i = 0; i < nt; ++i) mx = std::max(mx, l[i]);
          double s = 0.0;
          for (int32_t i = 0; i < nt; ++i) s += std::exp(double(l[i]) - mx);
          prob[k] = std::exp(double(l[text[k]]) - mx) / s;
        }
        const bool no_spaces = tr.language == "zh" || tr.language == "ja" || tr.language == "th" ||
                               tr.language == "lo" || tr.language == "my" || tr.language == "yue";
        for (const SpeechWordSpan& w : speech_split_words(*im.tok, text, no_spaces)) {
          TranscriptWord tw;
          tw.word = w.text;
          tw.start = std::round((time_offset + double(cols[size_t(w.timing_begin)]) * c.time_precision) * 100.0) / 100.0;
          tw.end = std::round((time_offset + double(cols[size_t(w.timing_end)]) * c.time_precision) * 100.0) / 100.0;
          double p = 0.0;
          for (int32_t k : w.token_index) p += prob[size_t(k)];
          tw.probability = p / double(w.token_index.size());
          tr.segments[size_t(owner[size_t(w.token_index.front())])].words.push_back(std::move(tw));
        }
      }
    }
    lock.unlock();
    for (size_t si = first_new; si < tr.segments.size(); ++si)
      if (o.on_segment && !o.on_segment(tr.segments[si])) fail("transcription cancelled");
    lock.lock();
    // A window that ends on a pair at <|0.00|> would seek nowhere (transformers loops on it):
    // move on by the window instead.
    seek += split.seek_advance > 0 ? split.seek_advance : seek_frames;
  }
  tr.text = transcript_text(tr.segments);
  tr.decode_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() - tr.encode_seconds;
  return tr;
}

}  // namespace brisk
