// `brisk transcribe-bench`: speech-to-text speed at a real Whisper shape (a random-weight model of
// models/random_model.h's table, built in memory) at fixed decoding work: per 30 s window, one
// encoder pass and a fixed number of decoder tokens (a 4-token prompt, then one greedy token a
// step, never stopping early), for one stream or S concurrent streams (their windows encoded
// in one pass of S windows, their tokens decoded in one batch a step). Prints the encoder time
// per pass and its FLOP rate next to the same run's GEMM rate (one encoder MLP matmul,
// [n_pos x d] . [n_ff x d]^T, through the same backend and weight type), the decoder time per
// step, and the real-time factor: seconds of audio transcribed per second.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "cli/args.h"
#include "cli/command.h"
#include "core/error.h"
#include "models/random_model.h"
#include "quant/format.h"
#include "runtime/engine_api.h"
#include "runtime/engine_parts.h"
#include "runtime/kv_cache.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string whisper_shapes() {
  std::string s;
  for (const std::string& n : brisk::random_model_shapes())
    if (n.rfind("whisper-", 0) == 0) s += (s.empty() ? "" : " | ") + n;
  return s;
}

// Multiply-adds x 2 of one encoder pass over one window (convolutions, every layer's
// projections, MLP and attention products, the decoder layers' cross-attention K / V).
double encoder_flops(const brisk::RandomModelParams& p) {
  const double d = p.n_embd, n = p.n_enc_ctx, frames = 2.0 * p.n_enc_ctx;
  double f = 2.0 * frames * (3.0 * p.n_mels) * d + 2.0 * n * (3.0 * d) * d;
  f += p.n_enc_layer * (2.0 * n * (4.0 * d * d + 2.0 * d * p.n_enc_ff) + 4.0 * n * n * d);
  f += p.n_layer * 2.0 * n * 2.0 * d * d;
  return f;
}

// FLOP/s of the backend's matmul of [m x k] activations by an [n x k] weight of `type` (best of 5).
double gemm_rate(brisk::Backend& be, brisk::QuantType type, int64_t m, int64_t n, int64_t k) {
  const auto rb = brisk::quant_row_bytes(type, uint64_t(k));
  BRISK_CHECK(rb.has_value(), "transcribe-bench: rows of ", k, " do not fit ", brisk::quant_type_info(type).name);
  std::vector<float> row(static_cast<size_t>(k));
  std::vector<uint8_t> w(size_t(*rb) * size_t(n));
  const auto quantize = brisk::format_traits(type).quantize_row_ref;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < k; ++i) row[size_t(i)] = float((r * 7 + i * 13) % 17) / 17.0f - 0.5f;
    quantize(row.data(), w.data() + size_t(r) * size_t(*rb), k);
  }
  auto* x = static_cast<float*>(be.alloc(sizeof(float) * size_t(m * k)));
  auto* out = static_cast<float*>(be.alloc(sizeof(float) * size_t(m * n)));
  const brisk::MatmulArgs a{.out = {.data = out, .rows = m, .cols = n},
                            .x = {.data = x, .rows = m, .cols = k},
                            .w = {.type = type, .n_in = k, .n_out = n, .row_bytes = size_t(*rb), .data = w.data()}};
  be.matmul(a);  // uploads, warms up
  be.synchronize();
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    be.matmul(a);
    be.synchronize();
    best = std::min(best, seconds_since(t0));
  }
  be.free(x);
  be.free(out);
  return 2.0 * double(m) * double(n) * double(k) / best;
}

