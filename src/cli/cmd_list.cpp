// `brisk list`: the models in the Hugging Face cache (size, format, quants, architecture,
// last use). `--json` prints the same as a JSON array.
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/args.h"
#include "cli/command.h"
#include "core/error.h"
#include "hub/cache_scan.h"
#include "hub/options.h"
#include "hub/progress.h"

namespace {

std::string format_time(std::time_t t) {
  if (t == 0) return "-";
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out.empty() ? "-" : out;
}

int cmd_list(const std::vector<std::string>& args) {
  bool json = false;
  brisk::cli::ArgParser p("list", "[--json]", "Lists the models in the Hugging Face cache ($HF_HUB_CACHE, else "
                                              "$HF_HOME/hub, else ~/.cache/huggingface/hub).");
  p.flag({"--json"}, &json, "the same as a JSON array");
  if (!p.parse(args)) return 0;
  const brisk::HubOptions opt = brisk::hub_options_from_env({});
  const auto models = brisk::hub::scan_cache(opt.cache_dir);
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& m : models)
      out.push_back({{"repo_id", m.repo_id}, {"path", m.path}, {"size_bytes", m.size_bytes},
                     {"format", m.format}, {"quants", m.quants}, {"architecture", m.architecture},
                     {"last_used", int64_t(m.last_used)}, {"revisions", m.revisions},
                     {"incomplete_downloads", m.n_incomplete}});
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  if (models.empty()) {
    std::printf("no models in %s\n", opt.cache_dir.c_str());
    return 0;
  }
  std::printf("%-44s %-12s %-18s %-12s %10s  %s\n", "MODEL", "FORMAT", "QUANTS", "ARCH", "SIZE",
              "LAST USED");
  for (const auto& m : models) {
    std::string name = m.repo_id;
    if (m.n_incomplete) name += " (partial)";
    std::printf("%-44s %-12s %-18s %-12s %10s  %s\n", name.c_str(), m.format.c_str(),
                join(m.quants).c_str(), m.architecture.empty() ? "-" : m.architecture.c_str(),
                brisk::hub::format_bytes(m.size_bytes).c_str(), format_time(m.last_used).c_str());
  }
  return 0;
}

}  // namespace

BRISK_COMMAND("list", "list the models in the local Hugging Face cache", cmd_list);
