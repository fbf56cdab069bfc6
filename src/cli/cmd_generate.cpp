// `brisk generate`: load a model (GGUF file or HF folder), run a prompt and stream the
// generated text; timing on stderr.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "cli/command.h"
#include "cli/sampling_flags.h"
#include "core/error.h"
#include "hub/resolve.h"
#include "runtime/engine_api.h"
#include "runtime/kv_cache.h"
#include "runtime/generate.h"
#include "text/jinja/template.h"

namespace {

using brisk::fail;

struct Args {
  std::string model, prompt, prompt_ids, dump_logits, quant, kv_type = "f16", token, device = "auto";
  bool have_prompt = false, show_ids = false, raw = false;
  int32_t n_predict = 128, n_ctx = 4096, threads = 0, n_batch = 512;
  brisk::SamplerParams sampling;
  std::vector<std::string> stops;
};

int32_t parse_int(const std::string& flag, const std::string& v) { return brisk::cli::parse_int_flag(flag, v); }

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::string item;
  std::stringstream ss(s);
  while (std::getline(ss, item, ',')) {
    while (!item.empty() && item.front() == ' ') item.erase(0, 1);
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) ids.push_back(parse_int("--prompt-ids", item));
  }
  BRISK_CHECK(!ids.empty(), "--prompt-ids: no ids in '", s, "'");
  return ids;
}

void usage() {
  std::fprintf(stderr,
               "usage: brisk generate --model PATH|org/name[:QUANT] (--prompt TEXT | --prompt-ids 1,2,3) [-n N]\n"
               "%s"
               "  [--stop STR]... [--show-ids] [--dump-logits FILE] [--raw] [--quant q8_0|q4_0|q4_k]\n"
               "  [--ctx N] [--batch N] [-t N] [--kv-type f16|bf16|f32|q8_0] [--token HF_TOKEN]\n"
               "  [--device auto|cpu|cuda|cuda:N] (default auto: the GPU when one is usable)\n",
               brisk::cli::kSamplingFlagsUsage);
}

Args parse(const std::vector<std::string>& argv) {
  Args a;
  a.sampling.temperature = 0.0f;  // greedy unless asked
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& f = argv[i];
    auto value = [&]() -> const std::string& {
      BRISK_CHECK(i + 1 < argv.size(), f, " needs a value");
      return argv[++i];
    };
    if (brisk::cli::parse_sampling_flag(argv, i, a.sampling)) continue;
    if (f == "--model" || f == "-m") a.model = value();
    else if (f == "--prompt" || f == "-p") { a.prompt = value(); a.have_prompt = true; }
    else if (f == "--prompt-ids") a.prompt_ids = value();
    else if (f == "-n" || f == "--n-predict") a.n_predict = parse_int(f, value());
    else if (f == "--stop") a.stops.push_back(value());
    else if (f == "--show-ids") a.show_ids = true;
    else if (f == "--dump-logits") a.dump_logits = value();
    else if (f == "--raw") a.raw = true;
    else if (f == "--quant") a.quant = value();
    else if (f == "--ctx" || f == "-c") a.n_ctx = parse_int(f, value());
    else if (f == "--batch" || f == "-b") a.n_batch = parse_int(f, value());
    else if (f == "-t" || f == "--threads") a.threads = parse_int(f, value());
    else if (f == "--kv-type") a.kv_type = value();
    else if (f == "--token") a.token = value();
    else if (f == "--device") a.device = value();
    else if (f == "-h" || f == "--help") { usage(); std::exit(0); }
    else fail("generate: unknown argument '", f, "' (see brisk generate --help)");
  }
  BRISK_CHECK(!a.model.empty(), "generate: --model is required");
  BRISK_CHECK(a.have_prompt != !a.prompt_ids.empty(), "generate: give exactly one of --prompt and --prompt-ids");
  BRISK_CHECK(a.n_predict >= 0, "-n must not be negative");
  BRISK_CHECK(a.n_ctx > 0 && a.n_batch > 0, "--ctx and --batch must be positive");
  return a;
}

