// `brisk rm MODEL...`: removes a model from the Hugging Face cache: the whole repo (org/name),
// one revision (org/name@rev), or one quant's files (org/name:QUANT, org/name/FILE).
#include <cstdio>
#include <string>

#include "cli/args.h"
#include "cli/command.h"
#include "core/error.h"
#include "hub/cache_scan.h"
#include "hub/options.h"
#include "hub/progress.h"

namespace {

int cmd_rm(const std::vector<std::string>& args) {
  std::vector<std::string> refs;
  brisk::cli::ArgParser p("rm", "MODEL... [options]", "Removes models (or one revision, quant or file) from the "
                                                       "local Hugging Face cache.");
  p.texts({"-m", "--model"}, &refs, "MODEL", "a model to remove (repeatable; as the positionals)");
  std::vector<std::string> positional;
  p.positionals("MODEL", &positional, "", 0);
  p.note("MODEL: org/name (the whole repo), org/name@REV (one revision's snapshot), org/name:QUANT (one GGUF\n"
         "quant's files), org/name/FILE (one file).");
  if (!p.parse(args)) return 0;
  refs.insert(refs.end(), positional.begin(), positional.end());
  if (refs.empty()) brisk::cli::usage_fail("a model is required");
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
