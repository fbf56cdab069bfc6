// `brisk template`: renders a chat template with a conversation, byte-exact, to stdout.
//   brisk template (MODEL | --template FILE) --input CONV.json [--variant NAME]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/model_arg.h"
#include "core/error.h"
#include "text/chat_template.h"

namespace {

int cmd_template(const std::vector<std::string>& args) {
  std::string template_path, model_path, input_path, variant;
  bool list = false;
  int32_t repeat = 0;
  brisk::cli::ArgParser p("template", "(MODEL | --template FILE) --input CONV.json [options]",
                          "Renders a chat template with a conversation, byte-exact, to stdout.");
  p.model(&model_path, "a GGUF file, a Hugging Face folder or a Hub reference (its chat template)",
          /*required=*/false);
  p.text({"--template"}, &template_path, "FILE", "a template file instead of a model's");
  p.text({"--input"}, &input_path, "CONV.json", "the conversation (required unless --list)");
  p.text({"--variant"}, &variant, "NAME", "a named template of the model (default: transformers' choice)");
  p.flag({"--list"}, &list, "list the model's template variants");
  p.integer({"--repeat"}, &repeat, 1, 10000000, "N", "render N times and report the mean render time on stderr");
  p.note("CONV.json: {\"messages\": [...], \"tools\": [...], \"add_generation_prompt\": true,\n"
         "            \"bos_token\": \"...\", \"eos_token\": \"...\", \"kwargs\": {...}}");
  if (!p.parse(args)) return 0;
  if (template_path.empty() == model_path.empty())
    brisk::cli::usage_fail("give exactly one of MODEL (-m) and --template");
  if (!list && input_path.empty()) brisk::cli::usage_fail("--input is required");
  if (!model_path.empty()) model_path = brisk::cli::resolve_model(model_path);
  brisk::ChatTemplate tmpl = template_path.empty() ? brisk::cli::model_chat_template(model_path)
                                                   : brisk::ChatTemplate::from_file(template_path);
  if (list) {
    for (const auto& name : tmpl.variant_names()) std::printf("%s\n", name.c_str());
    return 0;
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
    for (int32_t i = 0; i < repeat; ++i) out = tmpl.render(input);
    double cpu_us = 1e6 * double(std::clock() - c0) / CLOCKS_PER_SEC;
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "render: %.1f us wall, %.1f us CPU, mean over %d runs (%zu bytes, %zu messages)\n",
                 us / double(repeat), cpu_us / double(repeat), repeat, out.size(), input.messages.size());
  }
  if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0)
    brisk::fail("cannot write the rendered text to stdout");
  return 0;
}

}  // namespace

BRISK_COMMAND("template", "render a chat template with a conversation (byte-exact)", cmd_template);
