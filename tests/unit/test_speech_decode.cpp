// Speech decoding pieces on their own: the timestamp and suppression rules (transformers'
// WhisperTimeStampLogitsProcessor, SuppressTokens*), the window's length limit, the segments
// of a window and where the next one starts (_retrieve_segment), dynamic time warping and the median filter
// of word alignment, word splitting with punctuation, the speech config read from
// generation_config.json, the response formats (SRT / VTT / verbose_json byte for byte as
// OpenAI's service writes them) and the audio routes' form handling.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/speech_align.h"
#include "runtime/speech_config.h"
#include "runtime/speech_decode.h"
#include "runtime/speech_segments.h"
#include "runtime/transcript_format.h"
#include "server/audio_request.h"
#include "server/errors.h"
#include "temp_files.h"
#include "text/tokenizer.h"

namespace brisk {
namespace {

constexpr float kInf = INFINITY;

// 20 ids: text 0..9, eot 10, sot 11, nospeech 12, notimestamps 13, timestamps 14..19.
SpeechConfig small_config() {
  SpeechConfig c;
  c.n_vocab = 20;
  c.eot = 10;
  c.sot = 11;
  c.no_speech = 12;
  c.no_timestamps = 13;
  c.timestamp_begin = 14;
  c.suppress = {3};
  c.begin_suppress = {5, 10};
  c.max_initial_timestamp_index = 2;
  return c;
}

std::vector<float> apply(const SpeechConfig& c, const std::vector<int32_t>& generated, std::vector<float> logits = {}) {
  if (logits.empty()) logits.assign(size_t(c.n_vocab), 0.0f);
  speech_rules_apply({.cfg = &c, .timestamps = true, .suppress = true}, logits.data(), generated);
  return logits;
}

bool banned(const std::vector<float>& s, int32_t id) { return s[size_t(id)] == -kInf; }

TEST(SpeechRules, FirstTokenIsAnEarlyTimestamp) {
  const SpeechConfig c = small_config();
  const std::vector<float> s = apply(c, {});
  for (int32_t id = 0; id < 14; ++id) EXPECT_TRUE(banned(s, id)) << id;  // text, eot, specials
  EXPECT_FALSE(banned(s, 14));
  EXPECT_FALSE(banned(s, 16));  // max_initial_timestamp_index 2
  EXPECT_TRUE(banned(s, 17));
}

TEST(SpeechRules, TimestampsComeInIncreasingPairs) {
  const SpeechConfig c = small_config();
  // Text (and end-of-text) likelier than all timestamps together, so the mass rule stays out.
  std::vector<float> text_likely(20, 0.0f);
  for (int32_t id = 0; id <= 10; ++id) text_likely[size_t(id)] = 3.0f;
  // After <|0.00|> text: text, end-of-text and later timestamps; never 0.00 again.
  std::vector<float> s = apply(c, {14, 4}, text_likely);
  EXPECT_FALSE(banned(s, 4));
  EXPECT_TRUE(banned(s, 3));  // suppress_tokens
  EXPECT_FALSE(banned(s, 5));  // begin_suppress applies to the first token only
  EXPECT_FALSE(banned(s, 10));
  EXPECT_TRUE(banned(s, 13));  // <|notimestamps|>
  EXPECT_TRUE(banned(s, 14));
  EXPECT_FALSE(banned(s, 15));
  // An open pair (text then a timestamp): no text; the closing timestamp may repeat it.
  s = apply(c, {14, 4, 16}, text_likely);
  for (int32_t id = 0; id < 10; ++id) EXPECT_TRUE(banned(s, id)) << id;
  EXPECT_FALSE(banned(s, 10));
  EXPECT_TRUE(banned(s, 15));
  EXPECT_FALSE(banned(s, 16));
  // A closed pair: text next, no timestamp.
  s = apply(c, {14, 4, 16, 16}, text_likely);
  for (int32_t id = 14; id < 20; ++id) EXPECT_TRUE(banned(s, id)) << id;
  EXPECT_FALSE(banned(s, 4));
}

TEST(SpeechRules, LikelyTimestampsForceOne) {
  const SpeechConfig c = small_config();
  // Each timestamp a little less likely than text 4, but together more likely.
  std::vector<float> logits(20, -5.0f);
  logits[4] = 2.0f;
  for (int32_t id = 15; id < 20; ++id) logits[size_t(id)] = 1.0f;
  std::vector<float> s = apply(c, {14, 4}, logits);
  EXPECT_TRUE(banned(s, 4));
  EXPECT_FALSE(banned(s, 17));
  // Text clearly likelier: nothing forced.
  logits[4] = 5.0f;
  s = apply(c, {14, 4}, logits);
  EXPECT_FALSE(banned(s, 4));
  // Without timestamp rules only suppression applies.
  std::vector<float> plain(20, 0.0f);
  speech_rules_apply({.cfg = &c, .timestamps = false, .suppress = true}, plain.data(), {});
  EXPECT_TRUE(banned(plain, 3));
  EXPECT_TRUE(banned(plain, 5));
  EXPECT_FALSE(banned(plain, 4));
  EXPECT_FALSE(banned(plain, 13));
}

// Window split with timestamps 14.. (0.02 s a step, 2 frames a step, a window of 3000 frames).
SpeechWindowSplit split(const std::vector<int32_t>& tokens, int64_t window_frames = 3000) {
  return speech_split_window(tokens, {.timestamp_begin = 14, .window_frames = window_frames});
}

TEST(SpeechSegments, UnfinishedLastSegmentSeeksToTheFirstTimestampOfTheLastPair) {
  // <|0.00|> 1 2 <|0.04|><|0.08|> 4 <|0.10|><|0.12|> 6 7 (unfinished): the pairs differ, the
  // next window starts where the last complete segment ends (0.10 s: 5 steps = 10 frames),
  // not where the unfinished one begins (0.12 s).
  const SpeechWindowSplit s = split({14, 1, 2, 16, 18, 4, 19, 20, 6, 7});
  ASSERT_EQ(s.segments.size(), 2u);
  EXPECT_EQ(s.segments[0].begin, 0u);
  EXPECT_EQ(s.segments[0].end, 4u);
  EXPECT_NEAR(s.segments[0].start, 0.0, 1e-12);
  EXPECT_NEAR(s.segments[0].end_time, 0.04, 1e-12);
  EXPECT_EQ(s.segments[1].begin, 4u);
  EXPECT_EQ(s.segments[1].end, 8u);  // both timestamps of the last pair, not the text after it
  EXPECT_NEAR(s.segments[1].start, 0.08, 1e-12);
  EXPECT_NEAR(s.segments[1].end_time, 0.10, 1e-12);
  EXPECT_EQ(s.seek_advance, 10);
  // Ending on the pair itself: the same seek.
  EXPECT_EQ(split({14, 1, 16, 18, 4, 19, 20}).seek_advance, 10);
}

TEST(SpeechSegments, SingleTimestampEndingKeepsEverythingAndSkipsTheWindow) {
  const SpeechWindowSplit s = split({14, 1, 16, 16, 4, 5, 19}, 1234);
  ASSERT_EQ(s.segments.size(), 2u);
  EXPECT_EQ(s.segments[1].begin, 3u);
  EXPECT_EQ(s.segments[1].end, 7u);
  EXPECT_NEAR(s.segments[1].end_time, 0.10, 1e-12);
  EXPECT_EQ(s.seek_advance, 1234);
}

TEST(SpeechSegments, WithoutAPairTheWindowIsOneSegment) {
  SpeechWindowSplit s = split({14, 1, 2, 17}, 201);  // ends at its last timestamp
  ASSERT_EQ(s.segments.size(), 1u);
  EXPECT_EQ(s.segments[0].end, 4u);
  EXPECT_NEAR(s.segments[0].end_time, 0.06, 1e-12);
  EXPECT_EQ(s.seek_advance, 201);
  s = split({1, 2, 3}, 201);  // no timestamp: the window's length in whole steps (100 x 0.02 s)
  EXPECT_NEAR(s.segments[0].end_time, 2.0, 1e-12);
  s = split({14, 1, 2, 14}, 201);  // a last <|0.00|> does not count
  EXPECT_NEAR(s.segments[0].end_time, 2.0, 1e-12);
  EXPECT_EQ(split({}, 201).segments.size(), 1u);
}

TEST(SpeechSegments, TimestampIdsSplitEvenWithoutTheTimestampRules) {
  // After <|notimestamps|> a model may still emit timestamp ids: transformers cuts and seeks
  // by them all the same (runs of them are pairs).
  const SpeechWindowSplit s = split({30, 30, 30, 25, 25});
  ASSERT_EQ(s.segments.size(), 4u);
  EXPECT_EQ(s.segments.back().end, 5u);
  EXPECT_EQ(s.seek_advance, (25 - 14) * 2);
  // A segment that opens with text starts at the window's start, never before it.
  const SpeechWindowSplit t = split({1, 2, 20, 20, 4});  // one segment; the 4 after the pair is unfinished
  ASSERT_EQ(t.segments.size(), 1u);
  EXPECT_EQ(t.segments[0].end, 4u);
  EXPECT_EQ(t.segments[0].start, 0.0);
  EXPECT_NEAR(t.segments[0].end_time, 0.12, 1e-12);
  EXPECT_EQ(t.seek_advance, 12);
}

TEST(SpeechRules, MaxLengthOfTheGenerationConfig) {
  SpeechConfig c = small_config();
  c.n_text_ctx = 64;
  EXPECT_EQ(speech_max_new_tokens(c, 4, 0, 64), 60);  // no max_length: the context
  EXPECT_EQ(speech_max_new_tokens(c, 4, 24, 64), 24);
  EXPECT_EQ(speech_max_new_tokens(c, 4, 100, 64), 60);
  c.max_length = 10;  // raised by the 3 tokens before the last prompt token: 13 in all
  EXPECT_EQ(speech_max_new_tokens(c, 4, 0, 64), 9);
  EXPECT_EQ(speech_max_new_tokens(c, 4, 24, 64), 24);  // max_new_tokens wins
  c.max_length = 64;  // capped at max_target_positions
  EXPECT_EQ(speech_max_new_tokens(c, 4, 0, 64), 60);
  c.max_length = 10;  // a long previous-text prompt raises it by n_text_ctx / 2 - 1 at most
  EXPECT_EQ(speech_max_new_tokens(c, 40, 0, 64), 1);
  EXPECT_EQ(speech_max_new_tokens(c, 20, 0, 64), 9);
}

TEST(SpeechAlign, DtwAndMedianFilter) {
  // Cheap cells (0,0) (0,1) (1,2) (1,3): the path stays in row 0 for two columns, then row 1.
  std::vector<double> cost(8, 1.0);
  for (int64_t c : {0, 1, 6, 7}) cost[size_t(c)] = -1.0;
  std::vector<int64_t> text, time;
  speech_dtw(cost, 2, 4, &text, &time);
  EXPECT_EQ(text, (std::vector<int64_t>{0, 0, 1, 1}));
  EXPECT_EQ(time, (std::vector<int64_t>{0, 1, 2, 3}));
  // A longer cost: a monotonic path from corner to corner in unit steps.
  const int64_t n = 5, m = 9;
  std::vector<double> big(size_t(n * m));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) big[size_t(i * m + j)] = std::fabs(double(j) - 2.0 * double(i));
  speech_dtw(big, n, m, &text, &time);
  ASSERT_EQ(text.size(), time.size());
  EXPECT_EQ(text.front(), 0);
  EXPECT_EQ(time.front(), 0);
  EXPECT_EQ(text.back(), n - 1);
  EXPECT_EQ(time.back(), m - 1);
  for (size_t k = 1; k < text.size(); ++k) {
    EXPECT_GE(text[k], text[k - 1]);
    EXPECT_GE(time[k], time[k - 1]);
    EXPECT_LE(text[k] - text[k - 1] + time[k] - time[k - 1], 2);
  }
  // Median of 3 with reflected edges: [5 1 4 2 3] -> [1 4 2 3 2].
  std::vector<float> x = {5, 1, 4, 2, 3};
  speech_median_filter(x.data(), 1, 5, 3);
  EXPECT_EQ(x, (std::vector<float>{1, 4, 2, 3, 2}));
  EXPECT_THROW(speech_median_filter(x.data(), 1, 5, 4), Error);
}

// A byte-level tokenizer with no merges (each byte one token) plus two special tokens.
std::unique_ptr<Tokenizer> byte_tokenizer() {
  std::vector<int> bs;
  for (int b = '!'; b <= '~'; ++b) bs.push_back(b);
  for (int b = 0xA1; b <= 0xAC; ++b) bs.push_back(b);
  for (int b = 0xAE; b <= 0xFF; ++b) bs.push_back(b);
  std::vector<int> cs = bs;
  int extra = 0;
  for (int b = 0; b < 256; ++b)
    if (std::find(bs.begin(), bs.end(), b) == bs.end()) {
      bs.push_back(b);
      cs.push_back(256 + extra++);
    }
  nlohmann::json vocab = nlohmann::json::object();
  for (size_t i = 0; i < bs.size(); ++i) {
    std::string u;
    const int c = cs[i];
    if (c < 0x80) u += char(c);
    else {
      u += char(0xC0 | (c >> 6));
      u += char(0x80 | (c & 0x3F));
    }
    vocab[u] = bs[i];
  }
  nlohmann::json tok = {
      {"version", "1.0"},
      {"added_tokens", {{{"id", 256}, {"content", "<|endoftext|>"}, {"special", true}, {"single_word", false},
                         {"lstrip", false}, {"rstrip", false}, {"normalized", false}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}, {"byte_fallback", false}}},
  };
  const auto dir = testing::process_temp_dir() / "byte_tokenizer";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << tok.dump();
  return Tokenizer::from_hf_dir(dir.string());
}

TEST(SpeechAlign, WordsSplitAtSpacesWithPunctuationAttached) {
  const auto tok = byte_tokenizer();
  const std::vector<int32_t> ids = tok->encode(" \"Hello, world!\" said (she) caf\xc3\xa9");
  const std::vector<SpeechWordSpan> words = speech_split_words(*tok, ids, false);
  std::vector<std::string> texts;
  for (const auto& w : words) texts.push_back(w.text);
  EXPECT_EQ(texts, (std::vector<std::string>{" \"Hello,", " world!\"", " said", " (she)", " caf\xc3\xa9"}));
  // Every token in exactly one word, in order; timing spans the word without its punctuation.
  int32_t next = 0;
  for (const auto& w : words)
    for (int32_t i : w.token_index) EXPECT_EQ(i, next++);
  EXPECT_EQ(next, int32_t(ids.size()));
  EXPECT_EQ(words[0].timing_begin, 1);  // the space joined '"Hello' and kept its timing
  // Without spaces: one word per character (the two bytes of é stay together).
  const std::vector<SpeechWordSpan> chars = speech_split_words(*tok, tok->encode("a\xc3\xa9"), true);
  ASSERT_EQ(chars.size(), 2u);
  EXPECT_EQ(chars[1].text, "\xc3\xa9");
  EXPECT_EQ(chars[1].token_index.size(), 2u);
}

TEST(SpeechConfigTest, ReadsGenerationConfig) {
  const nlohmann::json gen = nlohmann::json::parse(R"({
    "decoder_start_token_id": 11, "eos_token_id": 10, "no_timestamps_token_id": 13, "prev_sot_token_id": 12,
    "lang_to_id": {"<|en|>": 5, "<|de|>": 6}, "task_to_id": {"transcribe": 8, "translate": 7},
    "is_multilingual": true, "alignment_heads": [[0, 1], [1, 0]], "suppress_tokens": [1, 2],
    "begin_suppress_tokens": [3, 10], "max_initial_timestamp_index": 50, "max_length": 40})");
  const SpeechConfig c = speech_config_from_hf(nlohmann::json::object(), gen, nullptr, 20, nullptr);
  EXPECT_EQ(c.max_length, 40);
  EXPECT_EQ(speech_config_from_hf(nlohmann::json::parse(R"({"max_length": 30})"), gen, nullptr, 20, nullptr).max_length,
            40);  // generation_config.json first, then config.json
  EXPECT_EQ(speech_config_from_hf(nlohmann::json::parse(R"({"max_length": 30})"), nlohmann::json::parse(R"({
    "decoder_start_token_id": 11, "eos_token_id": 10})"), nullptr, 20, nullptr).max_length, 30);
  EXPECT_EQ(c.sot, 11);
  EXPECT_EQ(c.timestamp_begin, 14);
  EXPECT_EQ(c.no_speech, 12);
  EXPECT_EQ(c.transcribe, 8);
  EXPECT_EQ(c.translate, 7);
  ASSERT_EQ(c.languages.size(), 2u);
  EXPECT_EQ(c.find_language("German")->token, 6);
  EXPECT_EQ(c.find_language("<|en|>")->token, 5);
  EXPECT_EQ(c.find_language("de")->name, "german");
  EXPECT_FALSE(c.find_language("xx").has_value());
  EXPECT_EQ(c.alignment_heads.size(), 2u);
  EXPECT_EQ(c.mel.n_mels, 80);
  // Ids outside the vocabulary are errors naming the key.
  const nlohmann::json bad = nlohmann::json::parse(R"({"decoder_start_token_id": 11, "eos_token_id": 10,
    "suppress_tokens": [25]})");
  try {
    speech_config_from_hf(nlohmann::json::object(), bad, nullptr, 20, nullptr);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("suppress_tokens"), std::string::npos) << e.what();
  }
}

