#include "core/flags.h"

#include <cstdlib>
#include <cstring>
#include <strings.h>

namespace brisk {
namespace {

bool env_true(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return false;
  for (const char* off : {"0", "false", "off", "no"})
    if (strcasecmp(v, off) == 0) return false;
  return true;
}

std::string env_text(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

Flags read_flags() {
  Flags f;
#define BRISK_FLAG(id, env, desc) f.id = env_true(env);
#define BRISK_FLAG_TEXT(id, env, desc) f.id = env_text(env);
#include "core/flags.def"
#undef BRISK_FLAG
#undef BRISK_FLAG_TEXT
  return f;
}

Flags& mutable_flags() {
  static Flags f = read_flags();
  return f;
}

}  // namespace

const Flags& flags() { return mutable_flags(); }
void flags_reload() { mutable_flags() = read_flags(); }

std::vector<FlagInfo> flags_list() {
  std::vector<FlagInfo> out;
  const Flags& f = flags();
#define BRISK_FLAG(id, env, desc) out.push_back({env, desc, f.id, {}});
#define BRISK_FLAG_TEXT(id, env, desc) out.push_back({env, desc, !f.id.empty(), f.id});
#include "core/flags.def"
#undef BRISK_FLAG
#undef BRISK_FLAG_TEXT
  return out;
}

}  // namespace brisk
