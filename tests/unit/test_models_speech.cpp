// Whisper against transformers (float32, CPU): the shared random-weight fixture (128 mel bins,
// 3 encoder and 1 decoder layers) for the encoder output, the decoder logits after a forced
// prefix and the greedy continuation; the reference ops and quantized weights within their
// margins; the encoder-decoder state rules of Context; and, when the GPU machine has made
// them (tools/make_fixtures/make_whisper_fixtures.py), the project's own fixtures: the 80-bin
// layout, timestamp-rule decoding and beam search.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "media/audio.h"
#include "media/log_mel.h"
#include "model_fixtures.h"
#include "runtime/engine_api.h"
#include "runtime/loaded_model.h"
#include "runtime/speech_config.h"
#include "runtime/speech_decode.h"
#include "runtime/transcribe.h"
#include "scoped_env.h"

namespace brisk {
namespace {

nlohmann::json speech_read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::vector<float> speech_first_window(const std::string& wav, int32_t n_mels) {
  const media::Audio a = media::audio_decode_file(wav, {.sample_rate = 16000});
  const media::LogMel m = media::LogMelExtractor({.n_mels = n_mels}).compute(a.samples.data(), int64_t(a.samples.size()));
  return std::vector<float>(m.data.begin(), m.data.begin() + 3000 * int64_t(n_mels));
}

struct PrefixRun {
  std::vector<float> enc_out;  // [n_pos, d]
  std::vector<std::vector<float>> logits;
};

PrefixRun run_prefix(const std::string& model_path, const std::vector<float>& features, const std::vector<int32_t>& prefix,
               QuantType kv, const std::string& quant = "") {
  auto model = Model::load({.path = model_path, .quant = quant});
  auto ctx = Context::create(model, {.n_ctx = 64, .n_seq_max = 1, .n_batch = 64, .kv_type = kv, .n_threads = 2,
                                     .kv_block_size = 16});
  PrefixRun r;
  ctx->set_tap([&](const std::string& name, int layer, const float* data, int64_t rows, int64_t cols) {
    if (name == "enc_out" && layer == -1) r.enc_out.assign(data, data + rows * cols);
  });
  ctx->encode({EncoderInput{.seq = 0, .features = features.data()}});
  ctx->set_tap({});
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < prefix.size(); ++i)
    batch.push_back({.token = prefix[i], .pos = int32_t(i), .seq = 0, .want_logits = true});
  ctx->decode(batch);
  for (size_t i = 0; i < prefix.size(); ++i) {
    const float* l = ctx->logits(int32_t(i));
    r.logits.emplace_back(l, l + ctx->n_vocab());
  }
  return r;
}

double speech_max_diff(const std::vector<float>& a, const nlohmann::json& ref) {
  EXPECT_EQ(a.size(), ref.size());
  double m = 0.0;
  for (size_t i = 0; i < std::min(a.size(), ref.size()); ++i) m = std::max(m, std::fabs(double(a[i]) - ref[i].get<double>()));
  return m;
}

class WhisperFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_MODEL("wave2/whisper_tiny_random");
    ref_ = speech_read_json(dir() + "/ref.json");
    features_ = speech_first_window(dir() + "/input.wav", 128);
    for (const auto& v : ref_["decoder_input_ids"]) prefix_.push_back(v.get<int32_t>());
  }
  static std::string dir() { return model_dir("wave2/whisper_tiny_random"); }
  void check(const PrefixRun& r, double tol, const char* what) {
    const auto& enc = ref_["encoder_last_hidden_first_frames"];  // [4][48]
    double e = 0.0;
    for (size_t t = 0; t < enc.size(); ++t)
      for (size_t c = 0; c < enc[t].size(); ++c)
        e = std::max(e, std::fabs(double(r.enc_out[t * enc[t].size() + c]) - enc[t][c].get<double>()));
    EXPECT_LT(e, tol) << what << ": encoder output";
    for (size_t p = 0; p < prefix_.size(); ++p)
      EXPECT_LT(speech_max_diff(r.logits[p], ref_["logits_per_position"][p]), tol) << what << ": logits at position " << p;
  }
  nlohmann::json ref_;
  std::vector<float> features_;
  std::vector<int32_t> prefix_;
};

