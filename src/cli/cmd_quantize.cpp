// `brisk quantize IN OUT TYPE [-t N]`: rewrites a GGUF (or converts a Hugging Face folder) with the tensor types of one of
// llama.cpp's recipes (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, F16,
// BF16), keeping all metadata and the tokenizer. Prints the type counts and sizes.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/command.h"
#include "core/error.h"
#include "quantize/quantize_gguf.h"

namespace {

using brisk::fail;

int cmd_quantize(const std::vector<std::string>& argv) {
  std::vector<std::string> pos;
  int32_t threads = 0;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "-t" || a == "--threads") {
      BRISK_CHECK(i + 1 < argv.size(), "quantize: ", a, " needs a value");
      try {
        threads = std::stoi(argv[++i]);
      } catch (const std::exception&) {
        fail("quantize: ", a, ": '", argv[i], "' is not an integer");
      }
      BRISK_CHECK(threads >= 0 && threads <= 1024, "quantize: ", a, " out of range");
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: brisk quantize IN(.gguf|HF folder) OUT.gguf TYPE [-t N]\nTYPE: %s\n",
                  brisk::quant_recipe_names().c_str());
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      fail("quantize: unknown option '", a, "'");
    } else {
      pos.push_back(a);
    }
  }
  BRISK_CHECK(pos.size() == 3, "usage: brisk quantize IN(.gguf|HF folder) OUT.gguf TYPE [-t N]");
  const auto recipe = brisk::quant_recipe_from_name(pos[2]);
  BRISK_CHECK(recipe.has_value(), "quantize: unknown TYPE '", pos[2], "' (known: ", brisk::quant_recipe_names(), ")");
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = brisk::quantize_gguf({.in = pos[0], .out = pos[1], .recipe = *recipe, .n_threads = threads});
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string counts;
  for (const auto& [name, n] : r.type_counts) counts += " " + name + ":" + std::to_string(n);
  std::printf("%s -> %s (%s): tensors%s; %.2f MiB -> %.2f MiB; %d fallback; %.1f s\n", pos[0].c_str(),
              pos[1].c_str(), recipe->name.c_str(), counts.c_str(), double(r.bytes_in) / 1048576.0,
              double(r.bytes_out) / 1048576.0, r.n_fallback, s);
  return 0;
}

}  // namespace

BRISK_COMMAND("quantize", "rewrite a GGUF with a quantization recipe (IN OUT TYPE: Q8_0, Q4_K_M, ...)", cmd_quantize);
