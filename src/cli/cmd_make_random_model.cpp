// `brisk make-random-model`: writes a random-weight GGUF of a known model shape for speed
// measurements, with the tensor types of a quantization recipe and optionally a real tokenizer:
//   brisk make-random-model --shape qwen2.5-0.5b --type q4_k_m --tokenizer DIR --out F.gguf
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/command.h"
#include "core/error.h"
#include "models/random_model.h"
#include "quant/recipe.h"

namespace {

using brisk::fail;

int cmd_make_random_model(const std::vector<std::string>& argv) {
  std::string shape = "tiny", out, type = "f32", arch, tokenizer, pre;
  uint64_t seed = 1;
  int32_t threads = 0;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& f = argv[i];
    BRISK_CHECK(i + 1 < argv.size(), "make-random-model: ", f, " needs a value");
    const std::string& v = argv[++i];
    try {
      if (f == "--shape") shape = v;
      else if (f == "--out") out = v;
      else if (f == "--type") type = v;
      else if (f == "--arch") arch = v;
      else if (f == "--tokenizer") tokenizer = v;
      else if (f == "--tokenizer-pre") pre = v;
      else if (f == "--seed") seed = uint64_t(std::stoull(v));
      else if (f == "-t" || f == "--threads") threads = std::stoi(v);
      else fail("make-random-model: unknown argument '", f, "'");
    } catch (const std::logic_error&) {
      fail("make-random-model: ", f, ": bad value '", v, "'");
    }
  }
  BRISK_CHECK(!out.empty(), "make-random-model: --out FILE is required");
  BRISK_CHECK(threads >= 0 && threads <= 1024, "make-random-model: --threads out of range");
  brisk::RandomModelParams p = brisk::random_model_preset(shape);
  if (brisk::quant_recipe_from_name(type)) {
    p.recipe = type;  // per-tensor mixture as llama.cpp's recipe of that name
  } else {
    const auto t = brisk::quant_type_from_name(type);
    BRISK_CHECK(t.has_value(), "make-random-model: unknown --type '", type, "' (recipes: ",
                brisk::quant_recipe_names(), "; or any stored type name)");
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

BRISK_COMMAND("make-random-model",
              "write a random-weight GGUF of a model shape (--shape qwen2.5-0.5b|llama-3.2-1b|qwen3-0.6b|... "
              "--type q8_0|q4_0|q4_k_m --tokenizer DIR --out F)",
              cmd_make_random_model);
