// `brisk generate`: load a model (GGUF file, Hugging Face folder or Hub reference), run a
// prompt (through the chat template unless --raw) or token ids, and stream the generated text;
// timing on stderr.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/model_arg.h"
#include "cli/spec_args.h"
#include "core/error.h"
#include "runtime/engine_api.h"
#include "runtime/generate.h"
#include "runtime/kv_cache.h"

namespace {

using brisk::cli::ArgParser;

struct Args {
  std::string model, prompt, prompt_ids, dump_logits, quant, kv_type = "f16", token, device = "auto";
  bool have_prompt = false, show_ids = false, raw = false, verbose = false;
  brisk::cli::SpecArgs spec;
  int32_t n_predict = 128, n_ctx = 0, threads = 0, n_batch = 512, tp = 0;
  brisk::SamplerParams sampling;
  std::vector<std::string> stops;
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

int cmd_generate(const std::vector<std::string>& argv) {
  Args a;
  a.sampling.temperature = 0.0f;  // greedy unless asked
  ArgParser p("generate", "MODEL (-p TEXT | --prompt-ids 1,2,3) [options]",
              "Runs one prompt through the model's chat template (unless --raw) and streams the answer.");
  p.model(&a.model, "GGUF file, Hugging Face folder or Hub reference (org/name[:QUANT])");
  p.option({"-p", "--prompt"}, "TEXT", "the prompt", [&](const std::string& v) {
    a.prompt = v;
    a.have_prompt = true;
  });
  p.text({"--prompt-ids"}, &a.prompt_ids, "IDS", "the prompt as token ids, comma-separated");
  p.integer({"-n", "--n-predict"}, &a.n_predict, 0, INT32_MAX, "N", "tokens to generate (default 128)");
  p.texts({"--stop"}, &a.stops, "STR", "stop at this text (repeatable)");
  p.flag({"--raw"}, &a.raw, "the prompt as is, without the chat template");
  p.flag({"--show-ids"}, &a.show_ids, "print the generated ids after the text");
  p.text({"--dump-logits"}, &a.dump_logits, "FILE", "write the last prompt position's logits (float32)");
  p.text({"--quant"}, &a.quant, "Q", "quantize safetensors weights at load: q8_0 | q4_0 | q4_k");
  brisk::cli::add_ctx_option(p, &a.n_ctx, "4096");
  p.integer({"-b", "--batch"}, &a.n_batch, 1, 1 << 16, "N", "tokens per forward in the prompt (default 512)");
  p.text({"--kv-type"}, &a.kv_type, "T", "KV cache type: f16 | bf16 | f32 | q8_0 (default f16)");
  brisk::cli::add_threads_option(p, &a.threads);
  brisk::cli::add_device_option(p, &a.device, "auto: the GPU when one is usable");
  brisk::cli::add_tp_option(p, &a.tp);
  p.text({"--token"}, &a.token, "TOKEN", "Hugging Face token for gated models (default $HF_TOKEN)");
  p.flag({"-v", "--verbose"}, &a.verbose, "also print the speculative-decoding statistics");
  brisk::cli::add_sampling_options(p, &a.sampling);
  brisk::cli::add_spec_options(p, &a.spec);
  p.note("Sampling is greedy unless --temp is given.");
  if (!p.parse(argv)) return 0;
  if (a.have_prompt == !a.prompt_ids.empty()) brisk::cli::usage_fail("give exactly one of --prompt and --prompt-ids");
  const auto kv_type = brisk::kv_cache_type_from_name(a.kv_type);
  if (!kv_type) brisk::cli::usage_fail("--kv-type '", a.kv_type, "': use f16, bf16, f32 or q8_0");
  const std::vector<int32_t> ids = a.have_prompt ? std::vector<int32_t>{} : parse_ids(a.prompt_ids);

  const std::string path = brisk::cli::resolve_model(a.model, a.token);
  // The chat template is checked before the weights load.
  const std::optional<brisk::ChatTemplate> tmpl =
      a.have_prompt && !a.raw ? brisk::cli::checked_chat_template(path, "") : std::nullopt;
  auto model = brisk::cli::load_model({.path = path, .quant = a.quant, .n_threads = a.threads});
  const brisk::Tokenizer* tok = model->tokenizer();
  std::vector<int32_t> prompt = ids;
  if (a.have_prompt) {
    BRISK_CHECK(tok != nullptr, a.model, " has no tokenizer files: use --prompt-ids");
    if (tmpl) {
      // One user turn in the model's chat template, rendered as transformers does; the
      // template supplies BOS and the special tokens.
      brisk::ChatRenderInput in;
      in.messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", a.prompt}}});
      in.add_generation_prompt = true;
      in.bos_token = model->bos_text();
      in.eos_token = model->eos_text();
      prompt = tok->encode(tmpl->render(in), {.add_special = false, .parse_special = true});
    } else {
      prompt = tok->encode(a.prompt, {.add_special = true, .parse_special = true});
    }
    BRISK_CHECK(!prompt.empty(), "the prompt encodes to no tokens");
  }
  const brisk::cli::ContextSize n_ctx =
      brisk::cli::context_size("generate", a.n_ctx, p.given("--ctx"), 4096, model->info().n_ctx_train);
  if (!n_ctx.note.empty()) std::fprintf(stderr, "%s\n", n_ctx.note.c_str());
  const bool speculate = brisk::cli::spec_requested(a.spec);
  const brisk::ContextOptions copt{.n_ctx = n_ctx.n_ctx, .n_seq_max = 1, .n_batch = a.n_batch, .kv_type = *kv_type,
                                   .n_threads = a.threads, .device = a.device, .tp = a.tp,
                                   .state_checkpoints = speculate};
  a.spec.hf_token = a.token;
  brisk::SpecOptions spec = brisk::cli::make_spec_options(a.spec, model, path, copt);
  auto ctx = brisk::Context::create(model, copt);
  brisk::GenerateParams gp{.max_tokens = a.n_predict, .sampling = a.sampling, .stop_strings = a.stops};
  gp.spec = spec;
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
               "%.2f GB/s of weights at %.1f MB/token); threads %d; ctx %d; stop: %s\n",
               r.n_prompt, r.prompt_seconds, r.prompt_seconds > 0 ? r.n_prompt / r.prompt_seconds : 0.0,
               r.n_decoded, r.decode_seconds, decode_tps, decode_tps * double(info.weight_bytes) / 1e9,
               double(info.weight_bytes) / 1e6, ctx->options().n_threads, ctx->options().n_ctx,
               brisk::stop_reason_name(r.stop));
  if (a.verbose && spec.source)
    std::fprintf(stderr, "%s\n",
                 brisk::cli::spec_summary(spec.source->name(), uint64_t(r.spec_steps), uint64_t(r.spec_drafted),
                                          uint64_t(r.spec_accepted))
                     .c_str());
  return 0;
}

}  // namespace

BRISK_COMMAND("generate", "generate text from one prompt (or token ids) and print timings", cmd_generate);