TEST_F(WhisperFixture, EncoderAndLogitsMatchTransformers) {
  const PrefixRun r = run_prefix(dir() + "/hf", features_, prefix_, QuantType::F32);
  ASSERT_EQ(r.enc_out.size(), size_t(1500 * 48));
  check(r, 1e-4, "f32 caches");
  EXPECT_LT(speech_max_diff(r.logits.back(), ref_["last_logits"]), 1e-4);
}

TEST_F(WhisperFixture, ReferenceOpsAndF16CachesStayClose) {
  {
    ScopedEnv env("BRISK_REF_OPS", "1");
    check(run_prefix(dir() + "/hf", features_, prefix_, QuantType::F32), 1e-4, "BRISK_REF_OPS");
  }
  check(run_prefix(dir() + "/hf", features_, prefix_, QuantType::F16), 3e-3, "f16 caches");
}

TEST_F(WhisperFixture, QuantizedWeightsKeepTheLogitsClose) {
  for (const char* q : {"q8_0", "f16", "bf16"}) {
    const PrefixRun r = run_prefix(dir() + "/hf", features_, prefix_, QuantType::F32, q);
    // The error of 8-bit weights through 4 layers: a fraction of the logits' spread.
    double spread = 0.0;
    for (const auto& v : ref_["last_logits"]) spread = std::max(spread, std::fabs(v.get<double>()));
    EXPECT_LT(speech_max_diff(r.logits.back(), ref_["last_logits"]), 0.05 * spread) << q;
  }
}

TEST_F(WhisperFixture, GreedyContinuationMatches) {
  auto model = Model::load({.path = dir() + "/hf"});
  Transcriber tr(model, {.n_threads = 2, .kv_type = QuantType::F32, .max_beams = 1});
  const media::Audio a = media::audio_decode_file(dir() + "/input.wav", {.sample_rate = 16000});
  const ForcedDecodeResult r = tr.decode_forced(a.samples, prefix_, 12, 0.0f, 0);
  std::vector<int32_t> want;
  for (const auto& v : ref_["greedy_continuation"]) want.push_back(v.get<int32_t>());
  EXPECT_EQ(r.tokens, want);
  EXPECT_LT(speech_max_diff(r.prefix_logits, ref_["last_logits"]), 1e-4);
  EXPECT_EQ(tr.first_window_features(a.samples), features_);
  // The fixture has no timestamp or language tokens: transcription still runs (ids only).
  const Transcript t = tr.transcribe(a.samples, {.temperatures = {0.0f}, .max_new_tokens = 8});
  ASSERT_EQ(t.segments.size(), 1u);
  EXPECT_LE(t.segments[0].tokens.size(), 8u);
  EXPECT_EQ(t.language, "en");
}

TEST_F(WhisperFixture, ContextRulesForEncoderState) {
  auto model = Model::load({.path = dir() + "/hf"});
  auto ctx = Context::create(model, {.n_ctx = 48, .n_seq_max = 3, .n_batch = 48, .kv_type = QuantType::F32,
                                     .n_threads = 1, .kv_block_size = 16});
  const EncoderShape s = ctx->encoder_shape();
  EXPECT_EQ(s.n_frames, 3000);
  EXPECT_EQ(s.n_features, 128);
  EXPECT_EQ(s.n_pos, 1500);
  // No encoder output yet: an error naming the sequence, state unchanged.
  EXPECT_THROW(ctx->decode({{.token = 1, .pos = 0, .seq = 1, .want_logits = true}}), Error);
  EXPECT_THROW(ctx->encode({EncoderInput{.seq = 3, .features = features_.data()}}), Error);
  ctx->encode({EncoderInput{.seq = 0, .features = features_.data()}});
  ctx->decode({{.token = 1, .pos = 0, .seq = 0, .want_logits = true}});
  const std::vector<float> first(ctx->logits(0), ctx->logits(0) + ctx->n_vocab());
  // seq_copy shares the encoder output: the copy decodes the same logits.
  ctx->seq_copy(0, 2, 1);
  ctx->decode({{.token = 33, .pos = 1, .seq = 0, .want_logits = true}, {.token = 33, .pos = 1, .seq = 2, .want_logits = true}});
  for (int32_t i = 0; i < ctx->n_vocab(); ++i) EXPECT_EQ(ctx->logits(0)[i], ctx->logits(1)[i]);
  // The probe: cross-attention probabilities of (layer 0, head 1) per token, each a distribution.
  ctx->seq_truncate(0, 0);
  ctx->set_cross_attention_probe({{0, 1}, {0, 2}});
  ctx->decode({{.token = 1, .pos = 0, .seq = 0, .want_logits = true}, {.token = 33, .pos = 1, .seq = 0}});
  for (int i = 0; i < 2; ++i) {
    const float* p = ctx->cross_attention_probe(i);
    ASSERT_NE(p, nullptr);
    for (int t = 0; t < 2; ++t) {
      double sum = 0.0;
      for (int j = 0; j < 1500; ++j) sum += p[t * 1500 + j];
      EXPECT_NEAR(sum, 1.0, 1e-4);
    }
  }
  for (int32_t i = 0; i < ctx->n_vocab(); ++i) EXPECT_EQ(ctx->logits(0)[i], first[size_t(i)]);  // the probe changes nothing
  EXPECT_THROW(ctx->set_cross_attention_probe({{1, 0}}), Error);  // one decoder layer
}

