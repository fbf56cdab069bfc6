// `brisk pull REF`: downloads a model from the Hugging Face Hub into the shared cache and
// prints its local path (what `brisk run REF` would load).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/command.h"
#include "core/error.h"
#include "hub/progress.h"
#include "hub/resolve.h"

namespace {

const char* kUsage =
    "usage: brisk pull REF [options]\n"
    "  REF: org/name            safetensors repo, or GGUF repo (default quant)\n"
    "       org/name:QUANT      GGUF file(s) of that quant, e.g. Qwen/Qwen3-0.6B-GGUF:Q8_0\n"
    "       org/name/FILE.gguf  one file of the repo\n"
    "       ...@REVISION        branch, tag or commit (default main)\n"
    "options:\n"
    "  --token TOKEN      access token for gated or private repos (default $HF_TOKEN)\n"
    "  --endpoint URL     Hub or mirror (default $HF_ENDPOINT or https://huggingface.co)\n"
    "  --jobs N           files downloaded at once (default 4)\n"
    "  --verify           re-check the sha256 of files already in the cache\n"
    "  --offline          resolve from the cache only (same as HF_HUB_OFFLINE=1)\n"
    "  --progress MODE    bar | lines | none (default: bar on a terminal, else lines)\n"
    "  -q, --quiet        no progress output\n"
    "cache: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub\n";

int cmd_pull(const std::vector<std::string>& args) {
  brisk::HubOptions opt;
  std::string ref;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      BRISK_CHECK(i + 1 < args.size(), "option ", a, " needs a value");
      return args[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--token") {
      opt.token = value();
    } else if (a == "--endpoint") {
      opt.endpoint = value();
    } else if (a == "--jobs" || a == "-j") {
      const std::string& v = value();
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      BRISK_CHECK(end && *end == '\0' && n >= 1 && n <= 16, "--jobs wants 1..16, got '", v, "'");
      opt.n_parallel = int32_t(n);
    } else if (a == "--verify") {
      opt.verify_cached = true;
    } else if (a == "--offline") {
      opt.offline = true;
    } else if (a == "--progress") {
      const std::string& v = value();
      if (v == "bar") opt.progress = brisk::HubProgress::bar;
      else if (v == "lines") opt.progress = brisk::HubProgress::lines;
      else if (v == "none") opt.progress = brisk::HubProgress::quiet;
      else brisk::fail("--progress wants bar, lines or none, got '", v, "'");
    } else if (a == "-q" || a == "--quiet") {
      opt.progress = brisk::HubProgress::quiet;
    } else if (!a.empty() && a[0] == '-') {
      brisk::fail("unknown option ", a, " (see `brisk pull --help`)");
    } else {
      BRISK_CHECK(ref.empty(), "one model reference at a time (got '", ref, "' and '", a, "')");
      ref = a;
    }
  }
  if (ref.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
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
