// Run-time switches read once from the environment. The full list with descriptions is in
// flags.def; `brisk inspect --flags` prints it. A flag is on when its variable is set to a
// value other than "", "0", "false", "off" or "no"; a text switch holds the variable's value.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace brisk {

struct Flags {
#define BRISK_FLAG(id, env, desc) bool id = false;
#define BRISK_FLAG_TEXT(id, env, desc) std::string id;
#include "core/flags.def"
#undef BRISK_FLAG
#undef BRISK_FLAG_TEXT
};

// The process-wide flags (read from the environment on first use).
const Flags& flags();
// Re-reads the environment (tests use this after setenv).
void flags_reload();

struct FlagInfo {
  std::string_view env_name;
  std::string_view description;
  bool value;             // on (a text switch: set)
  std::string_view text;  // a text switch's value ("" for on / off switches)
};
std::vector<FlagInfo> flags_list();

}  // namespace brisk
