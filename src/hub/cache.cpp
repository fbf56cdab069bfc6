#include "hub/cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/error.h"
#include "core/log.h"
#include "hub/reference.h"

namespace fs = std::filesystem;

namespace brisk::hub {

std::string repo_folder_name(const std::string& repo_id) {
  std::string out = "models--";
  for (char c : repo_id) {
    if (c == '/') out += "--";
    else out.push_back(c);
  }
  return out;
}

std::optional<std::string> repo_id_from_folder(const std::string& folder) {
  const std::string prefix = "models--";
  if (folder.rfind(prefix, 0) != 0) return std::nullopt;
  const std::string rest = folder.substr(prefix.size());
  const size_t sep = rest.find("--");
  if (sep == std::string::npos || sep == 0 || sep + 2 >= rest.size()) return std::nullopt;
  return rest.substr(0, sep) + "/" + rest.substr(sep + 2);
}

RepoCache::RepoCache(std::string cache_dir, std::string repo_id)
    : cache_dir_(std::move(cache_dir)), repo_id_(std::move(repo_id)) {}

std::string RepoCache::root() const { return cache_dir_ + "/" + repo_folder_name(repo_id_); }
std::string RepoCache::blob_path(const std::string& blob) const {
  return root() + "/blobs/" + blob;
}
std::string RepoCache::incomplete_path(const std::string& blob) const {
  return blob_path(blob) + ".incomplete";
}
std::string RepoCache::lock_path(const std::string& blob) const {
  return cache_dir_ + "/.locks/" + repo_folder_name(repo_id_) + "/" + blob + ".lock";
}
std::string RepoCache::snapshot_dir(const std::string& commit) const {
  return root() + "/snapshots/" + commit;
}
std::string RepoCache::snapshot_path(const std::string& commit, const std::string& file) const {
  return snapshot_dir(commit) + "/" + file;
}

std::optional<std::string> RepoCache::resolve_revision(const std::string& revision) const {
  if (is_commit_hash(revision) && path_exists(snapshot_dir(revision))) return revision;
  std::ifstream in(root() + "/refs/" + revision);
  if (!in) return std::nullopt;
  std::string commit;
  std::getline(in, commit);
  while (!commit.empty() && (commit.back() == '\n' || commit.back() == '\r' || commit.back() == ' '))
    commit.pop_back();
  if (!is_commit_hash(commit)) {
    log_warn("ignoring ", root(), "/refs/", revision, ": not a commit hash");
    return std::nullopt;
  }
  return commit;
}

void RepoCache::write_ref(const std::string& revision, const std::string& commit) const {
  if (revision == commit) return;
  const std::string path = root() + "/refs/" + revision;
  std::ifstream in(path);
  std::string current;
  if (in && std::getline(in, current) && current == commit) return;
  make_dirs(fs::path(path).parent_path().string());
  write_file_atomic(path, commit);
}

void RepoCache::link_snapshot(const std::string& commit, const std::string& file,
                              const std::string& blob) const {
  const std::string link = snapshot_path(commit, file);
  make_dirs(fs::path(link).parent_path().string());
  std::string target = "../../";
  for (char c : file)
    if (c == '/') target += "../";
  target += "blobs/" + blob;
  std::error_code ec;
  if (fs::is_symlink(link, ec) && fs::read_symlink(link, ec).string() == target) return;
  std::random_device rd;
  const std::string tmp = link + ".tmp" + std::to_string(rd());
  fs::create_symlink(target, tmp, ec);
  BRISK_CHECK(!ec, "cannot create the link ", tmp, ": ", ec.message());
  fs::rename(tmp, link, ec);
  if (ec) {
    fs::remove(tmp);
    fail("cannot place the link ", link, ": ", ec.message());
  }
}

std::vector<std::string> RepoCache::snapshot_files(const std::string& commit) const {
  std::vector<std::string> out;
  const fs::path dir = snapshot_dir(commit);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec)) continue;
    if (!fs::exists(it->path(), ec)) continue;  // dangling link: blob removed
    out.push_back(it->path().lexically_relative(dir).generic_string());
  }
  return out;
}

void make_dirs(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  BRISK_CHECK(!ec, "cannot create the folder ", path, ": ", ec.message());
}

bool path_exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

std::optional<uint64_t> file_size(const std::string& path) {
  std::error_code ec;
  const auto n = fs::file_size(path, ec);
  if (ec) return std::nullopt;
  return uint64_t(n);
}

void write_file_atomic(const std::string& path, const std::string& content) {
  std::random_device rd;
  const std::string tmp = path + ".tmp" + std::to_string(rd());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    BRISK_CHECK(out, "cannot write ", tmp, ": ", std::strerror(errno));
    out << content;
    out.flush();
    BRISK_CHECK(out, "cannot write ", tmp, ": ", std::strerror(errno));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    fail("cannot write ", path, ": ", ec.message());
  }
}

FileLock::FileLock(const std::string& path, const std::string& waiting_message) {
  make_dirs(fs::path(path).parent_path().string());
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  BRISK_CHECK(fd_ >= 0, "cannot open the lock file ", path, ": ", std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  if (errno == EWOULDBLOCK && !waiting_message.empty()) log_warn(waiting_message);
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    ::close(fd_);
    fail("cannot lock ", path, ": ", std::strerror(err));
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
}

}  // namespace brisk::hub
