// `brisk make-random-model`: writes a random-weight GGUF of a known model shape for speed
// measurements, with the tensor types of a quantization recipe and optionally a real tokenizer:
//   brisk make-random-model --shape qwen2.5-0.5b --type q4_k_m --tokenizer DIR --out F.gguf
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/command.h"
#include "core/error.h"
#include "models/random_model.h"
#include "quant/recipe.h"

namespace {

int cmd_make_random_model(const std::vector<std::string>& argv) {
  auto shape_names = [] {
    std::string s;
    for (const std::string& n : brisk::random_model_shapes()) s += (s.empty() ? "" : " | ") + n;
    return s;
  };
  std::string shape = "tiny", out, type = "f32", arch, tokenizer, pre;
  uint64_t seed = 1;
  int32_t threads = 0;
  brisk::cli::ArgParser args("make-random-model", "--out FILE [options]",
                             "Writes a random-weight GGUF of a model shape, for speed measurements.");
  args.text({"--out"}, &out, "FILE", "the GGUF file to write (required)");
  args.text({"--shape"}, &shape, "NAME",
            shape_names() + " (default tiny)");
  args.text({"--type"}, &type, "T", "a recipe (Q8_0, Q4_K_M, ...) or a stored type name (default f32)");
  args.text({"--arch"}, &arch, "ARCH", "override the shape's architecture: llama | qwen2 | qwen3");
  args.text({"--tokenizer"}, &tokenizer, "DIR", "a Hugging Face tokenizer folder to embed");
  args.text({"--tokenizer-pre"}, &pre, "NAME", "GGUF pre-tokenizer name (default by architecture)");
  args.option({"-s", "--seed"}, "S", "seed of the weights (default 1)", [&](const std::string& v) {
    seed = uint64_t(brisk::cli::parse_integer("--seed", v, 0, INT64_MAX));
  });
  brisk::cli::add_threads_option(args, &threads);
  if (!args.parse(argv)) return 0;
  if (out.empty()) brisk::cli::usage_fail("--out FILE is required");
  brisk::RandomModelParams p = brisk::random_model_preset(shape);
  if (brisk::quant_recipe_from_name(type)) {
    p.recipe = type;  // per-tensor mixture as llama.cpp's recipe of that name
  } else {
    const auto t = brisk::quant_type_from_name(type);
    if (!t) brisk::cli::usage_fail("unknown --type '", type, "' (recipes: ", brisk::quant_recipe_names(),
                                   "; or any stored type name)");
    p.type = *t;
  }
  p.seed = seed;
  p.tokenizer_dir = tokenizer;
  p.tokenizer_pre = pre;
  p.n_threads = threads;
  if (!arch.empty()) p.arch = arch;
  const auto t0 = std::chrono::steady_clock::now();
  brisk::random_model_write(p, out);
  std::fprintf(stderr, "wrote %s (%s, %s) in %.1f s\n", out.c_str(), shape.c_str(), type.c_str(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}

}  // namespace

BRISK_COMMAND("make-random-model", "write a random-weight GGUF of a model shape (for speed measurements)",
              cmd_make_random_model);