// Fixtures made by tools/make_fixtures/make_whisper_fixtures.py on the GPU machine: a model
// folder with tokenizer-free generation config, the input signal (input.wav), the log-mel
// frames transformers computed from it (features.f32: the frames before the padding's, which
// ref.json stores once) and ref.json holding the generated ids of transformers' generate() for
// several settings (timestamp rules, beam search).
// One instance per such folder that exists (tests/fixtures/models/whisper_*/ with a ref.json),
// so that a fixture not yet committed neither fails the required-assets run nor skips in it.
class WhisperOwnFixture : public ::testing::TestWithParam<std::string> {
 protected:
  static std::string dir() { return std::string(BRISK_FIXTURES) + "/models/" + GetParam(); }
  // The [3000][n_mels] window as transformers computed it: the stored head frames, then the tail
  // frame repeated.
  static std::vector<float> reference_features(const nlohmann::json& ref) {
    const int64_t n_mels = ref.at("n_mels").get<int64_t>(), n_head = ref.at("n_head_frames").get<int64_t>();
    std::vector<float> f(size_t(3000 * n_mels));
    std::ifstream in(dir() + "/features.f32", std::ios::binary);
    in.read(reinterpret_cast<char*>(f.data()), std::streamsize(n_head * n_mels * 4));
    EXPECT_EQ(in.gcount(), n_head * n_mels * 4) << "features.f32 holds " << n_head << " frames";
    const auto& tail = ref.at("features_tail");
    EXPECT_EQ(int64_t(tail.size()), n_mels);
    for (int64_t t = n_head; t < 3000; ++t)
      for (int64_t m = 0; m < n_mels; ++m) f[size_t(t * n_mels + m)] = tail[size_t(m)].get<float>();
    return f;
  }
};

