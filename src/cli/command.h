// The `brisk` binary is a set of subcommands; each lives in its own cmd_*.cpp and registers
// itself with BRISK_COMMAND. A command gets its arguments after the subcommand name and
// returns the process exit code. brisk::Error escaping a command is printed as one line.
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

}  // namespace brisk::cli

#define BRISK_CLI_CONCAT2(a, b) a##b
#define BRISK_CLI_CONCAT(a, b) BRISK_CLI_CONCAT2(a, b)
#define BRISK_COMMAND(name, summary, fn)                                                 \
  static const bool BRISK_CLI_CONCAT(brisk_command_registered_, __LINE__) =              \
      ::brisk::cli::register_command({name, summary, fn})
