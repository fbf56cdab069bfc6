// brisk: command dispatcher. `brisk help` lists the commands.
#include <algorithm>
#include <cstdio>
#include <exception>

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
  std::printf("brisk %s: local LLM inference\n\nusage: brisk COMMAND [options]\n\ncommands:\n",
              BRISK_VERSION);
  for (const auto& c : commands()) std::printf("  %-12s %s\n", c.name.c_str(), c.summary.c_str());
  std::printf("\n`brisk COMMAND --help` shows a command's options.\n");
}

}  // namespace brisk::cli

int main(int argc, char** argv) {
  using namespace brisk::cli;
  if (argc < 2) {
    print_help();
    return 2;
  }
  const std::string name = argv[1];
  if (name == "help" || name == "--help" || name == "-h") {
    print_help();
    return 0;
  }
  if (name == "--version" || name == "version") {
    std::printf("brisk %s\n", BRISK_VERSION);
    return 0;
  }
  for (const auto& c : commands()) {
    if (c.name != name) continue;
    std::vector<std::string> args(argv + 2, argv + argc);
    try {
      return c.run(args);
    } catch (const brisk::Error& e) {
      std::fprintf(stderr, "brisk %s: error: %s\n", name.c_str(), e.what());
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "brisk %s: error: %s\n", name.c_str(), e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "brisk: unknown command '%s' (see `brisk help`)\n", name.c_str());
  return 2;
}