brisk::QuantType parse_kv_type(const std::string& s) {
  const auto t = brisk::kv_cache_type_from_name(s);
  BRISK_CHECK(t.has_value(), "--kv-type '", s, "': use f16, bf16, f32 or q8_0");
  return *t;
}

int cmd_generate(const std::vector<std::string>& argv) {
  const Args a = parse(argv);
  // A local path is used as is; a Hub reference (org/name[:QUANT]) resolves to the cache.
  brisk::HubOptions hub;
  hub.token = a.token;
  const std::string path = brisk::hub_resolve_model(a.model, hub);
  auto model = brisk::Model::load({.path = path, .quant = a.quant, .n_threads = a.threads});
  const brisk::Tokenizer* tok = model->tokenizer();
  std::vector<int32_t> prompt;
  if (a.have_prompt) {
    BRISK_CHECK(tok != nullptr, a.model, " has no tokenizer files: use --prompt-ids");
    if (!a.raw && !model->chat_template().empty()) {
      // One user turn in the model's chat template, rendered as transformers does
      // (trim_blocks, lstrip_blocks); the template supplies BOS and the special tokens.
      const auto tmpl = brisk::jinja::Template::parse(
          model->chat_template(), {.trim_blocks = true, .lstrip_blocks = true, .name = "chat_template"});
      nlohmann::ordered_json globals = {
          {"messages", {{{"role", "user"}, {"content", a.prompt}}}},
          {"add_generation_prompt", true},
          {"bos_token", model->bos_text()},
          {"eos_token", model->eos_text()},
      };
      prompt = tok->encode(tmpl.render(globals), {.add_special = false, .parse_special = true});
    } else {
      prompt = tok->encode(a.prompt, {.add_special = true, .parse_special = true});
    }
    BRISK_CHECK(!prompt.empty(), "the prompt encodes to no tokens");
  } else {
    prompt = parse_ids(a.prompt_ids);
  }
  auto ctx = brisk::Context::create(model, {.n_ctx = a.n_ctx, .n_seq_max = 1, .n_batch = a.n_batch,
                                            .kv_type = parse_kv_type(a.kv_type), .n_threads = a.threads,
                                            .device = a.device});
  brisk::GenerateParams gp{.max_tokens = a.n_predict, .sampling = a.sampling, .stop_strings = a.stops};
  brisk::GenerateCallbacks cb;
  cb.on_text = [](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return true;
  };
  if (!a.dump_logits.empty()) {
    cb.on_prompt_logits = [&](const float* logits, int32_t n) {
      std::ofstream out(a.dump_logits, std::ios::binary);
      BRISK_CHECK(out.good(), "--dump-logits: cannot write ", a.dump_logits);
      out.write(reinterpret_cast<const char*>(logits), std::streamsize(sizeof(float) * size_t(n)));
      BRISK_CHECK(out.good(), "--dump-logits: write to ", a.dump_logits, " failed");
    };
  }
  const brisk::GenerateResult r = brisk::generate(*ctx, tok, prompt, gp, cb);
  if (!r.text.empty() && r.text.back() != '\n') std::printf("\n");
  if (a.show_ids || !tok) {
    std::printf("ids:");
    for (int32_t id : r.tokens) std::printf(" %d", id);
    std::printf("\n");
  }
  std::fflush(stdout);
  const brisk::ModelInfo& info = model->info();
  const double decode_tps = r.decode_seconds > 0 ? r.n_decoded / r.decode_seconds : 0.0;
  std::fprintf(stderr,
               "prompt: %d tokens in %.3f s (%.2f tok/s); decode: %d tokens in %.3f s (%.2f tok/s, "
               "%.2f GB/s of weights at %.1f MB/token); threads %d; stop: %s\n",
               r.n_prompt, r.prompt_seconds, r.prompt_seconds > 0 ? r.n_prompt / r.prompt_seconds : 0.0,
               r.n_decoded, r.decode_seconds, decode_tps, decode_tps * double(info.weight_bytes) / 1e9,
               double(info.weight_bytes) / 1e6, ctx->options().n_threads, brisk::stop_reason_name(r.stop));
  return 0;
}

}  // namespace

BRISK_COMMAND("generate", "generate text from a prompt with a GGUF or Hugging Face model", cmd_generate);
