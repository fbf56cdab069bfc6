// `brisk rm REF...`: removes a model from the Hugging Face cache: the whole repo (org/name),
// one revision (org/name@rev), or one quant's files (org/name:QUANT, org/name/FILE).
#include <cstdio>
#include <string>

#include "cli/command.h"
#include "core/error.h"
#include "hub/cache_scan.h"
#include "hub/options.h"
#include "hub/progress.h"

namespace {

int cmd_rm(const std::vector<std::string>& args) {
  std::vector<std::string> refs;
  for (const auto& a : args) {
    if (a == "-h" || a == "--help") {
      std::puts("usage: brisk rm REF...\n"
                "  org/name          remove the whole repo from the cache\n"
                "  org/name@REV      remove one revision's snapshot\n"
                "  org/name:QUANT    remove one GGUF quant's files\n"
                "  org/name/FILE     remove one file");
      return 0;
    }
    BRISK_CHECK(a.empty() || a[0] != '-', "unknown option ", a, " (see `brisk rm --help`)");
    refs.push_back(a);
  }
  if (refs.empty()) {
    std::fputs("usage: brisk rm REF... (see `brisk rm --help`)\n", stderr);
    return 2;
  }
  const brisk::HubOptions opt = brisk::hub_options_from_env({});
  for (const auto& ref : refs) {
    const auto r = brisk::hub::remove_from_cache(opt.cache_dir, ref);
    std::printf("removed %s (%zu item(s), %s freed)\n", ref.c_str(), r.removed.size(),
                brisk::hub::format_bytes(r.bytes_freed).c_str());
  }
  return 0;
}

}  // namespace

BRISK_COMMAND("rm", "remove a model (or one quant of it) from the local Hugging Face cache", cmd_rm);
