// `brisk run [MODEL] [PROMPT]`: chat with a model in the terminal, or answer one prompt and
// exit (as `ollama run` does) when PROMPT is given or stdin is not a terminal (the prompt is
// then read from stdin; -i keeps the chat, one message per line). MODEL is a path or a Hub
// reference (downloaded on first use); without one, brisk::kHubDefaultModel. Each turn
// re-renders the conversation with the chat template and prefills only what the KV cache
// lacks (runtime/chat_session.h); when the conversation outgrows the context its oldest turns
// are dropped, with one line saying so. The answer streams, its reasoning dimmed (or hidden
// with --no-think), and a stats line follows on stderr.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/line_editor.h"
#include "cli/model_arg.h"
#include "cli/spec_args.h"
#include "core/error.h"
#include "core/log.h"
#include "hub/resolve.h"
#include "runtime/chat_session.h"
#include "runtime/engine_api.h"
#include "text/chat_output.h"
#include "text/chat_template.h"

namespace {

using brisk::fail;
using json = nlohmann::ordered_json;

constexpr const char* kFaint = "\x1b[2m";
constexpr const char* kReset = "\x1b[0m";

struct Args {
  std::string model, prompt, system, template_path, token, device = "auto";
  std::optional<bool> think;  // unset: the template's default
  int32_t n_predict = 0, n_ctx = 0, threads = 0;
  bool interactive = false, verbose = false;
  brisk::SamplerParams sampling;
  brisk::cli::SpecArgs spec;
};

// Returns false when --help was printed.
bool parse(const std::vector<std::string>& argv, Args& a, bool& ctx_given, bool& n_given) {
  brisk::cli::ArgParser p(
      "run", "[MODEL] [PROMPT] [options]",
      "Chats with a model in the terminal; with a PROMPT (or a prompt on stdin) answers once and exits.");
  p.model(&a.model, brisk::str_cat("GGUF file, Hugging Face folder or Hub reference (default ",
                                   brisk::kHubDefaultModel, ", downloaded on first use)"),
          /*required=*/false);
  p.positional("PROMPT", &a.prompt, "answer this and exit", /*required=*/false);
  p.option({"-p", "--prompt"}, "TEXT", "same as PROMPT", [&](const std::string& v) { a.prompt = v; });
  p.flag({"-i", "--interactive"}, &a.interactive, "chat even when stdin is not a terminal (one message per line)");
  p.text({"--system"}, &a.system, "TEXT", "the system message");
  p.text({"--template"}, &a.template_path, "FILE", "a chat template file instead of the model's");
  p.flag({"--think"}, "pass enable_thinking=true to the template", [&] { a.think = true; });
  p.flag({"--no-think"}, "pass enable_thinking=false and hide reasoning", [&] { a.think = false; });
  p.integer({"-n", "--n-predict"}, &a.n_predict, 1, INT32_MAX, "N", "tokens per answer at most (default: the rest of the context)");
  brisk::cli::add_ctx_option(p, &a.n_ctx, "4096");
  brisk::cli::add_threads_option(p, &a.threads);
  brisk::cli::add_device_option(p, &a.device, "auto: the GPU when one is usable");
  p.text({"--token"}, &a.token, "TOKEN", "Hugging Face token for gated models (default $HF_TOKEN)");
  p.flag({"--verbose"}, &a.verbose, "print the stats line after a one-shot answer and the memory sums at load");
  brisk::cli::add_sampling_options(p, &a.sampling);
  brisk::cli::add_spec_options(p, &a.spec);
  p.note(
      "MODEL is a GGUF file, a Hugging Face folder or a Hub reference (org/name, org/name:QUANT,\n"
      "org/name/file.gguf, @revision). Sampling defaults: --temp 0.8 --top-k 40 --top-p 0.95 --min-p 0.05.\n"
      "In the chat: a line ending in \\ continues on the next line; \"\"\" starts and ends a block.\n"
      "Commands: /clear  /system TEXT  /save FILE  /load FILE  /help  /exit (or Ctrl-D).\n"
      "Ctrl-C stops the answer being written (it stays in the conversation) or clears the line.\n"
      "When the conversation outgrows the context, its oldest turns are dropped (the system message stays).");
  if (!p.parse(argv)) return false;
  brisk::cli::refuse_device_list("run", a.device);
  if (a.model.empty()) a.model = brisk::kHubDefaultModel;
  ctx_given = p.given("--ctx");
  n_given = p.given("--n-predict");
  return true;
}

// Set by SIGINT while an answer is written; the streaming callback stops the answer.
std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_sigint(int) { g_interrupted.store(true); }

class SigintGuard {
 public:
  SigintGuard() {
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: a blocking read returns EINTR
    sigaction(SIGINT, &sa, &saved_);
  }
  ~SigintGuard() { sigaction(SIGINT, &saved_, nullptr); }
  SigintGuard(const SigintGuard&) = delete;
  SigintGuard& operator=(const SigintGuard&) = delete;

