// Downloads files of one repo commit into the cache (see cache.h for the layout).
// Per file: skip when the blob is present with the right size; else take the blob's lock
// (another process downloading the same blob makes this one wait, then find it done), resume
// blobs/<etag>.incomplete with an HTTP Range request, verify size and, for LFS files, the
// sha256, and only then rename it to blobs/<etag> and link it from the snapshot. A checksum
// mismatch discards the partial file and downloads it again once; a cut transfer is resumed up
// to kDownloadAttempts times. Files are fetched n_parallel at a time.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "hub/api.h"
#include "hub/cache.h"
#include "hub/options.h"

namespace brisk::hub {

inline constexpr int kDownloadAttempts = 5;

struct DownloadStats {
  uint64_t bytes_received = 0;   // over the network in this run
  size_t files_downloaded = 0;
  size_t files_cached = 0;       // already present
};

DownloadStats download_files(const HttpClient& http, const RepoCache& cache,
                             const std::string& revision, const std::string& commit,
                             const std::vector<RepoFile>& files, const HubOptions& opt);

}  // namespace brisk::hub
