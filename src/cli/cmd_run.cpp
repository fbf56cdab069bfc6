// `brisk run [MODEL]`: an interactive chat in the terminal. The model argument is a path or a
// Hub reference (downloaded on first use); without one, brisk::kHubDefaultModel. Each turn
// re-renders the conversation with the chat template and prefills only what the KV cache
// lacks (runtime/chat_session.h); the answer streams, its reasoning dimmed (or hidden with
// --no-think), and a stats line follows on stderr.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/line_editor.h"
#include "cli/sampling_flags.h"
#include "core/error.h"
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
  std::string model, system, template_path, token;
  std::optional<bool> think;  // unset: the template's default
  int32_t n_predict = -1, n_ctx = 4096, threads = 0;
  brisk::SamplerParams sampling;
};

void usage() {
  std::fprintf(stderr,
               "usage: brisk run [MODEL] [--system TEXT] [--template FILE] [--think|--no-think]\n"
               "  [-n MAX_TOKENS_PER_TURN] [--ctx N] [-t N] [--token HF_TOKEN]\n"
               "%s"
               "MODEL is a GGUF file, a Hugging Face folder or a Hub reference (org/name, org/name:QUANT,\n"
               "org/name/file.gguf, @revision), downloaded on first use; default %s.\n"
               "Sampling defaults: --temp 0.8 --top-k 40 --top-p 0.95 --min-p 0.05 (--temp 0: greedy).\n"
               "-n defaults to the rest of the context.\n"
               "In the chat: a line ending in \\ continues on the next line; \"\"\" starts and ends a block.\n"
               "Commands: /clear  /system TEXT  /save FILE  /load FILE  /help  /exit (or Ctrl-D).\n"
               "Ctrl-C stops the answer being written (it stays in the conversation) or clears the line.\n",
               brisk::cli::kSamplingFlagsUsage, brisk::kHubDefaultModel);
}

Args parse(const std::vector<std::string>& argv) {
  using brisk::cli::parse_int_flag;
  Args a;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& f = argv[i];
    auto value = [&]() -> const std::string& {
      BRISK_CHECK(i + 1 < argv.size(), f, " needs a value");
      return argv[++i];
    };
    if (brisk::cli::parse_sampling_flag(argv, i, a.sampling)) continue;
    if (f == "--system") a.system = value();
    else if (f == "--template") a.template_path = value();
    else if (f == "--think") a.think = true;
    else if (f == "--no-think") a.think = false;
    else if (f == "-n" || f == "--n-predict") a.n_predict = parse_int_flag(f, value());
    else if (f == "--ctx" || f == "-c") a.n_ctx = parse_int_flag(f, value());
    else if (f == "-t" || f == "--threads") a.threads = parse_int_flag(f, value());
    else if (f == "--token") a.token = value();
    else if (f == "-h" || f == "--help") { usage(); std::exit(0); }
    else if (!f.empty() && f[0] == '-') fail("run: unknown argument '", f, "' (see brisk run --help)");
    else if (a.model.empty()) a.model = f;
    else fail("run: more than one model given ('", a.model, "' and '", f, "')");
  }
  BRISK_CHECK(a.n_ctx > 0, "--ctx must be positive");
  BRISK_CHECK(a.threads >= 0, "-t must not be negative");
  if (a.model.empty()) a.model = brisk::kHubDefaultModel;
  return a;
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

int cmd_run(const std::vector<std::string>& argv) {
  const Args a = parse(argv);
  const std::string path = brisk::hub_resolve_model(a.model, {.token = a.token});
  auto model = brisk::Model::load({.path = path, .n_threads = a.threads});
  BRISK_CHECK(model->tokenizer() != nullptr, path, " has no tokenizer files");

  brisk::ChatTemplate tmpl = [&] {
    if (!a.template_path.empty()) return brisk::ChatTemplate::from_file(a.template_path);
    BRISK_CHECK(!model->chat_template().empty(), path, " has no chat template: give one with --template FILE");
    return brisk::ChatTemplate(model->chat_template(), path);
  }();
  const brisk::ChatFormat format =
      brisk::chat_format_detect(tmpl.source(tmpl.select_variant({})), model->info().architecture);

  auto ctx = brisk::Context::create(model, {.n_ctx = a.n_ctx, .n_seq_max = 1, .n_threads = a.threads});
  json kwargs = json::object();
  if (a.think.has_value()) kwargs["enable_thinking"] = *a.think;
  brisk::ChatSession chat(model, *ctx, std::move(tmpl), {.template_kwargs = kwargs});
  if (!a.system.empty()) chat.set_system(a.system);

  brisk::cli::LineEditor editor(STDIN_FILENO, STDOUT_FILENO, brisk::cli::LineEditor::default_history_path());
  Display display{.tty_out = bool(isatty(STDOUT_FILENO)), .tty_err = bool(isatty(STDERR_FILENO)),
                  .show_reasoning = a.think.value_or(true)};
  const int32_t n_predict = a.n_predict >= 0 ? a.n_predict : ctx->options().n_ctx;
  brisk::GenerateParams gp{.max_tokens = n_predict, .sampling = a.sampling};
  SigintGuard sigint;
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
      const brisk::ChatTurn turn = chat.reply(msg, gp, cb);
      const brisk::ChatOutputDelta d = parser.finish();
      display.text(d.reasoning, true);
      display.text(d.content, false);
      display.end_answer();
      print_stats(turn.stats, turn.stats.stop == brisk::StopReason::callback, display.tty_err);
    } catch (const brisk::Error& e) {
      display.end_answer();
      std::fprintf(stderr, "error: %s\n", e.what());
    }
  }
  return 0;
}

}  // namespace

BRISK_COMMAND("run", "chat with a model in the terminal (path or Hub reference; default Qwen/Qwen3-0.6B-GGUF:Q8_0)",
              cmd_run);