Transcript sample_transcript() {
  Transcript t;
  t.task = "transcribe";
  t.language = "en";
  t.duration = 8.47;
  t.text = "The beach was a popular spot. People --> swam.";
  TranscriptSegment a;
  a.id = 0;
  a.start = 0.0;
  a.end = 3.32;
  a.text = " The beach was a popular spot.";
  a.tokens = {50364, 440, 7534, 50530};
  a.avg_logprob = -0.25;
  a.compression_ratio = 1.5;
  a.no_speech_prob = 0.125;
  a.words = {{" The", 0.0, 0.24, 0.9}, {" beach", 0.24, 0.5, 0.8}};
  TranscriptSegment b;
  b.id = 1;
  b.seek = 166;
  b.start = 3.32;
  b.end = 3725.5;
  b.text = " People --> swam.";
  b.tokens = {50530, 3432, 50700};
  t.segments = {a, b};
  return t;
}

// The stream's deltas add up to the final text for segments that start or end with any
// whitespace (a segment ending in "\r" once gave a delta the text did not have).
TEST(TranscriptFormatTest, StreamDeltasAddUpToTheText) {
  std::mt19937 rng(7);
  const std::string pieces[] = {" ", "\r", "\n", "\t", "\v", "\f", "a", "Zs", "\xc3\xa9", ""};
  for (int round = 0; round < 2000; ++round) {
    std::vector<TranscriptSegment> segments(1 + rng() % 5);
    TranscriptDeltas deltas;
    std::string streamed;
    for (size_t i = 0; i < segments.size(); ++i) {
      for (int k = int(rng() % 6); k > 0; --k) segments[i].text += pieces[rng() % std::size(pieces)];
      const std::string d = deltas.next(segments[i].text);
      streamed += d;
      const std::vector<TranscriptSegment> seen(segments.begin(), segments.begin() + long(i) + 1);
      ASSERT_EQ(streamed, transcript_text(seen)) << "round " << round << " segment " << i;
    }
  }
  TranscriptDeltas d;
  EXPECT_EQ(d.next(" \r"), "");
  EXPECT_EQ(d.next(" Hello\r"), "Hello");
  EXPECT_EQ(d.next("\n"), "");
  EXPECT_EQ(d.next(" world."), "\r\n world.");
}