int cmd_transcribe_bench(const std::vector<std::string>& argv) {
  std::string shape = "whisper-base", type_name = "f16", device = "cpu", kv = "f16";
  int32_t threads = 0, tokens = 64, windows = 3, streams = 1;
  brisk::cli::ArgParser args("transcribe-bench", "[options]",
                             "Speech-to-text speed on a random-weight Whisper model of a real shape at fixed decoding "
                             "work per 30 s window: encoder time per pass and its FLOP rate next to the same run's "
                             "GEMM rate, decoder time per step, real-time factor.");
  args.text({"--shape"}, &shape, "NAME", whisper_shapes() + " (default whisper-base)");
  args.text({"--type"}, &type_name, "T", "weight type: f16 | bf16 | q8_0 | f32 | ... (default f16)");
  args.text({"--device"}, &device, "D", "cpu | cuda | cuda:N (default cpu)");
  args.integer({"-t", "--threads"}, &threads, 0, 1024, "N", "CPU threads (default: all cores)");
  args.integer({"-n", "--tokens"}, &tokens, 1, 440, "N", "decoder tokens per window, prompt included (default 64)");
  args.integer({"--windows"}, &windows, 1, 1000, "N", "timed windows per stream (default 3)");
  args.integer({"--streams"}, &streams, 1, 64, "S", "concurrent streams (default 1)");
  args.text({"--kv-type"}, &kv, "T", "f16 | bf16 | f32 | q8_0 (default f16)");
  if (!args.parse(argv)) return 0;
  if (shape.rfind("whisper-", 0) != 0) brisk::cli::usage_fail("--shape: one of ", whisper_shapes());
  const auto type = brisk::quant_type_from_name(type_name);
  if (!type) brisk::cli::usage_fail("unknown --type '", type_name, "'");
  const auto kv_type = brisk::kv_cache_type_from_name(kv);
  if (!kv_type) brisk::cli::usage_fail("unknown --kv-type '", kv, "'");

  brisk::RandomModelParams p = brisk::random_model_preset(shape);
  p.type = *type;
  p.distinct_rows = 64;  // the values do not matter here, the bytes and shapes do
  const auto t_build = Clock::now();
  auto model = brisk::model_load_gguf_bytes(brisk::random_model_gguf(p));
  constexpr int32_t kPrompt = 4;  // <|startoftranscript|> <|lang|> <|task|> <|notimestamps|>
  const int32_t n_prompt = std::min(kPrompt, tokens);
  auto ctx = brisk::Context::create(model, {.n_ctx = tokens + 1, .n_seq_max = streams,
                                            .n_batch = std::max(streams, n_prompt * streams), .kv_type = *kv_type,
                                            .n_threads = threads, .device = device, .kv_block_size = 16,
                                            .encoder_windows = streams});
  const bool device_greedy = ctx->set_device_greedy(true);
  const brisk::EncoderShape es = ctx->encoder_shape();
  std::vector<std::vector<float>> features(static_cast<size_t>(streams));
  for (int32_t s = 0; s < streams; ++s) {
    features[size_t(s)].resize(size_t(es.n_frames) * size_t(es.n_features));
    for (size_t i = 0; i < features[size_t(s)].size(); ++i)
      features[size_t(s)][i] = float(int64_t((i * 2654435761u + size_t(s) * 97) % 2001) - 1000) / 1000.0f;
  }
  std::printf("transcribe-bench %s %s on %s: model built in %.1f s\n", shape.c_str(), type_name.c_str(),
              ctx->options().device.c_str(), seconds_since(t_build));

  // One window of every stream: encode, the prompt, then greedy steps up to `tokens`.
  double enc_s = 0.0, dec_s = 0.0;
  int64_t dec_steps = 0;
  auto window = [&](bool timed) {
    std::vector<brisk::EncoderInput> in;
    for (int32_t s = 0; s < streams; ++s) {
      ctx->seq_truncate(s, 0);
      in.push_back({.seq = s, .features = features[size_t(s)].data()});
    }
    auto t0 = Clock::now();
    ctx->encode(in);
    if (timed) enc_s += seconds_since(t0);
    t0 = Clock::now();
    std::vector<brisk::BatchToken> batch;
    for (int32_t s = 0; s < streams; ++s)
      for (int32_t i = 0; i < n_prompt; ++i)
        batch.push_back({.token = (i * 131 + s) % p.n_vocab, .pos = i, .seq = s, .want_logits = i + 1 == n_prompt});
    std::vector<int32_t> next(static_cast<size_t>(streams));
    for (int32_t pos = n_prompt; ; ++pos) {
      ctx->decode(batch);
      for (int32_t s = 0; s < streams; ++s) {
        if (device_greedy) {
          next[size_t(s)] = std::max(0, ctx->device_ids()[s]);
        } else {
          const float* l = ctx->logits(s);
          next[size_t(s)] = int32_t(std::max_element(l, l + ctx->n_vocab()) - l);
        }
      }
      if (timed) ++dec_steps;
      if (pos >= tokens) break;
      batch.clear();
      for (int32_t s = 0; s < streams; ++s)
        batch.push_back({.token = next[size_t(s)], .pos = pos, .seq = s, .want_logits = true});
    }
    if (timed) dec_s += seconds_since(t0);
  };
  window(false);  // uploads weights, captures graphs
  const auto t_all = Clock::now();
  for (int32_t w = 0; w < windows; ++w) window(true);
  const double total = seconds_since(t_all);

  auto be = brisk::make_backend(device, threads);
  const double gemm = gemm_rate(*be, *type, p.n_enc_ctx, p.n_enc_ff, p.n_embd);
  const double enc_pass_ms = 1e3 * enc_s / windows;
  const double enc_rate = encoder_flops(p) * streams / (enc_s / windows);
  const double audio_s = 30.0 * double(windows) * double(streams);
  double load[1] = {0.0};
  const bool have_load = getloadavg(load, 1) == 1;
  std::printf("transcribe-bench %s %s (%d encoder + %d decoder layers, d %d) on %s, %d stream%s, %d tokens per window, "
              "%d window%s:\n",
              shape.c_str(), type_name.c_str(), p.n_enc_layer, p.n_layer, p.n_embd, ctx->options().device.c_str(),
              streams, streams > 1 ? "s" : "", tokens, windows, windows > 1 ? "s" : "");
  std::printf("  encoder: %.1f ms per pass of %d window%s (%.1f ms per window), %.3g TFLOP/s = %.0f%% of the same "
              "run's GEMM rate %.3g TFLOP/s ([%d x %d] . [%d x %d]^T)\n",
              enc_pass_ms, streams, streams > 1 ? "s" : "", enc_pass_ms / streams, enc_rate / 1e12,
              100.0 * enc_rate / gemm, gemm / 1e12, p.n_enc_ctx, p.n_embd, p.n_enc_ff, p.n_embd);
  std::printf("  decoder: %.2f ms per step of %d token%s (%lld steps per window, %.2f ms per token of a stream)\n",
              1e3 * dec_s / double(dec_steps), streams, streams > 1 ? "s" : "",
              static_cast<long long>(dec_steps / windows), 1e3 * dec_s / double(dec_steps));
  std::printf("  real-time factor: %.1fx (%.0f s of audio in %.2f s)%s\n", audio_s / total, audio_s, total,
              have_load ? (", load average " + std::to_string(load[0]).substr(0, 4)).c_str() : "");
  std::fflush(stdout);
  return 0;
}

}  // namespace

BRISK_COMMAND("transcribe-bench", "speech-to-text speed at a real Whisper shape (random weights): encoder, decoder, "
                                  "real-time factor", cmd_transcribe_bench);