std::vector<std::string> whisper_own_fixtures() {
  std::vector<std::string> names;
  const std::filesystem::path root = std::filesystem::path(BRISK_FIXTURES) / "models";
  std::error_code ec;
  for (const auto& d : std::filesystem::directory_iterator(root, ec)) {
    const std::string name = d.path().filename().string();
    if (name.rfind("whisper_", 0) == 0 && std::filesystem::exists(d.path() / "ref.json")) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The front end at this fixture's bin count (80 or 128) from the same samples.
TEST_P(WhisperOwnFixture, LogMelMatchesTransformers) {
  const nlohmann::json ref = speech_read_json(dir() + "/ref.json");
  const std::vector<float> want = reference_features(ref);
  const std::vector<float> got = speech_first_window(dir() + "/input.wav", ref.at("n_mels").get<int32_t>());
  ASSERT_EQ(got.size(), want.size());
  double d = 0.0;
  for (size_t i = 0; i < got.size(); ++i) d = std::max(d, std::fabs(double(got[i]) - double(want[i])));
  EXPECT_LT(d, 1e-4);
}

// generate(input_features, language="en", task="transcribe", return_timestamps, num_beams,
// max_new_tokens, temperature=0.0, return_dict_in_generate=True) over the fixture's 3000 frames
// runs transformers' sequential windows even on a short input: after a window whose last
// segment is unfinished it decodes again from the last timestamp pair (the rest of the frames,
// padded with zeros), while frames remain. With timestamps its `sequences` are every window's
// segments' tokens; without, it returns the last window's generate() output (the random model
// emits timestamp ids even after <|notimestamps|>, and transformers seeks by them).
TEST_P(WhisperOwnFixture, GenerateMatchesTransformers) {
  const nlohmann::json ref = speech_read_json(dir() + "/ref.json");
  auto model = Model::load({.path = dir() + "/hf"});
  Transcriber tr(model, {.n_threads = 2, .kv_type = QuantType::F32, .max_beams = 5});
  const std::vector<float> features = reference_features(ref);
  ASSERT_FALSE(ref["cases"].empty());
  for (const auto& c : ref["cases"]) {
    const std::string name = c.value("name", std::string("?"));
    const bool timestamps = c.value("timestamps", false);
    std::vector<int32_t> want;
    for (const auto& v : c["generated"]) want.push_back(v.get<int32_t>());
    const TranscribeOptions o{.language = "en", .timestamps = timestamps, .temperatures = {0.0f},
                              .beam_size = c.value("num_beams", 1), .compression_ratio_threshold = 0.0,
                              .logprob_threshold = -1e30, .no_speech_threshold = 2.0,
                              .max_new_tokens = c.value("max_new_tokens", 0)};
    const Transcript t = tr.transcribe_features(features, o);
    ASSERT_FALSE(t.windows.empty()) << name;
    // The window's prompt is the case's: start of transcript, language, task, [no timestamps].
    std::vector<int32_t> prompt = {tr.config().sot, tr.config().find_language("en")->token, tr.config().transcribe};
    if (!timestamps) prompt.push_back(tr.config().no_timestamps);
    EXPECT_EQ(prompt, c["decoder_prompt"].get<std::vector<int32_t>>()) << name;
    std::vector<int32_t> got;
    if (timestamps) {
      for (const TranscriptSegment& s : t.segments) got.insert(got.end(), s.tokens.begin(), s.tokens.end());
    } else {
      got = t.windows.back().tokens;
    }
    EXPECT_EQ(got, want) << GetParam() << " case " << name << " (" << t.windows.size() << " windows)";
  }
}

// The fallback's average log-probability, as transformers' _retrieve_avg_logprobs: every
// generated token's log-probability under the processed distribution (end-of-text included),
// over the token count, recomputed here from one batched pass over prompt and tokens.
TEST_P(WhisperOwnFixture, AverageLogProbabilityCountsEveryGeneratedToken) {
  const nlohmann::json ref = speech_read_json(dir() + "/ref.json");
  auto model = Model::load({.path = dir() + "/hf"});
  auto loaded = std::dynamic_pointer_cast<const LoadedModel>(model);
  SpeechConfig cfg = speech_config_from_hf(loaded->config_json_, loaded->generation_config_,
                                           loaded->preprocessor_config_, loaded->config().n_vocab, nullptr);
  const std::vector<float> features = reference_features(ref);
  auto ctx = Context::create(model, {.n_ctx = loaded->config().n_ctx_train, .n_seq_max = 2,
                                     .n_batch = loaded->config().n_ctx_train, .kv_type = QuantType::F32,
                                     .n_threads = 2, .kv_block_size = 16});
  cfg.n_text_ctx = ctx->options().n_ctx;
  const std::vector<int32_t> prompt = {cfg.sot, cfg.find_language("en")->token, cfg.transcribe};
  const SpeechRules rules{.cfg = &cfg, .timestamps = true, .suppress = true};
  ctx->encode({EncoderInput{.seq = 0, .features = features.data()}});
  const WindowDecodeResult r = speech_decode_window(*ctx, cfg, {.prompt = prompt, .rules = rules, .max_new_tokens = 6});
  ASSERT_EQ(r.tokens.size(), 6u);
  std::vector<BatchToken> batch;
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), r.tokens.begin(), r.tokens.end() - 1);
  for (size_t i = 0; i < all.size(); ++i)
    batch.push_back({.token = all[i], .pos = int32_t(i), .seq = 0, .want_logits = i + 1 >= prompt.size()});
  ctx->seq_truncate(0, 0);
  ctx->decode(batch);
  double sum = 0.0;
  for (size_t k = 0; k < r.tokens.size(); ++k) {
    std::vector<float> row(ctx->logits(int32_t(k)), ctx->logits(int32_t(k)) + cfg.n_vocab);
    speech_rules_apply(rules, row.data(), std::vector<int32_t>(r.tokens.begin(), r.tokens.begin() + int64_t(k)));
    double mx = -INFINITY, z = 0.0;
    for (float v : row) mx = std::max(mx, double(v));
    for (float v : row) z += std::exp(double(v) - mx);
    sum += double(row[size_t(r.tokens[k])]) - mx - std::log(z);
  }
  EXPECT_NEAR(r.sum_logprob, sum, 1e-3);
  EXPECT_NEAR(r.avg_logprob, sum / 6.0, 2e-4);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, WhisperOwnFixture, ::testing::ValuesIn(whisper_own_fixtures()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(WhisperOwnFixture);



// A copy of an own Whisper fixture's folder with its generation_config.json patched.
std::filesystem::path whisper_patched(const std::string& fixture, const nlohmann::json& patch, const std::string& tag) {
  namespace fs = std::filesystem;
  const fs::path src = fs::path(BRISK_FIXTURES) / "models" / fixture / "hf";
  const fs::path dir = fs::path(::testing::TempDir()) / ("brisk_whisper_" + tag);
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& f : fs::directory_iterator(src))
    if (f.path().filename() != "generation_config.json") fs::create_symlink(fs::absolute(f.path()), dir / f.path().filename());
  nlohmann::json gen = speech_read_json((src / "generation_config.json").string());
  gen.merge_patch(patch);
  std::ofstream(dir / "generation_config.json") << gen.dump();
  return dir;
}

// An English-only model refuses another language (transformers refuses any; English is taken
// here); word timestamps without usable alignment heads (none in generation_config.json, or
// heads past the decoder's layers, as a distilled model keeping its teacher's) are refused
// before any decoding, naming why.
TEST(WhisperOptions, EnglishOnlyAndWordTimestampsAreCheckedUpFront) {
  const std::string fixture = "whisper_80bin";
  if (!std::filesystem::exists(std::string(BRISK_FIXTURES) + "/models/" + fixture + "/hf/config.json"))
    GTEST_SKIP() << fixture << " is absent";
  const std::vector<float> samples(16000, 0.0f);
  auto expect_error = [&](Transcriber& tr, const TranscribeOptions& o, const std::string& needle) {
    try {
      tr.transcribe(samples, o);
      ADD_FAILURE() << "accepted; expected an error naming '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  {
    const auto dir = whisper_patched(fixture, {{"is_multilingual", false}}, "en_only");
    Transcriber tr(Model::load({.path = dir.string()}), {.n_threads = 2});
    expect_error(tr, {.language = "de", .temperatures = {0.0f}, .max_new_tokens = 2}, "English-only");
    EXPECT_NO_THROW(tr.transcribe(samples, {.language = "en", .temperatures = {0.0f}, .max_new_tokens = 2}));
    std::filesystem::remove_all(dir);
  }
  for (const auto& [patch, needle] : std::vector<std::pair<nlohmann::json, std::string>>{
           {{{"alignment_heads", nullptr}}, "no alignment_heads"}, {{{"alignment_heads", {{7, 0}}}}, "layer 7"}}) {
    const auto dir = whisper_patched(fixture, patch, "heads");
    Transcriber tr(Model::load({.path = dir.string()}), {.n_threads = 2});
    EXPECT_FALSE(tr.config().word_timestamps_unavailable.empty());
    expect_error(tr, {.language = "en", .word_timestamps = true, .temperatures = {0.0f}, .max_new_tokens = 2}, needle);
    std::filesystem::remove_all(dir);
  }
  Transcriber tr(Model::load({.path = std::string(BRISK_FIXTURES) + "/models/" + fixture + "/hf"}), {.n_threads = 2});
  EXPECT_TRUE(tr.config().word_timestamps_unavailable.empty());
}

}  // namespace
}  // namespace brisk
