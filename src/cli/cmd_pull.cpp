// `brisk pull MODEL`: downloads a model from the Hugging Face Hub into the shared cache and
// prints its local path (what `brisk run REF` would load).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/args.h"
#include "cli/command.h"
#include "core/error.h"
#include "hub/progress.h"
#include "hub/resolve.h"

namespace {

int cmd_pull(const std::vector<std::string>& args) {
  brisk::HubOptions opt;
  std::string ref, progress;
  int32_t jobs = 0;
  bool quiet = false;
  brisk::cli::ArgParser p("pull", "MODEL [options]",
                          "Downloads a model from the Hugging Face Hub into the local cache and prints its path.");
  p.model(&ref, "org/name (safetensors repo, or a GGUF repo's default quant), org/name:QUANT, "
                "org/name/FILE.gguf, each with an optional @REVISION");
  p.text({"--token"}, &opt.token, "TOKEN", "access token for gated or private repos (default $HF_TOKEN)");
  p.text({"--endpoint"}, &opt.endpoint, "URL", "Hub or mirror (default $HF_ENDPOINT or https://huggingface.co)");
  p.integer({"-j", "--jobs"}, &jobs, 1, 16, "N", "files downloaded at once (default 4)");
  p.flag({"--verify"}, &opt.verify_cached, "re-check the sha256 of files already in the cache");
  p.flag({"--offline"}, &opt.offline, "resolve from the cache only (same as HF_HUB_OFFLINE=1)");
  p.text({"--progress"}, &progress, "MODE", "bar | lines | none (default: bar on a terminal, else lines)");
  p.flag({"-q", "--quiet"}, &quiet, "no progress output");
  p.note("cache: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub");
  if (!p.parse(args)) return 0;
  if (jobs > 0) opt.n_parallel = jobs;
  if (progress == "bar") opt.progress = brisk::HubProgress::bar;
  else if (progress == "lines") opt.progress = brisk::HubProgress::lines;
  else if (progress == "none") opt.progress = brisk::HubProgress::quiet;
  else if (!progress.empty()) brisk::cli::usage_fail("--progress wants bar, lines or none, got '", progress, "'");
  if (quiet) opt.progress = brisk::HubProgress::quiet;
  const brisk::HubPullResult r = brisk::hub_pull(ref, opt, /*allow_cache_fallback=*/false);
  if (opt.progress != brisk::HubProgress::quiet) {
    std::string what = r.format;
    if (!r.quant.empty()) what += " " + r.quant;
    std::fprintf(stderr, "%s@%s (commit %s): %s, %zu file(s), %s downloaded%s\n",
                 r.repo_id.c_str(), r.revision.c_str(), r.commit.substr(0, 12).c_str(),
                 what.c_str(), r.files.size(), brisk::hub::format_bytes(r.bytes_received).c_str(),
                 r.from_cache ? " (from the cache)" : "");
  }
  std::printf("%s\n", r.local_path.c_str());
  return 0;
}

}  // namespace

BRISK_COMMAND("pull", "download a model from the Hugging Face Hub into the local cache", cmd_pull);