 private:
  struct sigaction saved_ {};
};

void write_stdout(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// Reads one message: a line ending in '\' continues; a line starting with """ opens a block
// that ends at a line ending with """. nullopt at end of input; "" when Ctrl-C dropped it.
std::optional<std::string> read_message(brisk::cli::LineEditor& ed) {
  std::string text;
  bool block = false, first = true;
  for (;;) {
    const auto r = ed.read_line(first ? ">>> " : "... ");
    if (r.status == brisk::cli::LineEditor::Status::kEndOfInput) {
      if (first) return std::nullopt;
      return text;
    }
    if (r.status == brisk::cli::LineEditor::Status::kInterrupted) return std::string();
    ed.add_history(r.text);
    std::string line = r.text;
    if (first && line.rfind("\"\"\"", 0) == 0) {
      block = true;
      line.erase(0, 3);
      if (line.size() >= 3 && line.compare(line.size() - 3, 3, "\"\"\"") == 0) {
        return text + line.substr(0, line.size() - 3);
      }
      text += line;
      if (!line.empty()) text += '\n';
      first = false;
      continue;
    }
    first = false;
    if (block) {
      if (line.size() >= 3 && line.compare(line.size() - 3, 3, "\"\"\"") == 0) {
        line.erase(line.size() - 3);
        if (line.empty() && !text.empty() && text.back() == '\n') text.pop_back();
        return text + line;
      }
      text += line + '\n';
      continue;
    }
    if (!line.empty() && line.back() == '\\') {
      line.pop_back();
      text += line + '\n';
      continue;
    }
    return text + line;
  }
}

void save_conversation(const brisk::ChatSession& chat, const json& kwargs, const std::string& path) {
  json out = {{"messages", chat.messages()}};
  if (!kwargs.empty()) out["kwargs"] = kwargs;
  std::ofstream f(path, std::ios::binary);
  BRISK_CHECK(f.good(), "/save: cannot write ", path);
  f << out.dump(2) << '\n';
  BRISK_CHECK(f.good(), "/save: write to ", path, " failed");
}

void load_conversation(brisk::ChatSession& chat, const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  BRISK_CHECK(f.good(), "/load: cannot read ", path);
  std::stringstream ss;
  ss << f.rdbuf();
  json doc = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  BRISK_CHECK(!doc.is_discarded(), "/load: ", path, " is not valid JSON");
  if (doc.is_object()) {
    BRISK_CHECK(doc.contains("messages"), "/load: ", path, " has no \"messages\"");
    doc = doc["messages"];
  }
  chat.set_messages(doc, path);
}

struct Display {
  bool tty_out = false, tty_err = false, show_reasoning = true;
  bool in_reasoning = false;  // faint attribute on
  bool at_line_start = true;

  void text(const std::string& s, bool reasoning) {
    if (s.empty() || (reasoning && !show_reasoning)) return;
    std::string out;
    if (tty_out && reasoning != in_reasoning) out += reasoning ? kFaint : kReset;
    in_reasoning = reasoning;
    out += s;
    at_line_start = s.back() == '\n';
    write_stdout(out);
  }
  void end_answer() {
    std::string out;
    if (tty_out && in_reasoning) out += kReset;
    in_reasoning = false;
    if (!at_line_start) out += '\n';
    at_line_start = true;
    write_stdout(out);
  }
};

void print_stats(const brisk::ChatTurnStats& s, bool interrupted, bool dim) {
  const double prompt_tps = s.prompt_seconds > 0 ? s.n_prompt_new / s.prompt_seconds : 0.0;
  const double decode_tps = s.decode_seconds > 0 ? s.n_decoded / s.decode_seconds : 0.0;
  std::fprintf(stderr, "%s[prompt %d tok (%d new) %.0f tok/s | %d tok %.1f tok/s | ctx %d/%d%s]%s\n",
               dim ? kFaint : "", s.n_prompt, s.n_prompt_new, prompt_tps, s.n_generated,
               decode_tps, s.n_ctx_used, s.n_ctx,
               interrupted ? " | stopped"
               : s.stop == brisk::StopReason::context_full ? " | context full"
               : s.stop == brisk::StopReason::max_tokens   ? " | max tokens"
                                                           : "",
               dim ? kReset : "");
  if (s.spec_steps > 0)
    std::fprintf(stderr, "%s[%s]%s\n", dim ? kFaint : "",
                 brisk::cli::spec_summary("spec", uint64_t(s.spec_steps), uint64_t(s.spec_drafted),
                                          uint64_t(s.spec_accepted))
                     .c_str(),
                 dim ? kReset : "");
  std::fflush(stderr);
}

void print_help() {
  write_stdout(
      "/clear          start a new conversation (keeps the system message)\n"
      "/system TEXT    set the system message (empty: remove it)\n"
      "/save FILE      write the conversation as JSON\n"
      "/load FILE      read a conversation written by /save\n"
      "/exit           leave (also Ctrl-D)\n");
}

// One turn: the answer streamed through `display`, the dropped-turns note and the stats line.
struct TurnRunner {
  brisk::ChatSession& chat;
  brisk::ChatFormat format;
  Display& display;
  const brisk::GenerateParams& params;
  int32_t n_ctx;

  void operator()(const std::string& msg, bool stats) {
    // The parser must know whether the prompt leaves a reasoning block open (e.g. a
    // template that ends the generation prompt with "<think>\n").
    const std::string prompt_text = chat.render_prompt(msg);
    brisk::ChatOutputParser parser({.format = format,
                                    .starts_in_reasoning = brisk::chat_prompt_opens_reasoning(prompt_text, format),
                                    .parse_tool_calls = false});
    brisk::GenerateCallbacks cb;
    cb.on_text = [&](std::string_view text) {
      const brisk::ChatOutputDelta d = parser.feed(text);
      display.text(d.reasoning, true);
      display.text(d.content, false);
      return !g_interrupted.load();
    };
    brisk::ChatTurn turn;
    try {
      turn = chat.reply(msg, params, cb);
    } catch (const brisk::ChatContextFull& e) {
      brisk::fail(e.what(), ": use a larger --ctx (now ", n_ctx, ")");
    }
    const brisk::ChatOutputDelta d = parser.finish();
    display.text(d.reasoning, true);
    display.text(d.content, false);
    display.end_answer();
    if (turn.n_messages_dropped > 0)
      std::fprintf(stderr, "(the conversation outgrew the context of %d tokens: dropped its %d oldest message%s; "
                   "/clear starts over, --ctx N gives more room)\n",
                   n_ctx, turn.n_messages_dropped, turn.n_messages_dropped == 1 ? "" : "s");
    if (stats) print_stats(turn.stats, turn.stats.stop == brisk::StopReason::callback, display.tty_err);
    if (turn.stats.stop == brisk::StopReason::context_full)
      std::fprintf(stderr, "(the answer filled the context of %d tokens; the next message drops the oldest turns: "
                   "/clear starts over, --ctx N gives more room)\n", n_ctx);
  }
};

std::string read_all_stdin() {
  std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

int cmd_run(const std::vector<std::string>& argv) {
  Args a;
  bool ctx_given = false, n_given = false;
  if (!parse(argv, a, ctx_given, n_given)) return 0;
  // One answer when a prompt is given or stdin is a pipe or file (read whole, after PROMPT).
  const bool stdin_tty = isatty(STDIN_FILENO);
  const bool one_shot = !a.interactive && (!a.prompt.empty() || !stdin_tty);
  std::string prompt = a.prompt;
  if (one_shot && !stdin_tty) {
    const std::string piped = read_all_stdin();
    prompt = prompt.empty() ? piped : piped.empty() ? prompt : prompt + "\n\n" + piped;
  }
  if (one_shot && trim(prompt).empty()) brisk::cli::usage_fail("the prompt is empty");

  const std::string path = brisk::cli::resolve_model(a.model, a.token);
  // The chat template is read and tried before the weights load.
  std::optional<brisk::ChatTemplate> tmpl = brisk::cli::checked_chat_template(path, a.template_path);
  BRISK_CHECK(tmpl.has_value(), path, " has no chat template: give one with --template FILE");
  auto model = brisk::cli::load_model({.path = path, .n_threads = a.threads});
  BRISK_CHECK(model->tokenizer() != nullptr, path, " has no tokenizer files");
  const brisk::ChatFormat format =
      brisk::chat_format_detect(tmpl->source(tmpl->select_variant({})), model->info().architecture);

  const brisk::cli::ContextSize n_ctx =
      brisk::cli::context_size("run", a.n_ctx, ctx_given, 4096, model->info().n_ctx_train);
  if (!n_ctx.note.empty()) std::fprintf(stderr, "%s\n", n_ctx.note.c_str());
  if (a.verbose && brisk::log_level() > brisk::LogLevel::info) brisk::set_log_level(brisk::LogLevel::info);
  const brisk::ContextOptions copt{.n_ctx = n_ctx.n_ctx, .n_seq_max = 1, .n_threads = a.threads, .device = a.device,
                                   .state_checkpoints = brisk::cli::spec_requested(a.spec)};
  a.spec.hf_token = a.token;
  const brisk::SpecOptions spec = brisk::cli::make_spec_options(a.spec, model, path, copt);
  auto ctx = brisk::Context::create(model, copt);
  json kwargs = json::object();
  if (a.think.has_value()) kwargs["enable_thinking"] = *a.think;
  brisk::ChatSession chat(model, *ctx, std::move(*tmpl), {.template_kwargs = kwargs});
  if (!a.system.empty()) chat.set_system(a.system);

  Display display{.tty_out = bool(isatty(STDOUT_FILENO)), .tty_err = bool(isatty(STDERR_FILENO)),
                  .show_reasoning = a.think.value_or(true)};
  const int32_t n_predict = n_given ? a.n_predict : ctx->options().n_ctx;
  const brisk::GenerateParams gp{.max_tokens = n_predict, .sampling = a.sampling, .spec = spec};
  TurnRunner answer{.chat = chat, .format = format, .display = display, .params = gp, .n_ctx = ctx->options().n_ctx};
  SigintGuard sigint;
  if (one_shot) {
    answer(prompt, a.verbose);
    return g_interrupted.load() ? 130 : 0;
  }

  brisk::cli::LineEditor editor(STDIN_FILENO, STDOUT_FILENO, brisk::cli::LineEditor::default_history_path());
  if (editor.interactive())
    write_stdout(brisk::str_cat("chat with ", model->info().name.empty() ? path : model->info().name,
                                " (/help for commands, Ctrl-D to leave)\n"));
  for (;;) {
    g_interrupted.store(false);
    const std::optional<std::string> input = read_message(editor);
    if (!input.has_value()) break;
    const std::string msg = *input;
    if (trim(msg).empty()) continue;
    try {
      if (msg[0] == '/') {
        const size_t sp = msg.find(' ');
        const std::string cmd = msg.substr(0, sp);
        const std::string rest = sp == std::string::npos ? "" : trim(msg.substr(sp + 1));
        if (cmd == "/exit" || cmd == "/quit" || cmd == "/bye") break;
        if (cmd == "/clear") {
          chat.clear();
          write_stdout("(new conversation)\n");
        } else if (cmd == "/system") {
          chat.set_system(rest);
          write_stdout(rest.empty() ? "(system message removed)\n" : "(system message set)\n");
        } else if (cmd == "/save") {
          BRISK_CHECK(!rest.empty(), "/save needs a file name");
          save_conversation(chat, kwargs, rest);
          write_stdout(brisk::str_cat("(saved ", chat.messages().size(), " messages to ", rest, ")\n"));
        } else if (cmd == "/load") {
          BRISK_CHECK(!rest.empty(), "/load needs a file name");
          load_conversation(chat, rest);
          write_stdout(brisk::str_cat("(loaded ", chat.messages().size(), " messages from ", rest, ")\n"));
        } else {
          print_help();
        }
        continue;
      }
      answer(msg, true);
    } catch (const brisk::Error& e) {
      display.end_answer();
      std::fprintf(stderr, "brisk run: error: %s\n", e.what());
    }
  }
  return 0;
}

}  // namespace

BRISK_COMMAND("run", "chat with a model, or answer one prompt (MODEL \"PROMPT\"; default Qwen/Qwen3-0.6B-GGUF:Q8_0)",
              cmd_run);