TEST(TranscriptFormatTest, SrtVttTextAndJsonByteForByte) {
  const Transcript t = sample_transcript();
  EXPECT_EQ(transcript_render(t, TranscriptFormat::srt),
            "1\n00:00:00,000 --> 00:00:03,320\nThe beach was a popular spot.\n\n"
            "2\n00:00:03,320 --> 01:02:05,500\nPeople -> swam.\n\n");
  EXPECT_EQ(transcript_render(t, TranscriptFormat::vtt),
            "WEBVTT\n\n00:00:00.000 --> 00:00:03.320\nThe beach was a popular spot.\n\n"
            "00:00:03.320 --> 01:02:05.500\nPeople -> swam.\n\n");
  EXPECT_EQ(transcript_render(t, TranscriptFormat::text), "The beach was a popular spot. People --> swam.\n");
  EXPECT_EQ(transcript_render(t, TranscriptFormat::json),
            R"({"text":"The beach was a popular spot. People --> swam.","usage":{"type":"duration","seconds":9}})");
  EXPECT_EQ(transcript_render(t, TranscriptFormat::verbose_json, {.segments = true, .words = true}),
            R"({"task":"transcribe","language":"english","duration":8.470000267028809,)"
            R"("text":"The beach was a popular spot. People --> swam.","segments":[)"
            R"({"id":0,"seek":0,"start":0.0,"end":3.319999933242798,"text":" The beach was a popular spot.",)"
            R"("tokens":[50364,440,7534,50530],"temperature":0.0,"avg_logprob":-0.25,"compression_ratio":1.5,)"
            R"("no_speech_prob":0.125},)"
            R"({"id":1,"seek":166,"start":3.319999933242798,"end":3725.5,"text":" People --> swam.",)"
            R"("tokens":[50530,3432,50700],"temperature":0.0,"avg_logprob":0.0,"compression_ratio":0.0,)"
            R"("no_speech_prob":0.0}],)"
            R"("words":[{"word":"The","start":0.0,"end":0.23999999463558197},)"
            R"({"word":"beach","start":0.23999999463558197,"end":0.5}],)"
            R"("usage":{"type":"duration","seconds":9}})");
  // Without segments (timestamp_granularities[] = word only).
  const auto j = transcript_verbose_json(t, {.segments = false, .words = true});
  EXPECT_FALSE(j.contains("segments"));
  EXPECT_EQ(j["words"].size(), 2u);
  EXPECT_EQ(transcript_timestamp(3599.9996, ','), "01:00:00,000");
  EXPECT_EQ(transcript_timestamp(-1.0, '.'), "00:00:00.000");
  TranscriptFormat f;
  EXPECT_FALSE(transcript_format_from_name("xml", &f));
}

