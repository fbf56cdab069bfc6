// `brisk info`: the build (version, commit, CUDA), the CPU's features and the run-time
// switches; version_line() for `brisk --version`. BRISK_COMMIT is `git describe` at configure
// time (CMakeLists.txt), "unknown" for a build outside git.
#include <cstdio>

#include "cli/args.h"
#include "cli/command.h"
#include "core/cpu_features.h"
#include "core/flags.h"
#include "kernels/cpu/kernel_sets.h"

#ifndef BRISK_COMMIT
#define BRISK_COMMIT "unknown"
#endif

namespace brisk::cli {

std::string version_line() { return str_cat("brisk ", BRISK_VERSION, " (commit ", BRISK_COMMIT, ")"); }

}  // namespace brisk::cli

namespace {

int cmd_info(const std::vector<std::string>& args) {
  brisk::cli::ArgParser p("info", "", "the build, the CPU's features and the run-time switches (environment)");
  if (!p.parse(args)) return 0;
  std::printf("%s\n", brisk::cli::version_line().c_str());
  std::printf("cpu: %s\n", brisk::cpu_features_string().c_str());
  if (!brisk::flags().cpu_mask.empty())
    std::printf("cpu hardware: %s (masked by BRISK_CPU_MASK=%s)\n",
                brisk::cpu_features_string(brisk::cpu_features_hardware()).c_str(), brisk::flags().cpu_mask.c_str());
  std::printf("cpu kernels: %s\n", brisk::kernels::cpu_kernel_sets_string().c_str());
#ifdef BRISK_HAVE_CUDA
  std::printf("cuda: built\n");
#else
  std::printf("cuda: not built\n");
#endif
  std::printf("switches (environment):\n");
  for (const auto& f : brisk::flags_list())
    std::printf("  %-24s %-3s %s\n", std::string(f.env_name).c_str(),
                f.text.empty() ? (f.value ? "on" : "off") : std::string(f.text).c_str(),
                std::string(f.description).c_str());
  return 0;
}

}  // namespace

BRISK_COMMAND("info", "show the build, CPU features and run-time switches", cmd_info);
