// The huggingface_hub cache layout, shared with the Python tools:
//   CACHE/models--ORG--NAME/blobs/<etag>                 file contents (etag: LFS sha256 or git blob id)
//   CACHE/models--ORG--NAME/blobs/<etag>.incomplete      a download in progress (never used as a file)
//   CACHE/models--ORG--NAME/snapshots/<commit>/<path>    symlink to ../../blobs/<etag> (one more ../ per
//                                                        folder level of <path>)
//   CACHE/models--ORG--NAME/refs/<revision>              the commit hash the revision pointed to
//   CACHE/.locks/models--ORG--NAME/<etag>.lock           flock()ed while the blob is being written
// Everything that becomes visible is made atomically (rename), so a reader sees either nothing
// or a complete file.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace brisk::hub {

// "org/name" -> "models--org--name"
std::string repo_folder_name(const std::string& repo_id);
// "models--org--name" -> "org/name"; nullopt when the folder is not a model repo folder.
std::optional<std::string> repo_id_from_folder(const std::string& folder);

class RepoCache {
 public:
  RepoCache(std::string cache_dir, std::string repo_id);

  const std::string& cache_dir() const { return cache_dir_; }
  const std::string& repo_id() const { return repo_id_; }
  std::string root() const;                            // CACHE/models--org--name
  std::string blob_path(const std::string& blob) const;
  std::string incomplete_path(const std::string& blob) const;
  std::string lock_path(const std::string& blob) const;
  std::string snapshot_dir(const std::string& commit) const;
  std::string snapshot_path(const std::string& commit, const std::string& file) const;

  // Commit a revision points to: the revision itself when it is a commit hash with a
  // snapshot, else refs/<revision>. nullopt when not cached.
  std::optional<std::string> resolve_revision(const std::string& revision) const;
  void write_ref(const std::string& revision, const std::string& commit) const;
  // snapshots/<commit>/<file> -> ../../blobs/<blob>, replacing an existing link atomically.
  void link_snapshot(const std::string& commit, const std::string& file,
                     const std::string& blob) const;
  // Files of a snapshot (repo-relative paths of links and files whose target exists).
  std::vector<std::string> snapshot_files(const std::string& commit) const;

 private:
  std::string cache_dir_;
  std::string repo_id_;
};

// File-system helpers with brisk::Error messages that name the path.
void make_dirs(const std::string& path);
bool path_exists(const std::string& path);
std::optional<uint64_t> file_size(const std::string& path);  // nullopt when absent
// Writes `content` to `path` through a temporary file and rename.
void write_file_atomic(const std::string& path, const std::string& content);

// An exclusive flock() on a lock file (the same lock huggingface_hub's filelock takes).
class FileLock {
 public:
  // Blocks until the lock is held; calls `on_wait` once if another process holds it.
  FileLock(const std::string& path, const std::string& waiting_message);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace brisk::hub
