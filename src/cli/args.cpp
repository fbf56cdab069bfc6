#include "cli/args.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "core/thread_pool.h"

namespace brisk::cli {

namespace {

// The name errors use for an option: its first long name.
std::string display_name(const std::vector<std::string>& names) {
  for (const std::string& n : names)
    if (n.rfind("--", 0) == 0) return n;
  return names.front();
}

}  // namespace

int64_t parse_integer(const std::string& what, const std::string& v, int64_t lo, int64_t hi) {
  errno = 0;
  char* end = nullptr;
  const long long x = v.empty() ? 0 : std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || end == nullptr || *end != '\0' || errno == ERANGE) usage_fail(what, ": '", v, "' is not an integer");
  if (x < lo || x > hi) {
    if (hi == std::numeric_limits<int32_t>::max() || hi == std::numeric_limits<int64_t>::max())
      usage_fail(what, " ", v, ": must be at least ", lo);
    usage_fail(what, " ", v, ": must be between ", lo, " and ", hi);
  }
  return x;
}

double parse_number(const std::string& what, const std::string& v, double lo, double hi) {
  errno = 0;
  char* end = nullptr;
  const double x = v.empty() ? 0 : std::strtod(v.c_str(), &end);
  if (v.empty() || end == nullptr || *end != '\0' || !std::isfinite(x)) usage_fail(what, ": '", v, "' is not a number");
  if (x < lo || x > hi) {
    if (std::isinf(hi)) usage_fail(what, " ", v, ": must be at least ", lo);
    usage_fail(what, " ", v, ": must be between ", lo, " and ", hi);
  }
  return x;
}

ArgParser::ArgParser(std::string command, std::string synopsis, std::string summary)
    : command_(std::move(command)), synopsis_(std::move(synopsis)), summary_(std::move(summary)) {}

ArgParser::Option* ArgParser::find(const std::string& name) {
  for (Option& o : options_)
    if (std::find(o.names.begin(), o.names.end(), name) != o.names.end()) return &o;
  return nullptr;
}

const ArgParser::Option* ArgParser::find(const std::string& name) const {
  return const_cast<ArgParser*>(this)->find(name);
}

void ArgParser::add(Option o) {
  for (const std::string& n : o.names)
    if (find(n) || n == "-h" || n == "--help") fail("brisk ", command_, ": option ", n, " declared twice");
  o.section = section_;
  options_.push_back(std::move(o));
}

ArgParser& ArgParser::option(std::vector<std::string> names, std::string metavar, std::string help,
                             ValueHandler handler) {
  add({.names = std::move(names), .metavar = std::move(metavar), .help = std::move(help), .section = {},
       .on_value = std::move(handler), .on_flag = {}});
  return *this;
}

ArgParser& ArgParser::flag(std::vector<std::string> names, std::string help, std::function<void()> on) {
  add({.names = std::move(names), .metavar = {}, .help = std::move(help), .section = {}, .on_value = {},
       .on_flag = std::move(on)});
  return *this;
}

ArgParser& ArgParser::flag(std::vector<std::string> names, bool* out, std::string help) {
  return flag(std::move(names), std::move(help), [out] { *out = true; });
}

ArgParser& ArgParser::text(std::vector<std::string> names, std::string* out, std::string metavar, std::string help) {
  return option(std::move(names), std::move(metavar), std::move(help), [out](const std::string& v) { *out = v; });
}

ArgParser& ArgParser::texts(std::vector<std::string> names, std::vector<std::string>* out, std::string metavar,
                            std::string help) {
  return option(std::move(names), std::move(metavar), std::move(help),
                [out](const std::string& v) { out->push_back(v); });
}

ArgParser& ArgParser::integer(std::vector<std::string> names, int32_t* out, int64_t lo, int64_t hi,
                              std::string metavar, std::string help) {
  const std::string what = display_name(names);
  return option(std::move(names), std::move(metavar), std::move(help),
                [out, what, lo, hi](const std::string& v) { *out = int32_t(parse_integer(what, v, lo, hi)); });
}

ArgParser& ArgParser::number(std::vector<std::string> names, float* out, double lo, double hi, std::string metavar,
                             std::string help) {
  const std::string what = display_name(names);
  return option(std::move(names), std::move(metavar), std::move(help),
                [out, what, lo, hi](const std::string& v) { *out = float(parse_number(what, v, lo, hi)); });
}

ArgParser& ArgParser::positional(std::string metavar, std::string* out, std::string help, bool required) {
  positionals_.push_back({.metavar = std::move(metavar), .help = std::move(help), .out = out, .rest = nullptr,
                          .min = 0, .required = required, .is_model = false});
  return *this;
}

ArgParser& ArgParser::positionals(std::string metavar, std::vector<std::string>* out, std::string help,
                                  size_t min) {
  positionals_.push_back({.metavar = std::move(metavar), .help = std::move(help), .out = nullptr, .rest = out,
                          .min = min, .required = min > 0, .is_model = false});
  return *this;
}

