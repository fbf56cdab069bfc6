// Sets an environment switch (flags.def) for one scope and reloads the flags on entry and exit.
#pragma once
#include <cstdlib>

#include "core/flags.h"

namespace brisk {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    setenv(name, value, 1);
    flags_reload();
  }
  ~ScopedEnv() {
    unsetenv(name_);
    flags_reload();
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

}  // namespace brisk