server::AudioForm form_of(const std::vector<std::pair<std::string, std::string>>& parts, size_t limit = 1000) {
  server::AudioForm form(limit);
  for (const auto& [name, value] : parts) {
    EXPECT_TRUE(form.begin_part(name, name == "file" ? "a.wav" : ""));
    for (size_t p = 0; p < value.size(); p += 3) EXPECT_TRUE(form.data(value.data() + p, std::min<size_t>(3, value.size() - p)));
  }
  return form;
}

int status_of(const std::function<void()>& fn, std::string* param = nullptr) {
  try {
    fn();
  } catch (const server::HttpError& e) {
    if (param) *param = e.param();
    return e.status();
  }
  return 200;
}

TEST(AudioRequestTest, FieldsAndErrors) {
  const server::AudioForm ok = form_of({{"file", "RIFFxxxx"}, {"model", " whisper "}, {"language", "de"},
                                        {"response_format", "verbose_json"}, {"timestamp_granularities[]", "word"},
                                        {"temperature", "0.4"}, {"prompt", "Hello"}});
  const server::AudioRequest r = server::audio_request_parse(ok);
  EXPECT_EQ(r.model, "whisper");
  EXPECT_EQ(r.language, "de");
  EXPECT_EQ(r.format, TranscriptFormat::verbose_json);
  EXPECT_TRUE(r.words);
  EXPECT_FALSE(r.segments);
  EXPECT_FLOAT_EQ(r.temperature, 0.4f);
  EXPECT_EQ(ok.file().size(), 8u);
  std::string param;
  auto parse = [](const server::AudioForm& f) { return [&f] { server::audio_request_parse(f); }; };
  const server::AudioForm no_file = form_of({{"model", "m"}});
  EXPECT_EQ(status_of(parse(no_file), &param), 400);
  EXPECT_EQ(param, "file");
  const server::AudioForm empty_file = form_of({{"file", ""}, {"model", "m"}});
  EXPECT_EQ(status_of(parse(empty_file), &param), 400);
  const server::AudioForm bad_format = form_of({{"file", "x"}, {"model", "m"}, {"response_format", "xml"}});
  EXPECT_EQ(status_of(parse(bad_format), &param), 400);
  EXPECT_EQ(param, "response_format");
  const server::AudioForm bad_temp = form_of({{"file", "x"}, {"model", "m"}, {"temperature", "1.5"}});
  EXPECT_EQ(status_of(parse(bad_temp), &param), 400);
  EXPECT_EQ(param, "temperature");
  const server::AudioForm words_json = form_of({{"file", "x"}, {"model", "m"}, {"timestamp_granularities[]", "word"}});
  EXPECT_EQ(status_of(parse(words_json), &param), 400);
  EXPECT_EQ(param, "timestamp_granularities");
  const server::AudioForm stream_srt = form_of({{"file", "x"}, {"model", "m"}, {"response_format", "srt"}, {"stream", "true"}});
  EXPECT_EQ(status_of(parse(stream_srt), &param), 400);
  // Over the upload limit: the form stops reading and the answer is a 413.
  server::AudioForm big(10);
  EXPECT_TRUE(big.begin_part("file", "big.wav"));
  EXPECT_TRUE(big.data("0123456789", 10));
  EXPECT_FALSE(big.data("x", 1));
  EXPECT_EQ(status_of([&] { big.fail_upload(); }), 413);
  server::AudioForm twice(100);
  EXPECT_TRUE(twice.begin_part("file", "a"));
  EXPECT_FALSE(twice.begin_part("file", "b"));
  EXPECT_EQ(status_of([&] { twice.fail_upload(); }), 400);
}

}  // namespace
}  // namespace brisk
