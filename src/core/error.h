// Errors: the library throws brisk::Error; front ends (CLI, HTTP) convert it to a message or
// a 4xx/5xx body. Messages say where (file, offset, tensor, key) and what is wrong.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace brisk {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// str_cat("tensor ", name, " has ", n, " dims") -> std::string
template <class... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

template <class... Args>
[[noreturn]] void fail(Args&&... args) {
  throw Error(str_cat(std::forward<Args>(args)...));
}

}  // namespace brisk

// Checks a condition on untrusted or caller-provided data; throws brisk::Error when false.
#define BRISK_CHECK(cond, ...)                       \
  do {                                               \
    if (!(cond)) ::brisk::fail(__VA_ARGS__);         \
  } while (0)