ArgParser& ArgParser::model(std::string* out, std::string help, bool required) {
  BRISK_CHECK(positionals_.empty() && model_ == nullptr, "brisk ", command_, ": the model is the first positional");
  model_ = out;
  option({"-m", "--model"}, "MODEL", help, [this](const std::string& v) {
    BRISK_CHECK(!v.empty(), "-m/--model: empty model name");
    *model_ = v;
    model_from_option_ = true;
  });
  positionals_.push_back({.metavar = "MODEL", .help = {}, .out = out, .rest = nullptr, .min = 0,
                          .required = required, .is_model = true});
  return *this;
}

ArgParser& ArgParser::section(std::string title) {
  section_ = std::move(title);
  return *this;
}

ArgParser& ArgParser::note(std::string text) {
  notes_.push_back(std::move(text));
  return *this;
}

bool ArgParser::given(const std::string& name) const {
  const Option* o = find(name);
  if (o) return o->seen;
  return std::find(given_positionals_.begin(), given_positionals_.end(), name) != given_positionals_.end();
}

bool ArgParser::parse(const std::vector<std::string>& args) {
  std::vector<std::string> pos;
  bool options_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (options_done || a.size() < 2 || a[0] != '-') {
      pos.push_back(a);
      continue;
    }
    if (a == "--") {
      options_done = true;
      continue;
    }
    if (a == "-h" || a == "--help") {
      std::fputs(usage().c_str(), stdout);
      std::fflush(stdout);
      return false;
    }
    // A negative number is a positional (e.g. a prompt "-1"), not an option.
    if (!find(a) && (std::isdigit(static_cast<unsigned char>(a[1])) || a[1] == '.')) {
      pos.push_back(a);
      continue;
    }
    std::string name = a, value;
    bool inline_value = false;
    if (const size_t eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      inline_value = true;
    }
    Option* o = find(name);
    if (!o) usage_fail("unknown option '", name, "'");
    o->seen = true;
    if (o->metavar.empty()) {
      if (inline_value) usage_fail(name, " takes no value");
      o->on_flag();
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= args.size()) usage_fail(name, " needs a value (", o->metavar, ")");
      value = args[++i];
    }
    o->on_value(value);
  }
  // Positionals in declared order; the model's slot is skipped when -m/--model gave it.
  size_t next = 0;
  for (const Positional& p : positionals_) {
    if (p.is_model && model_from_option_) continue;
    if (p.rest) {
      while (next < pos.size()) p.rest->push_back(pos[next++]);
      if (p.rest->size() < p.min) usage_fail(p.metavar, " is required");
      continue;
    }
    if (next < pos.size()) {
      *p.out = pos[next++];
      given_positionals_.push_back(p.metavar);
    } else if (p.required) {
      usage_fail(p.is_model ? "a model is required (-m MODEL or the first argument)" : p.metavar + " is required");
    }
  }
  if (next < pos.size()) usage_fail("unexpected argument '", pos[next], "'");
  return true;
}

std::string ArgParser::usage() const {
  std::string out = "usage: brisk " + command_ + (synopsis_.empty() ? "" : " " + synopsis_) + "\n";
  if (!summary_.empty()) out += summary_ + "\n";
  const Option help{.names = {"-h", "--help"}, .metavar = {}, .help = "show this help", .section = {}, .on_value = {},
                    .on_flag = {}};
  std::vector<std::pair<std::string, const Option*>> rows;
  size_t width = 0;
  std::vector<const Option*> all{&help};
  for (const Option& o : options_) all.push_back(&o);
  for (const Option* op : all) {
    const Option& o = *op;
    std::string left;
    for (size_t i = 0; i < o.names.size(); ++i) {
      if (i) left += ", ";
      left += o.names[i];
    }
    if (!o.metavar.empty()) left += " " + o.metavar;
    width = std::max(width, std::min<size_t>(left.size(), 30));
    rows.emplace_back(std::move(left), &o);
  }
  bool any_positional = false;
  for (const Positional& p : positionals_) {
    if (p.help.empty()) continue;
    if (!any_positional) out += "\narguments:\n";
    any_positional = true;
    std::string line = "  " + p.metavar;
    if (p.metavar.size() > width) line += "\n" + std::string(width + 2, ' ');
    else line += std::string(width - p.metavar.size(), ' ');
    out += line + "  " + p.help + "\n";
  }
  std::string section = "\x01";
  for (const auto& [left, o] : rows) {
    if (o->section != section) {
      section = o->section;
      out += "\n" + (section.empty() ? std::string("options") : section) + ":\n";
    }
    std::string line = "  " + left;
    if (left.size() > width) line += "\n" + std::string(width + 2, ' ');
    else line += std::string(width - left.size(), ' ');
    out += line + "  " + o->help + "\n";
  }
  for (const std::string& n : notes_) out += "\n" + n + (n.empty() || n.back() != '\n' ? "\n" : "");
  return out;
}

