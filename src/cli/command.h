// The `brisk` binary is a set of subcommands; each lives in its own cmd_*.cpp and registers
// itself with BRISK_COMMAND. A command gets its arguments after the subcommand name, reads
// them with cli::ArgParser (args.h) and returns the process exit code. An error escaping a
// command is printed as one line by main.cpp: UsageError exits 2, any other error 1.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace brisk::cli {

using CommandFn = std::function<int(const std::vector<std::string>& args)>;

struct Command {
  std::string name;
  std::string summary;  // one line for `brisk help`
  CommandFn run;
};

bool register_command(Command command);
const std::vector<Command>& commands();

// "brisk 0.1.0 (commit 6d3d0fb)": the version and the commit the build was configured at.
std::string version_line();

}  // namespace brisk::cli

#define BRISK_CLI_CONCAT2(a, b) a##b
#define BRISK_CLI_CONCAT(a, b) BRISK_CLI_CONCAT2(a, b)
#define BRISK_COMMAND(name, summary, fn)                                                 \
  static const bool BRISK_CLI_CONCAT(brisk_command_registered_, __LINE__) =              \
      ::brisk::cli::register_command({name, summary, fn})
