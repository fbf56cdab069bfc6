// Sets an environment switch (flags.def) for one scope and reloads the flags on entry and exit;
// on exit the variable gets back the value it had (a whole test run may be under a switch, as
// ctest's isa.level.* runs are under BRISK_CPU_MASK).
#pragma once
#include <cstdlib>
#include <optional>
#include <string>

#include "core/flags.h"

namespace brisk {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
    flags_reload();
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
    flags_reload();
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace brisk