// ---- shared groups ---------------------------------------------------------------------

void add_sampling_options(ArgParser& p, SamplerParams* s) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  p.section("sampling");
  p.number({"--temp", "--temperature"}, &s->temperature, 0.0, kInf, "T", "temperature; 0 picks the most likely token");
  p.integer({"--top-k"}, &s->top_k, 0, std::numeric_limits<int32_t>::max(), "K", "keep the K most likely tokens (0: off)");
  p.number({"--top-p"}, &s->top_p, 0.0, 1.0, "P", "nucleus sampling: keep tokens up to probability mass P (1: off)");
  p.number({"--min-p"}, &s->min_p, 0.0, 1.0, "P", "drop tokens below P x the top probability (0: off)");
  p.number({"--repeat-penalty"}, &s->repeat_penalty, 1e-3, 100.0, "R", "penalty on repeated tokens (1: off)");
  p.integer({"--repeat-last-n"}, &s->penalty_last_n, -1, std::numeric_limits<int32_t>::max(), "N",
            "tokens the penalties look back on (-1: all, 0: off)");
  p.number({"--presence-penalty"}, &s->presence_penalty, -2.0, 2.0, "P", "OpenAI presence penalty, -2..2");
  p.number({"--frequency-penalty"}, &s->frequency_penalty, -2.0, 2.0, "F", "OpenAI frequency penalty, -2..2");
  p.option({"-s", "--seed"}, "S", "seed of the sampler (-1: a random one)", [s](const std::string& v) {
    if (v == "-1") {
      std::random_device rd;
      s->seed = (uint64_t(rd()) << 32) ^ uint64_t(rd());
      return;
    }
    s->seed = uint64_t(parse_integer("--seed", v, 0, std::numeric_limits<int64_t>::max()));
  });
  p.section("");
}

void add_threads_option(ArgParser& p, int32_t* threads) {
  const int hw = ThreadPool::default_threads();
  p.option({"-t", "--threads"}, "N", str_cat("compute threads (default: all ", hw, " hardware threads)"),
           [threads, hw](const std::string& v) {
             const int64_t n = parse_integer("--threads", v, 0, std::numeric_limits<int32_t>::max());
             if (n > hw)
               usage_fail("--threads ", v, ": this machine runs ", hw,
                          " threads at once (more only slow the work down)");
             *threads = int32_t(n);
           });
}

void add_ctx_option(ArgParser& p, int32_t* n_ctx, const std::string& default_text) {
  p.integer({"-c", "--ctx", "--ctx-size"}, n_ctx, 0, 1 << 24, "N",
            "context size in tokens (default " + default_text + "; 0: the model's maximum)");
}

void add_tp_option(ArgParser& p, int32_t* tp) {
  p.integer({"--tp", "--tensor-parallel"}, tp, 1, 1024, "N",
            "split the model over N ranks (tensor parallelism): GPUs 0..N-1 with --device cuda, N CPU ranks "
            "with --device cpu; --device cuda:0,1,... implies it");
}

void refuse_device_list(const std::string& command, const std::string& device) {
  if (device.find(',') != std::string::npos)
    usage_fail("--device ", device, ": ", command, " runs on one device; several GPUs (tensor parallelism) are for "
               "generate, bench and cuda-bench");
}

void add_device_option(ArgParser& p, std::string* device, const std::string& default_text) {
  p.text({"--device"}, device, "D",
         "auto | cpu | cuda | cuda:N | cuda:I,J,... (one GPU per tensor-parallel rank) (default " + default_text + ")");
  const std::string command = p.command();
  p.option({"-ngl", "--n-gpu-layers", "--gpu-layers"}, "N",
           "llama.cpp's spelling: 0 is --device cpu, more is --device auto", [device, command](const std::string& v) {
             const int64_t n = parse_integer("--n-gpu-layers", v, -1, std::numeric_limits<int32_t>::max());
             *device = n == 0 ? "cpu" : "auto";
             std::fprintf(stderr, "brisk %s: -ngl %s: brisk keeps the whole model on one device; using --device %s\n",
                          command.c_str(), v.c_str(), device->c_str());
           });
}

ContextSize context_size(const std::string& command, int32_t requested, bool given, int32_t fallback,
                         int32_t model_max) {
  ContextSize r;
  const int32_t want = !given ? fallback : requested == 0 ? model_max : requested;
  r.n_ctx = model_max > 0 ? std::min(want, model_max) : want;
  if (given && requested > 0 && model_max > 0 && requested > model_max)
    r.note = str_cat("brisk ", command, ": --ctx ", requested, " is more than the model's ", model_max,
                     " positions (its trained context); using ", model_max);
  return r;
}

}  // namespace brisk::cli
