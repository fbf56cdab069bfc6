// `brisk template`: renders a chat template with a conversation, byte-exact, to stdout.
//   brisk template (--template FILE | --model GGUF_OR_HF_DIR) --input CONV.json [--variant NAME]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include "cli/command.h"
#include "core/error.h"
#include "text/chat_template.h"

namespace {

const char* kUsage =
    "usage: brisk template (--template FILE | --model GGUF_OR_HF_DIR) --input CONV.json "
    "[--variant NAME]\n"
    "  CONV.json: {\"messages\": [...], \"tools\": [...], \"add_generation_prompt\": true,\n"
    "              \"bos_token\": \"...\", \"eos_token\": \"...\", \"kwargs\": {...}}\n"
    "  --variant NAME  a named template of the model (default: transformers' choice)\n"
    "  --list          list the model's template variants\n"
    "  --repeat N      render N times and report the mean render time on stderr\n";

int cmd_template(const std::vector<std::string>& args) {
  std::string template_path, model_path, input_path, variant;
  bool list = false;
  long repeat = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      BRISK_CHECK(i + 1 < args.size(), a, " needs a value");
      return args[++i];
    };
    if (a == "--template") template_path = value();
    else if (a == "--model") model_path = value();
    else if (a == "--input") input_path = value();
    else if (a == "--variant") variant = value();
    else if (a == "--list") list = true;
    else if (a == "--repeat") {
      const std::string& v = value();
      char* end = nullptr;
      repeat = std::strtol(v.c_str(), &end, 10);
      BRISK_CHECK(end && *end == '\0' && repeat > 0 && repeat <= 10000000, "--repeat needs a positive count, got ", v);
    }
    else if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      std::fprintf(stderr, "brisk template: unknown argument '%s'\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if (template_path.empty() == model_path.empty()) {
    std::fprintf(stderr, "brisk template: give exactly one of --template and --model\n%s", kUsage);
    return 2;
  }
  brisk::ChatTemplate tmpl = template_path.empty() ? brisk::ChatTemplate::from_model(model_path)
                                                   : brisk::ChatTemplate::from_file(template_path);
  if (list) {
    for (const auto& name : tmpl.variant_names()) std::printf("%s\n", name.c_str());
    return 0;
  }
  if (input_path.empty()) {
    std::fprintf(stderr, "brisk template: --input is required\n%s", kUsage);
    return 2;
  }
  std::ifstream f(input_path, std::ios::binary);
  BRISK_CHECK(f, "cannot open ", input_path);
  std::ostringstream ss;
  ss << f.rdbuf();
  nlohmann::ordered_json conv = nlohmann::ordered_json::parse(ss.str(), nullptr, false);
  BRISK_CHECK(!conv.is_discarded(), input_path, ": invalid JSON");
  brisk::ChatRenderInput input = brisk::chat_render_input_from_json(conv, input_path);
  if (!variant.empty()) input.variant = variant;
  std::string out = tmpl.render(input);  // also parses and caches the template
  if (repeat > 0) {
    auto t0 = std::chrono::steady_clock::now();
    std::clock_t c0 = std::clock();
    for (long i = 0; i < repeat; ++i) out = tmpl.render(input);
    double cpu_us = 1e6 * double(std::clock() - c0) / CLOCKS_PER_SEC;
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "render: %.1f us wall, %.1f us CPU, mean over %ld runs (%zu bytes, %zu messages)\n",
                 us / double(repeat), cpu_us / double(repeat), repeat, out.size(), input.messages.size());
  }
  if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0)
    brisk::fail("cannot write the rendered text to stdout");
  return 0;
}

}  // namespace

BRISK_COMMAND("template", "render a chat template with a conversation (byte-exact)", cmd_template);
