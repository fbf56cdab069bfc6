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

#include "cli/args.h"
#include "cli/command.h"
#include "cli/model_arg.h"
#include "core/error.h"
#include "media/audio.h"
#include "runtime/engine_api.h"
#include "runtime/kv_cache.h"
#include "runtime/transcribe.h"
#include "runtime/transcript_format.h"

namespace {

using brisk::cli::ArgParser;

struct Args {
  std::string model, file, language, format = "text", prompt, prompt_ids, dump_logits, dump_mel, quant, output;
  std::string kv_type = "f16", device = "cpu", token;
  bool translate = false, show_ids = false, word_timestamps = false, no_timestamps = false, no_fallback = false;
  bool condition = false, have_temp = false;
  int32_t n_predict = -1, threads = 0, beam = 1;
  float temperature = 0.0f;
  uint64_t seed = 0;
};

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::string item;
  std::stringstream ss(s);
  while (std::getline(ss, item, ',')) {
    while (!item.empty() && item.front() == ' ') item.erase(0, 1);
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) ids.push_back(int32_t(brisk::cli::parse_integer("--prompt-ids", item, 0, INT32_MAX)));
  }
  if (ids.empty()) brisk::cli::usage_fail("--prompt-ids: no ids in '", s, "'");
  return ids;
}

// Reads the command line; false when the usage was printed (--help).
bool parse(const std::vector<std::string>& argv, Args* out) {
  Args& a = *out;
  ArgParser p("transcribe", "MODEL FILE [options]",
              "Speech to text: transcribes (or translates into English) an audio file with a Whisper model.");
  p.model(&a.model, "Hugging Face Whisper folder, GGUF file or Hub reference (org/name)");
  p.positional("FILE", &a.file, "WAV, FLAC, MP3, OGG Vorbis / Opus (any rate and channel count)", true);
  p.text({"-l", "--language"}, &a.language, "L", "spoken language (ISO-639-1 code or name; default: detected)");
  p.flag({"--translate"}, &a.translate, "translate into English instead of transcribing");
  p.text({"-f", "--format"}, &a.format, "F", "text | json | verbose_json | srt | vtt (default text)");
  p.text({"-p", "--prompt"}, &a.prompt, "TEXT", "initial prompt (previous text: spelling, style, names)");
  p.integer({"--beam", "--beam-size"}, &a.beam, 1, 16, "N", "beam search with N beams (default 1: greedy)");
  p.option({"--temp", "--temperature"}, "T",
           "0 (default) decodes greedily and falls back to 0.2 .. 1.0 on repetitive or unlikely output; T > 0 "
           "samples at T only",
           [&](const std::string& v) {
             a.temperature = float(brisk::cli::parse_number("--temp", v, 0.0, 2.0));
             a.have_temp = true;
           });
  p.flag({"--no-fallback"}, &a.no_fallback, "no temperature fallback");
  p.flag({"--word-timestamps"}, &a.word_timestamps, "word timestamps (cross-attention alignment heads)");
  p.flag({"--no-timestamps"}, &a.no_timestamps, "decode without timestamp tokens");
  p.flag({"--condition-on-previous"}, &a.condition, "prompt each window with the text of the previous ones");
  p.option({"-s", "--seed"}, "S", "sampler seed of the fallback temperatures (default 0)",
           [&](const std::string& v) { a.seed = uint64_t(brisk::cli::parse_integer("--seed", v, 0, INT64_MAX)); });
  p.text({"-o", "--output"}, &a.output, "FILE", "write the transcript here instead of stdout");
  p.integer({"-n", "--n-predict"}, &a.n_predict, 0, INT32_MAX, "N",
            "at most N tokens per window (default: the decoder context; with --prompt-ids 16)");
  p.section("Checking against references");
  p.text({"--prompt-ids"}, &a.prompt_ids, "IDS",
         "force this decoder prefix (comma-separated ids) and print the -n tokens that follow (plain logits)");
  p.flag({"--show-ids"}, &a.show_ids, "print the token ids");
  p.text({"--dump-logits"}, &a.dump_logits, "FILE", "with --prompt-ids: the logits at the prefix's last position (float32)");
  p.text({"--dump-mel"}, &a.dump_mel, "FILE",
         "the first window's log-mel features (float32, [3000 frames, n_mels], frame-major)");
  p.section("Model and machine");
  p.text({"--quant"}, &a.quant, "Q", "quantize safetensors weights at load: q8_0 | q4_0 | q4_k | f16 | bf16");
  p.text({"--kv-type"}, &a.kv_type, "T", "decoder KV cache type: f16 | bf16 | f32 (default f16)");
  brisk::cli::add_threads_option(p, &a.threads);
  brisk::cli::add_device_option(p, &a.device, "cpu");
  p.text({"--token"}, &a.token, "TOKEN", "Hugging Face token for gated models (default $HF_TOKEN)");
  if (!p.parse(argv)) return false;
  brisk::cli::refuse_device_list("transcribe", a.device);
  return true;
}

void write_floats(const std::string& path, const std::vector<float>& v, const char* flag) {
  std::ofstream out(path, std::ios::binary);
  BRISK_CHECK(out.good(), flag, ": cannot write ", path);
  out.write(reinterpret_cast<const char*>(v.data()), std::streamsize(sizeof(float) * v.size()));
  BRISK_CHECK(out.good(), flag, ": write to ", path, " failed");
}

int cmd_transcribe(const std::vector<std::string>& argv) {
  Args a;
  if (!parse(argv, &a)) return 0;
  brisk::TranscriptFormat format;
  if (!brisk::transcript_format_from_name(a.format, &format))
    brisk::cli::usage_fail("--format '", a.format, "': use text, json, verbose_json, srt or vtt");
  const auto kv = brisk::kv_cache_type_from_name(a.kv_type);
  if (!kv || *kv == brisk::QuantType::Q8_0) brisk::cli::usage_fail("--kv-type '", a.kv_type, "': use f16, bf16 or f32");
  if (!a.dump_logits.empty() && a.prompt_ids.empty()) brisk::cli::usage_fail("--dump-logits needs --prompt-ids");
  const std::string path = brisk::cli::resolve_model(a.model, a.token);
  const auto t0 = std::chrono::steady_clock::now();
  auto model = brisk::cli::load_model({.path = path, .quant = a.quant, .n_threads = a.threads});
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
