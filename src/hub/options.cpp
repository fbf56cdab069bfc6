#include "hub/options.h"

#include <cstdlib>
#include <fstream>

#include "core/flags.h"

namespace brisk {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::string(v) : fallback;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  while (!s.empty() && s.front() == ' ') s.erase(s.begin());
  return s;
}

}  // namespace

HubOptions hub_options_from_env(HubOptions opt) {
  const std::string home = env_or("HOME", "");
  const std::string hf_home = env_or("HF_HOME", env_or("XDG_CACHE_HOME", home + "/.cache") +
                                                    "/huggingface");
  if (opt.endpoint.empty()) opt.endpoint = env_or("HF_ENDPOINT", "https://huggingface.co");
  while (!opt.endpoint.empty() && opt.endpoint.back() == '/') opt.endpoint.pop_back();
  if (opt.cache_dir.empty()) opt.cache_dir = env_or("HF_HUB_CACHE", hf_home + "/hub");
  if (opt.token.empty()) opt.token = env_or("HF_TOKEN", "");
  if (opt.token.empty()) {
    std::ifstream in(env_or("HF_TOKEN_PATH", hf_home + "/token"));
    std::string line;
    if (in && std::getline(in, line)) opt.token = trim(line);
  }
  if (flags().hub_offline) opt.offline = true;
  if (opt.n_parallel < 1) opt.n_parallel = 1;
  if (opt.n_parallel > 16) opt.n_parallel = 16;
  return opt;
}

}  // namespace brisk
