// The argument parser of every `brisk` command, so that all of them read their arguments the
// same way (docs/cli.md):
//   - options by name, long or short (`--ctx 4096`, `--ctx=4096`, `-c 4096`), values checked
//     (integers, numbers, ranges) with the option named in the error;
//   - positionals in declared order; `--` ends the options; `-` alone is a positional;
//   - the model as `-m/--model MODEL` or as the first positional (ArgParser::model);
//   - `-h` / `--help` prints the usage on stdout and parse() returns false (exit 0);
//   - anything unreadable throws UsageError, which main() prints as `brisk CMD: error: ...`
//     with exit status 2 (errors while running are brisk::Error: exit status 1).
// The groups that several commands share (sampling, threads, context size, device) are the
// add_* helpers at the end, so that they are spelled alike everywhere, llama.cpp's spellings
// included as aliases.
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/sampler.h"

namespace brisk::cli {

// A command line that cannot be read: exit status 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

template <class... Args>
[[noreturn]] void usage_fail(Args&&... args) {
  throw UsageError(str_cat(std::forward<Args>(args)...));
}

// Checked number parsing; `what` names the option in the error ("--ctx").
int64_t parse_integer(const std::string& what, const std::string& value, int64_t lo, int64_t hi);
double parse_number(const std::string& what, const std::string& value, double lo, double hi);

class ArgParser {
 public:
  using ValueHandler = std::function<void(const std::string& value)>;

  // command: "generate"; synopsis: what follows `brisk generate` in the usage line, e.g.
  // "[MODEL] [options]"; summary: one line under it.
  ArgParser(std::string command, std::string synopsis, std::string summary = {});

  // An option with a value. names: e.g. {"-c", "--ctx", "--ctx-size"}: all are accepted and
  // listed; the handler throws UsageError for a bad value.
  ArgParser& option(std::vector<std::string> names, std::string metavar, std::string help, ValueHandler handler);
  // A switch without a value.
  ArgParser& flag(std::vector<std::string> names, std::string help, std::function<void()> on);

  // Typed forms of the two above.
  ArgParser& flag(std::vector<std::string> names, bool* out, std::string help);
  ArgParser& text(std::vector<std::string> names, std::string* out, std::string metavar, std::string help);
  ArgParser& texts(std::vector<std::string> names, std::vector<std::string>* out, std::string metavar,
                   std::string help);  // repeatable, in order
  ArgParser& integer(std::vector<std::string> names, int32_t* out, int64_t lo, int64_t hi, std::string metavar,
                     std::string help);
  ArgParser& number(std::vector<std::string> names, float* out, double lo, double hi, std::string metavar,
                    std::string help);

  // Positionals, filled in the order they are declared.
  ArgParser& positional(std::string metavar, std::string* out, std::string help, bool required);
  // Takes every remaining positional (at least `min`).
  ArgParser& positionals(std::string metavar, std::vector<std::string>* out, std::string help, size_t min);
  // The model: `-m/--model MODEL`, or else the first positional. Declare it before the other
  // positionals. `required`: a usage error when neither is given.
  ArgParser& model(std::string* out, std::string help, bool required = true);

  ArgParser& section(std::string title);  // a heading for the options declared after it
  ArgParser& note(std::string text);      // a paragraph printed after the options

  // Reads `args` (what follows the command name). Returns false when the usage was printed
  // (-h/--help): the command then returns 0.
  bool parse(const std::vector<std::string>& args);
  // Whether the option `name` (any of its names), or the positional of that metavar, was
  // on the command line.
  bool given(const std::string& name) const;
  std::string usage() const;
  const std::string& command() const { return command_; }

 private:
  struct Option {
    std::vector<std::string> names;
    std::string metavar;  // "" for a switch
    std::string help;
    std::string section;
    ValueHandler on_value;
    std::function<void()> on_flag;
    bool seen = false;
  };
  struct Positional {
    std::string metavar, help;
    std::string* out = nullptr;
    std::vector<std::string>* rest = nullptr;
    size_t min = 0;
    bool required = false;
    bool is_model = false;
  };
  Option* find(const std::string& name);
  const Option* find(const std::string& name) const;
  void add(Option o);

  std::string command_, synopsis_, summary_, section_;
  std::vector<Option> options_;
  std::vector<Positional> positionals_;
  std::vector<std::string> notes_;
  std::vector<std::string> given_positionals_;
  std::string* model_ = nullptr;
  bool model_from_option_ = false;
};

// ---- shared groups ---------------------------------------------------------------------

// --temp/--temperature, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n,
// --presence-penalty, --frequency-penalty, -s/--seed (-1: a random seed), range-checked.
void add_sampling_options(ArgParser& p, SamplerParams* params);
// -t/--threads N: 0 (all cores) up to the machine's hardware threads.
void add_threads_option(ArgParser& p, int32_t* threads);
// -c/--ctx/--ctx-size N: 0 means the model's maximum (its trained context).
void add_ctx_option(ArgParser& p, int32_t* n_ctx, const std::string& default_text);
// --device auto|cpu|cuda|cuda:N, and llama.cpp's -ngl/--n-gpu-layers N mapped onto it (0: cpu;
// more: auto, the GPU when one is usable) with a one-line note on stderr.
void add_device_option(ArgParser& p, std::string* device, const std::string& default_text);
// --tp N: tensor parallelism over N ranks (1..1024; left at 0 when not given): GPUs 0..N-1 with
// --device cuda, N CPU ranks with --device cpu; a device list cuda:0,1,... implies it.
void add_tp_option(ArgParser& p, int32_t* tp);
// A usage error for a device list (cuda:0,1,...) given to a command that runs on one device.
void refuse_device_list(const std::string& command, const std::string& device);

// The context size to ask for: `requested` (0: the model's maximum), and the one-line note
// when the model cannot hold that many positions (printed by the caller).
struct ContextSize {
  int32_t n_ctx = 0;
  std::string note;  // "" when nothing was clamped
};
ContextSize context_size(const std::string& command, int32_t requested, bool given, int32_t fallback,
                         int32_t model_max);

}  // namespace brisk::cli
