#include "hub/resolve.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "core/log.h"
#include "hub/api.h"
#include "hub/cache.h"
#include "hub/download.h"
#include "hub/reference.h"
#include "hub/select.h"

namespace brisk {
namespace {

using namespace brisk::hub;

std::string local_path_of(const RepoCache& cache, const std::string& commit, const Selection& sel) {
  return sel.entry.empty() ? cache.snapshot_dir(commit) : cache.snapshot_path(commit, sel.entry);
}

// Records the use of the files (the access time of their blobs, which `brisk list` and
// huggingface_hub's cache scan report as last use).
void mark_used(const RepoCache& cache, const std::string& commit, const std::vector<std::string>& files) {
  const struct timespec times[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
  for (const auto& f : files) ::utimensat(AT_FDCWD, cache.snapshot_path(commit, f).c_str(), times, 0);
}

HubPullResult from_cache(const HubRef& ref, const HubOptions& opt, const std::string& why) {
  RepoCache cache(opt.cache_dir, ref.repo_id);
  const auto commit = cache.resolve_revision(ref.revision);
  if (!commit)
    fail("model ", ref.to_string(), " is not in the cache (", opt.cache_dir, ") and ", why,
         "; download it first with `brisk pull ", ref.to_string(), "` while online");
  const std::string where = ref.repo_id + "@" + ref.revision + " (cached)";
  Selection sel;
  try {
    sel = select_files(ref, cache.snapshot_files(*commit), where);
  } catch (const Error& e) {
    fail(e.what(), "; ", why);
  }
  for (const auto& f : sel.files)
    BRISK_CHECK(path_exists(cache.snapshot_path(*commit, f)), "model ", ref.to_string(),
                " is only partly in the cache (", f, " is missing) and ", why);
  mark_used(cache, *commit, sel.files);
  HubPullResult r;
  r.local_path = local_path_of(cache, *commit, sel);
  r.repo_id = ref.repo_id;
  r.revision = ref.revision;
  r.commit = *commit;
  r.format = sel.format;
  r.quant = sel.quant;
  r.files = sel.files;
  r.from_cache = true;
  return r;
}

}  // namespace

HubPullResult hub_pull(const std::string& ref_text, const HubOptions& opt_in,
                       bool allow_cache_fallback) {
  const HubOptions opt = hub_options_from_env(opt_in);
  const HubRef ref = parse_hub_ref(ref_text);
  if (opt.offline) return from_cache(ref, opt, "offline mode is on (HF_HUB_OFFLINE)");
  HttpClient http(opt.endpoint, opt.token);
  RepoInfo info;
  try {
    info = fetch_repo_info(http, ref.repo_id, ref.revision);
  } catch (const NetworkError& e) {
    if (!allow_cache_fallback) throw;
    RepoCache cache(opt.cache_dir, ref.repo_id);
    if (!cache.resolve_revision(ref.revision)) throw;
    log_warn(e.what());
    log_warn("using the cached copy of ", ref.to_string());
    return from_cache(ref, opt, "the Hub cannot be reached");
  }
  std::vector<std::string> paths;
  for (const auto& f : info.files) paths.push_back(f.path);
  const Selection sel = select_files(ref, paths, ref.repo_id + "@" + ref.revision);
  std::vector<RepoFile> wanted;
  for (const auto& f : info.files)
    if (std::find(sel.files.begin(), sel.files.end(), f.path) != sel.files.end()) wanted.push_back(f);
  RepoCache cache(opt.cache_dir, ref.repo_id);
  const DownloadStats stats = download_files(http, cache, ref.revision, info.commit, wanted, opt);
  mark_used(cache, info.commit, sel.files);
  HubPullResult r;
  r.local_path = local_path_of(cache, info.commit, sel);
  r.repo_id = ref.repo_id;
  r.revision = ref.revision;
  r.commit = info.commit;
  r.format = sel.format;
  r.quant = sel.quant;
  r.files = sel.files;
  r.bytes_received = stats.bytes_received;
  r.files_downloaded = stats.files_downloaded;
  return r;
}

std::string hub_resolve_model(const std::string& ref, const HubOptions& opt) {
  std::error_code ec;
  if (!ref.empty() && std::filesystem::exists(ref, ec)) return ref;
  if (ref.rfind("~/", 0) == 0) {
    const char* home = std::getenv("HOME");
    const std::string expanded = std::string(home ? home : "") + ref.substr(1);
    if (home && std::filesystem::exists(expanded, ec)) return expanded;
  }
  if (looks_like_local_path(ref)) fail("model path ", ref, " does not exist");
  return hub_pull(ref, opt, /*allow_cache_fallback=*/true).local_path;
}

}  // namespace brisk
