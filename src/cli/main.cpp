// brisk: command dispatcher. `brisk help` lists the commands; every command parses its
// arguments with cli::ArgParser (args.h), and errors leave here as one line:
//   brisk CMD: error: MESSAGE      exit status 2 for a command line that cannot be read,
//                                   1 for an error while running.
#include <algorithm>
#include <cstdio>
#include <exception>

#include "cli/args.h"
#include "cli/command.h"
#include "core/error.h"

namespace brisk::cli {

static std::vector<Command>& registry() {
  static std::vector<Command> r;
  return r;
}

bool register_command(Command command) {
  registry().push_back(std::move(command));
  return true;
}

const std::vector<Command>& commands() {
  auto& r = registry();
  std::sort(r.begin(), r.end(), [](const Command& a, const Command& b) { return a.name < b.name; });
  return r;
}

static void print_help() {
  std::printf("%s: local LLM inference\n\nusage: brisk COMMAND [options]\n\ncommands:\n", version_line().c_str());
  for (const auto& c : commands()) std::printf("  %-18s %s\n", c.name.c_str(), c.summary.c_str());
  std::printf("\n`brisk COMMAND --help` shows a command's options; docs/cli.md describes them all.\n");
}

static int run_command(const Command& c, const std::vector<std::string>& args) {
  try {
    return c.run(args);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "brisk %s: error: %s (see `brisk %s --help`)\n", c.name.c_str(), e.what(), c.name.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "brisk %s: error: %s\n", c.name.c_str(), e.what());
    return 1;
  }
}

}  // namespace brisk::cli

int main(int argc, char** argv) {
  using namespace brisk::cli;
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    if (args.size() >= 2 && args[0] == "help") {  // brisk help CMD == brisk CMD --help
      for (const auto& c : commands())
        if (c.name == args[1]) return run_command(c, {"--help"});
    }
    print_help();
    return 0;
  }
  if (args[0] == "--version" || args[0] == "-v" || args[0] == "version") {
    std::printf("%s\n", version_line().c_str());
    return 0;
  }
  for (const auto& c : commands())
    if (c.name == args[0]) return run_command(c, std::vector<std::string>(args.begin() + 1, args.end()));
  std::fprintf(stderr, "brisk: error: unknown command '%s' (see `brisk help`)\n", args[0].c_str());
  return 2;
}
