// The Hub's HTTP API, the two routes brisk needs:
//   GET {endpoint}/api/models/{repo}/revision/{rev}?blobs=true
//       -> {"sha": commit, "siblings": [{"rfilename", "size", "blobId", "lfs": {"sha256","size"}}]}
//   GET|HEAD {endpoint}/{repo}/resolve/{rev}/{path}
//       -> the content, or a redirect to storage; headers X-Repo-Commit, ETag / X-Linked-Etag,
//          X-Linked-Size. Errors carry X-Error-Code (RepoNotFound, RevisionNotFound,
//          EntryNotFound, GatedRepo) and X-Error-Message.
// Every field read from the answer is validated (paths, hashes, sizes) before use.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hub/http.h"

namespace brisk::hub {

struct RepoFile {
  std::string path{};                // repo-relative, checked with is_safe_repo_path
  std::optional<uint64_t> size{};    // bytes, when the Hub gave it
  std::string blob_id{};             // git blob id (40 hex), "" when not given
  std::string lfs_sha256;          // 64 hex for LFS files, else ""
  // Name of the blob in the cache: the LFS sha256, else the git blob id ("" when unknown).
  std::string etag() const { return lfs_sha256.empty() ? blob_id : lfs_sha256; }
};

struct RepoInfo {
  std::string repo_id{};
  std::string commit{};              // 40 hex
  std::vector<RepoFile> files{};
};

// Parses the JSON of the revision route; brisk::Error naming `where` on malformed input.
RepoInfo parse_repo_info(const std::string& json_text, const std::string& repo_id,
                         const std::string& where);

RepoInfo fetch_repo_info(const HttpClient& http, const std::string& repo_id,
                         const std::string& revision);

std::string resolve_url(const std::string& endpoint, const std::string& repo_id,
                        const std::string& revision, const std::string& path);

// Turns a failed answer into the message a user understands (repo not found, gated without
// a token, revision or file not found, server error) and throws it. NetworkError for
// transport failures.
[[noreturn]] void throw_hub_error(const HttpClient& http, const HttpResponse& resp,
                                  const std::string& repo_id, const std::string& revision,
                                  const std::string& what);

// Strips quotes and a weak-validator prefix from an ETag and returns it when it is a safe blob
// name (hex, 40 or 64 digits); "" otherwise.
std::string normalize_etag(const std::string& etag);

}  // namespace brisk::hub
