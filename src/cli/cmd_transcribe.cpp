// `brisk transcribe`: speech to text with an encoder-decoder speech model (a Hugging Face
// Whisper folder): decode the audio file, transcribe or translate it and print the transcript
// as text, json, verbose_json, srt or vtt; timing and the real-time factor on stderr. For
// checking against references, --prompt-ids forces a decoder prefix and prints the n tokens
// that follow (plain logits, no timestamp or suppression rules), --dump-logits writes the
// logits at the prefix's last position, --dump-mel the first window's log-mel features.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/command.h"
#include "cli/sampling_flags.h"
#include "core/error.h"
#include "hub/resolve.h"
#include "media/audio.h"
#include "runtime/engine_api.h"
#include "runtime/kv_cache.h"
#include "runtime/transcribe.h"
#include "runtime/transcript_format.h"

namespace {

using brisk::fail;

struct Args {
  std::string model, file, language, format = "text", prompt, prompt_ids, dump_logits, dump_mel, quant, output;
  std::string kv_type = "f16", device = "cpu", token;
  bool translate = false, show_ids = false, word_timestamps = false, no_timestamps = false, no_fallback = false;
  bool condition = false, have_temp = false;
  int32_t n_predict = -1, threads = 0, beam = 1;
  float temperature = 0.0f;
  uint64_t seed = 0;
};

void usage() {
  std::fprintf(stderr,
               "usage: brisk transcribe -m MODEL FILE [--language L] [--translate] [--format text|json|verbose_json|srt|vtt]\n"
               "  [--prompt TEXT] [--beam N] [--temp T] [--no-fallback] [--word-timestamps] [--no-timestamps]\n"
               "  [--condition-on-previous] [--seed N] [-o FILE]\n"
               "  [--prompt-ids 1,2,3 [-n N] [--show-ids] [--dump-logits FILE] [--dump-mel FILE]]\n"
               "  [--quant q8_0|q4_0|q4_k|f16|bf16] [-t N] [--kv-type f16|bf16|f32] [--device cpu|cuda|cuda:N|auto]\n"
               "  [--token HF_TOKEN]\n"
               "  FILE: WAV, FLAC, MP3, OGG Vorbis / Opus (any rate and channel count)\n"
               "  --temp T: 0 (default) decodes greedily and falls back to 0.2 .. 1.0 on repetitive or unlikely\n"
               "            output; T > 0 samples at T only\n"
               "  -n N: at most N tokens per window (default: the decoder context)\n"
               "  --prompt-ids: force this decoder prefix and print the -n (default 16) tokens that follow\n");
}

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::string item;
  std::stringstream ss(s);
  while (std::getline(ss, item, ',')) {
    while (!item.empty() && item.front() == ' ') item.erase(0, 1);
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) ids.push_back(brisk::cli::parse_int_flag("--prompt-ids", item));
  }
  BRISK_CHECK(!ids.empty(), "--prompt-ids: no ids in '", s, "'");
  return ids;
}

Args parse(const std::vector<std::string>& argv) {
  Args a;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& f = argv[i];
    auto value = [&]() -> const std::string& {
      BRISK_CHECK(i + 1 < argv.size(), "transcribe: ", f, " needs a value");
      return argv[++i];
    };
    auto int_value = [&]() { return brisk::cli::parse_int_flag(f, value()); };
    if (f == "--model" || f == "-m") a.model = value();
    else if (f == "--language" || f == "-l") a.language = value();
    else if (f == "--translate") a.translate = true;
    else if (f == "--format" || f == "-f") a.format = value();
    else if (f == "--prompt" || f == "-p") a.prompt = value();
    else if (f == "--prompt-ids") a.prompt_ids = value();
    else if (f == "-n" || f == "--n-predict") a.n_predict = int_value();
    else if (f == "--show-ids") a.show_ids = true;
    else if (f == "--dump-logits") a.dump_logits = value();
    else if (f == "--dump-mel") a.dump_mel = value();
    else if (f == "--temp" || f == "--temperature") {
      a.temperature = brisk::cli::parse_float_flag(f, value());
      a.have_temp = true;
    }
    else if (f == "--beam" || f == "--beam-size") a.beam = int_value();
    else if (f == "--no-fallback") a.no_fallback = true;
    else if (f == "--word-timestamps") a.word_timestamps = true;
    else if (f == "--no-timestamps") a.no_timestamps = true;
    else if (f == "--condition-on-previous") a.condition = true;
    else if (f == "--seed") a.seed = uint64_t(int_value());
    else if (f == "-o" || f == "--output") a.output = value();
    else if (f == "--quant") a.quant = value();
    else if (f == "-t" || f == "--threads") a.threads = int_value();
    else if (f == "--kv-type") a.kv_type = value();
    else if (f == "--device") a.device = value();
    else if (f == "--token") a.token = value();
    else if (f == "-h" || f == "--help") {
      usage();
      std::exit(0);
    } else if (!f.empty() && f[0] == '-') {
      fail("transcribe: unknown argument '", f, "' (see brisk transcribe --help)");
    } else {
      BRISK_CHECK(a.file.empty(), "transcribe: more than one audio file given ('", a.file, "', '", f, "')");
      a.file = f;
    }
  }
  BRISK_CHECK(!a.model.empty(), "transcribe: --model is required");
  BRISK_CHECK(!a.file.empty(), "transcribe: no audio file given");
  BRISK_CHECK(a.n_predict >= -1, "transcribe: -n must not be negative");
  BRISK_CHECK(a.beam >= 1 && a.beam <= 16, "transcribe: --beam ", a.beam, " out of range [1, 16]");
  BRISK_CHECK(a.temperature >= 0.0f && a.temperature <= 2.0f, "transcribe: --temp ", a.temperature, " out of range [0, 2]");
  return a;
}

