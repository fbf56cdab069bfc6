#include "hub/cache_scan.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "formats/gguf.h"
#include "hub/cache.h"
#include "hub/reference.h"
#include "hub/select.h"

namespace fs = std::filesystem;

namespace brisk::hub {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string basename(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::vector<std::string> list_dir(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// general.architecture of a GGUF file (metadata only; tensor data stays unmapped until read);
// "" when the file is not a readable GGUF.
std::string gguf_architecture(const std::string& path) {
  try {
    return gguf::File::open(path, MappedFile::Mode::mmap).architecture();
  } catch (const Error&) {
    return "";
  }
}

std::string config_model_type(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  try {
    const auto j = nlohmann::json::parse(in);
    if (j.is_object() && j.contains("model_type") && j["model_type"].is_string())
      return j["model_type"].get<std::string>();
  } catch (const std::exception&) {
  }
  return "";
}

// Snapshot commits, newest first (by folder modification time).
std::vector<std::string> snapshots_newest_first(const RepoCache& cache) {
  std::vector<std::pair<fs::file_time_type, std::string>> snaps;
  std::error_code ec;
  for (const auto& name : list_dir(cache.root() + "/snapshots"))
    snaps.push_back({fs::last_write_time(cache.root() + "/snapshots/" + name, ec), name});
  std::sort(snaps.begin(), snaps.end(), std::greater<>());
  std::vector<std::string> out;
  for (auto& s : snaps) out.push_back(s.second);
  return out;
}

// Blobs still reached from any snapshot link.
std::set<std::string> referenced_blobs(const RepoCache& cache) {
  std::set<std::string> used;
  std::error_code ec;
  const fs::path snaps = cache.root() + "/snapshots";
  for (auto it = fs::recursive_directory_iterator(snaps, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_symlink(ec)) continue;
    const fs::path target = fs::read_symlink(it->path(), ec);
    if (!ec) used.insert(target.filename().string());
  }
  return used;
}

uint64_t remove_unreferenced_blobs(const RepoCache& cache, std::vector<std::string>& removed) {
  const std::set<std::string> used = referenced_blobs(cache);
  uint64_t freed = 0;
  for (const auto& name : list_dir(cache.root() + "/blobs")) {
    if (used.count(name) || ends_with(name, ".incomplete")) continue;
    const std::string p = cache.root() + "/blobs/" + name;
    freed += file_size(p).value_or(0);
    std::error_code ec;
    fs::remove(p, ec);
    if (!ec) removed.push_back("blobs/" + name);
  }
  return freed;
}

uint64_t tree_size(const fs::path& dir) {
  uint64_t n = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file(ec) && !it->is_symlink(ec)) n += it->file_size(ec);
  return n;
}

}  // namespace

std::vector<CachedModel> scan_cache(const std::string& cache_dir) {
  std::vector<CachedModel> out;
  for (const auto& folder : list_dir(cache_dir)) {
    const auto repo_id = repo_id_from_folder(folder);
    if (!repo_id) continue;
    RepoCache cache(cache_dir, *repo_id);
    CachedModel m;
    m.repo_id = *repo_id;
    m.path = cache.root();
    for (const auto& name : list_dir(cache.root() + "/blobs")) {
      const std::string p = cache.root() + "/blobs/" + name;
      if (ends_with(name, ".incomplete")) {
        ++m.n_incomplete;
        continue;
      }
      struct stat st;
      if (::stat(p.c_str(), &st) != 0) continue;
      m.size_bytes += uint64_t(st.st_size);
      m.last_used = std::max(m.last_used, st.st_atime);
    }
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(cache.root() + "/refs", ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
      if (it->is_regular_file(ec))
        m.revisions.push_back(it->path().lexically_relative(cache.root() + "/refs").generic_string());
    bool gguf = false, safetensors = false;
    std::set<std::string> quants;
    for (const auto& commit : snapshots_newest_first(cache)) {
      for (const auto& f : cache.snapshot_files(commit)) {
        const std::string p = cache.snapshot_path(commit, f);
        if (ends_with(f, ".gguf")) {
          if (basename(f).rfind("mmproj", 0) == 0) continue;
          gguf = true;
          const std::string q = gguf_quant_label(f);
          if (!q.empty()) quants.insert(q);
          if (m.architecture.empty()) {
            const auto shard = parse_shard_name(f);
            if (!shard || shard->index == 1) m.architecture = gguf_architecture(p);
          }
        } else if (ends_with(f, ".safetensors")) {
          safetensors = true;
        } else if (f == "config.json" && m.architecture.empty()) {
          m.architecture = config_model_type(p);
        }
      }
    }
    m.format = gguf && safetensors ? "gguf+safetensors" : gguf ? "gguf" : safetensors ? "safetensors" : "other";
    m.quants.assign(quants.begin(), quants.end());
    out.push_back(std::move(m));
  }
  return out;
}

RemoveResult remove_from_cache(const std::string& cache_dir, const std::string& ref_text) {
  const HubRef ref = parse_hub_ref(ref_text);
  RepoCache cache(cache_dir, ref.repo_id);
  BRISK_CHECK(path_exists(cache.root()), "model ", ref.repo_id, " is not in the cache (",
              cache_dir, ")");
  RemoveResult result;
  std::error_code ec;
  if (ref.quant.empty() && ref.file.empty() && !ref.revision_given) {
    result.bytes_freed = tree_size(cache.root());
    fs::remove_all(cache.root(), ec);
    BRISK_CHECK(!ec, "cannot remove ", cache.root(), ": ", ec.message());
    fs::remove_all(cache_dir + "/.locks/" + repo_folder_name(ref.repo_id), ec);
    result.removed.push_back(cache.root());
    return result;
  }
  std::vector<std::string> commits;
  if (ref.revision_given) {
    const auto commit = cache.resolve_revision(ref.revision);
    BRISK_CHECK(commit.has_value(), "revision ", ref.revision, " of ", ref.repo_id,
                " is not in the cache");
    commits.push_back(*commit);
  } else {
    commits = snapshots_newest_first(cache);
  }
  for (const auto& commit : commits) {
    if (ref.quant.empty() && ref.file.empty()) {
      fs::remove_all(cache.snapshot_dir(commit), ec);
      result.removed.push_back("snapshots/" + commit);
      for (const auto& name : list_dir(cache.root() + "/refs")) {
        if (cache.resolve_revision(name) == commit) fs::remove(cache.root() + "/refs/" + name, ec);
      }
      continue;
    }
    const auto files = cache.snapshot_files(commit);
    Selection sel;
    try {
      sel = select_files(ref, files, ref.repo_id + "@" + commit.substr(0, 8) + " (cached)");
    } catch (const Error&) {
      continue;  // this snapshot has none of it
    }
    for (const auto& f : sel.files) {
      fs::remove(cache.snapshot_path(commit, f), ec);
      if (!ec) result.removed.push_back(f);
    }
  }
  BRISK_CHECK(!result.removed.empty(), "nothing in the cache matches ", ref_text);
  result.bytes_freed += remove_unreferenced_blobs(cache, result.removed);
  // A repo left without a file in any snapshot holds nothing a user can load: remove what is
  // left of it (refs, empty folders, partial downloads) so that `brisk list` no longer shows it.
  const std::vector<std::string> left = snapshots_newest_first(cache);
  if (std::all_of(left.begin(), left.end(), [&](const std::string& c) { return cache.snapshot_files(c).empty(); })) {
    result.bytes_freed += tree_size(cache.root());
    fs::remove_all(cache.root(), ec);
    BRISK_CHECK(!ec, "cannot remove ", cache.root(), ": ", ec.message());
    fs::remove_all(cache_dir + "/.locks/" + repo_folder_name(ref.repo_id), ec);
    result.removed.push_back(cache.root());
  }
  return result;
}

}  // namespace brisk::hub
