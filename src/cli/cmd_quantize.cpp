// `brisk quantize IN OUT TYPE`: rewrites a GGUF (or converts a Hugging Face folder) with the
// tensor types of one of llama.cpp's recipes (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K_S, Q4_K_M,
// Q5_K_S, Q5_K_M, Q6_K, F16, BF16, F32), keeping all metadata, the tokenizer and the chat
// template. A progress line on a terminal; the type counts and sizes at the end.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/model_arg.h"
#include "core/error.h"
#include "quantize/quantize_gguf.h"

namespace {

int cmd_quantize(const std::vector<std::string>& argv) {
  std::string in, out, type;
  int32_t threads = 0;
  bool allow_requantize = false;
  brisk::cli::ArgParser p("quantize", "IN OUT TYPE [options]",
                          "Writes OUT.gguf: the model IN with the tensor types of the recipe TYPE.");
  p.model(&in, "the input: a GGUF file, a Hugging Face folder (or one of its safetensors files) or a Hub reference");
  p.positional("OUT", &out, "the GGUF file to write (never the input)", /*required=*/true);
  p.positional("TYPE", &type, "the recipe", /*required=*/true);
  p.flag({"--allow-requantize"}, &allow_requantize, "accept an input that is already quantized");
  brisk::cli::add_threads_option(p, &threads);
  p.note("TYPE: " + brisk::quant_recipe_names());
  if (!p.parse(argv)) return 0;
  const auto recipe = brisk::quant_recipe_from_name(type);
  if (!recipe) brisk::cli::usage_fail("unknown TYPE '", type, "' (known: ", brisk::quant_recipe_names(), ")");
  const std::string path = brisk::cli::resolve_model(in);

  const bool progress = brisk::cli::on_terminal();
  const auto t0 = std::chrono::steady_clock::now();
  brisk::QuantizeParams params{.in = path, .out = out, .recipe = *recipe, .n_threads = threads,
                               .allow_requantize = allow_requantize};
  if (progress) {
    params.on_progress = [](const brisk::QuantizeProgress& q) {
      if (q.converting) std::fprintf(stderr, "\r\x1b[Kconverting %s to float32 ...", q.name.c_str());
      else std::fprintf(stderr, "\r\x1b[Kquantizing [%zu/%zu] %s", q.done + 1, q.total, q.name.c_str());
      std::fflush(stderr);
    };
  }
  brisk::QuantizeReport r;
  try {
    r = brisk::quantize_gguf(params);
  } catch (...) {
    if (progress) std::fputs("\r\x1b[K", stderr);
    throw;
  }
  if (progress) std::fputs("\r\x1b[K", stderr);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (r.n_requantized > 0)
    std::fprintf(stderr, "brisk quantize: requantized %d tensors that were already quantized (--allow-requantize)\n",
                 r.n_requantized);
  std::string counts;
  for (const auto& [name, n] : r.type_counts) counts += " " + name + ":" + std::to_string(n);
  std::printf("%s -> %s (%s): tensors%s; %.2f MiB -> %.2f MiB; %d fallback; %.1f s\n", in.c_str(), out.c_str(),
              recipe->name.c_str(), counts.c_str(), double(r.bytes_in) / 1048576.0, double(r.bytes_out) / 1048576.0,
              r.n_fallback, s);
  return 0;
}

}  // namespace

BRISK_COMMAND("quantize", "rewrite a model with a quantization recipe (IN OUT TYPE: Q8_0, Q4_K_M, ...)", cmd_quantize);