void write_floats(const std::string& path, const std::vector<float>& v, const char* flag) {
  std::ofstream out(path, std::ios::binary);
  BRISK_CHECK(out.good(), flag, ": cannot write ", path);
  out.write(reinterpret_cast<const char*>(v.data()), std::streamsize(sizeof(float) * v.size()));
  BRISK_CHECK(out.good(), flag, ": write to ", path, " failed");
}

int cmd_transcribe(const std::vector<std::string>& argv) {
  const Args a = parse(argv);
  brisk::TranscriptFormat format;
  BRISK_CHECK(brisk::transcript_format_from_name(a.format, &format), "transcribe: --format '", a.format,
              "': use text, json, verbose_json, srt or vtt");
  const auto kv = brisk::kv_cache_type_from_name(a.kv_type);
  BRISK_CHECK(kv.has_value() && *kv != brisk::QuantType::Q8_0, "transcribe: --kv-type '", a.kv_type,
              "': use f16, bf16 or f32");
  brisk::HubOptions hub;
  hub.token = a.token;
  const auto t0 = std::chrono::steady_clock::now();
  auto model = brisk::Model::load({.path = brisk::hub_resolve_model(a.model, hub), .quant = a.quant, .n_threads = a.threads});
  brisk::Transcriber tr(model, {.device = a.device, .n_threads = a.threads, .kv_type = *kv, .max_beams = std::max(1, a.beam)});
  const auto t1 = std::chrono::steady_clock::now();
  const brisk::media::Audio audio =
      brisk::media::audio_decode_file(a.file, {.sample_rate = tr.config().mel.sample_rate});
  const auto t2 = std::chrono::steady_clock::now();
  if (!a.dump_mel.empty()) write_floats(a.dump_mel, tr.first_window_features(audio.samples), "--dump-mel");

  if (!a.prompt_ids.empty()) {
    const brisk::ForcedDecodeResult r =
        tr.decode_forced(audio.samples, parse_ids(a.prompt_ids), a.n_predict < 0 ? 16 : a.n_predict, a.temperature, a.seed);
    if (!a.dump_logits.empty()) write_floats(a.dump_logits, r.prefix_logits, "--dump-logits");
    const brisk::Tokenizer* tok = model->tokenizer();
    if (tok) std::printf("%s\n", tok->decode(r.tokens, true).c_str());
    if (a.show_ids || !tok) {
      std::printf("ids:");
      for (int32_t id : r.tokens) std::printf(" %d", id);
      std::printf("\n");
    }
    return 0;
  }
  BRISK_CHECK(a.dump_logits.empty(), "transcribe: --dump-logits needs --prompt-ids");
  brisk::TranscribeOptions o;
  o.task = a.translate ? "translate" : "transcribe";
  o.language = a.language;
  o.timestamps = !a.no_timestamps;
  o.word_timestamps = a.word_timestamps;
  if (a.no_fallback || (a.have_temp && a.temperature > 0.0f)) o.temperatures = {a.temperature};
  o.beam_size = a.beam;
  o.condition_on_previous = a.condition;
  o.prompt = a.prompt;
  o.seed = a.seed;
  o.max_new_tokens = std::max(0, a.n_predict);
  const brisk::Transcript t = tr.transcribe(audio.samples, o);
  const auto t3 = std::chrono::steady_clock::now();
  const std::string text =
      brisk::transcript_render(t, format, {.segments = true, .words = a.word_timestamps});
  if (a.output.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    if (format == brisk::TranscriptFormat::json || format == brisk::TranscriptFormat::verbose_json) std::printf("\n");
  } else {
    std::ofstream out(a.output, std::ios::binary);
    BRISK_CHECK(out.good(), "transcribe: cannot write ", a.output);
    out << text;
  }
  if (a.show_ids) {
    std::printf("ids:");
    for (const brisk::TranscriptSegment& s : t.segments)
      for (int32_t id : s.tokens) std::printf(" %d", id);
    std::printf("\n");
  }
  std::fflush(stdout);
  auto sec = [](auto x, auto y) { return std::chrono::duration<double>(y - x).count(); };
  const double run = sec(t2, t3);
  std::fprintf(stderr,
               "audio: %.2f s (%s, %d Hz, %d ch); load %.2f s, decode audio %.2f s; transcribe %.2f s (%.1fx real "
               "time), %zu segments, %lld tokens, language %s, device %s\n"
               "  %d windows: encoder %.3f s (%.3f s per window), decoder %.3f s (%.1f tok/s)\n",
               t.duration, audio.format.c_str(), audio.source_rate, audio.source_channels, sec(t0, t1), sec(t1, t2), run,
               run > 0 ? t.duration / run : 0.0, t.segments.size(), static_cast<long long>(t.n_tokens),
               t.language.empty() ? "-" : t.language.c_str(), tr.device().c_str(), t.n_windows, t.encode_seconds,
               t.n_windows ? t.encode_seconds / t.n_windows : 0.0, t.decode_seconds,
               t.decode_seconds > 0 ? double(t.n_tokens) / t.decode_seconds : 0.0);
  return 0;
}

}  // namespace

BRISK_COMMAND("transcribe", "speech to text with a Whisper model (WAV, FLAC, MP3, OGG; srt / vtt / json)", cmd_transcribe);
