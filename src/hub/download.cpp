#include "hub/download.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>

#include "core/log.h"
#include "hub/progress.h"
#include "hub/sha256.h"

namespace fs = std::filesystem;

namespace brisk::hub {
namespace {

// Fills in the blob name and size from a HEAD of the resolve URL when the file list lacked
// them (mirrors that do not implement ?blobs=true).
void complete_metadata(const HttpClient& http, const std::string& repo_id,
                       const std::string& commit, RepoFile& f) {
  if (!f.etag().empty() && f.size) return;
  const HttpResponse resp = http.request({.url = resolve_url(http.endpoint(), repo_id, commit, f.path),
                                          .head = true,
                                          .follow_redirects = false});
  if (resp.transport_error != 0 || resp.status >= 400)
    throw_hub_error(http, resp, repo_id, commit, "file " + f.path);
  if (f.etag().empty()) {
    std::string etag = resp.header("x-linked-etag");
    if (etag.empty()) etag = resp.header("etag");
    const std::string blob = normalize_etag(etag);
    BRISK_CHECK(!blob.empty(), "the Hub gave no usable ETag for ", repo_id, "/", f.path);
    if (blob.size() == 64) f.lfs_sha256 = blob;
    else f.blob_id = blob;
  }
  if (!f.size) {
    std::string size = resp.header("x-linked-size");
    if (size.empty() && resp.status < 300) size = resp.header("content-length");
    if (!size.empty()) {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(size.c_str(), &end, 10);
      if (end && *end == '\0') f.size = v;
    }
  }
}

void check_disk_space(const std::string& dir, uint64_t need, const std::string& what) {
  struct statvfs st;
  if (statvfs(dir.c_str(), &st) != 0) return;
  const uint64_t avail = uint64_t(st.f_bavail) * uint64_t(st.f_frsize);
  BRISK_CHECK(avail >= need, "disk full: ", what, " needs ", format_bytes(need), " but only ",
              format_bytes(avail), " is free in ", dir,
              "; free some space (`brisk rm` removes cached models) or set HF_HUB_CACHE to "
              "another disk");
}

enum class TransferEnd { complete, retry_resume, restart };

class FileFetcher {
 public:
  FileFetcher(const HttpClient& http, const RepoCache& cache, const std::string& commit,
              const RepoFile& f, Progress& progress, std::function<bool(uint64_t have)> report)
      : http_(http), cache_(cache), commit_(commit), f_(f), progress_(progress),
        report_(std::move(report)), blob_(f.etag()), partial_(cache.incomplete_path(blob_)) {}

  // Downloads into blobs/<etag>.incomplete and renames it to blobs/<etag> once verified.
  uint64_t run() {
    int checksum_failures = 0;
    for (int attempt = 1;; ++attempt) {
      const TransferEnd end = transfer_once();
      if (end == TransferEnd::complete) {
        const std::string why = verify();
        if (why.empty()) break;
        ++checksum_failures;
        std::error_code ec;
        fs::remove(partial_, ec);
        progress_.rewind(have_);
        BRISK_CHECK(checksum_failures < 2, "download of ", cache_.repo_id(), "/", f_.path,
                    " failed its integrity check twice (", why,
                    "); the Hub or a proxy is serving a damaged file");
        progress_.message(str_cat("discarding ", f_.path, ": ", why, "; downloading it again"));
        continue;
      }
      if (end == TransferEnd::restart) {
        std::error_code ec;
        fs::remove(partial_, ec);
        progress_.rewind(have_);
      }
      if (attempt >= kDownloadAttempts)
        throw NetworkError(str_cat("download of ", cache_.repo_id(), "/", f_.path, " failed ",
                                   attempt, " times (", last_error_,
                                   "); run the command again to resume it"),
                           true);
      progress_.message(str_cat("download of ", f_.path, " interrupted (", last_error_,
                                "); resuming"));
      std::this_thread::sleep_for(std::chrono::milliseconds(200 * attempt));
    }
    std::error_code ec;
    fs::rename(partial_, cache_.blob_path(blob_), ec);
    BRISK_CHECK(!ec, "cannot move ", partial_, " into place: ", ec.message());
    return received_;
  }

 private:
  // Empty when size and checksum match.
  std::string verify() {
    if (f_.size && have_ != *f_.size)
      return str_cat("size ", have_, " bytes instead of ", *f_.size);
    if (!f_.lfs_sha256.empty()) {
      const std::string got = hash_.hex();
      if (got != f_.lfs_sha256) return str_cat("sha256 ", got, " instead of ", f_.lfs_sha256);
    }
    return "";
  }

  // Opens the partial file and hashes what it already holds.
  void open_partial() {
    fd_ = ::open(partial_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    BRISK_CHECK(fd_ >= 0, "cannot open ", partial_, ": ", std::strerror(errno));
    hash_.reset();
    have_ = 0;
    std::vector<char> buf(1 << 20);
    ssize_t n;
    while ((n = ::read(fd_, buf.data(), buf.size())) > 0) {
      hash_.update(buf.data(), size_t(n));
      have_ += uint64_t(n);
    }
    BRISK_CHECK(n == 0, "cannot read ", partial_, ": ", std::strerror(errno));
  }

  bool write_body(const char* data, size_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fd_, data, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        write_errno_ = errno;
        return false;
      }
      hash_.update(data, size_t(w));
      have_ += uint64_t(w);
      received_ += uint64_t(w);
      progress_.add(uint64_t(w));
      if (report_ && have_ - reported_ >= (256u << 10)) {
        reported_ = have_;
        if (!report_(have_)) {
          cancelled_ = true;  // inside the HTTP client's callback: stop the transfer, throw later
          return false;
        }
      }
      data += w;
      n -= size_t(w);
    }
    return true;
  }

  TransferEnd transfer_once() {
    open_partial();
    struct Closer {
      int& fd;
      ~Closer() { if (fd >= 0) ::close(fd); fd = -1; }
    } closer{fd_};
    const uint64_t size = f_.size.value_or(0);
    if (!announced_) {
      progress_.file_started(f_.path, size, have_);
      if (report_ && !report_(have_)) fail("download of ", f_.path, " cancelled");
    }
    announced_ = true;
    if (f_.size && have_ >= size) {
      if (have_ == size) return TransferEnd::complete;
      last_error_ = "partial file longer than the file";
      return TransferEnd::restart;
    }
    check_disk_space(cache_.root() + "/blobs", size - have_, f_.path);
    const uint64_t offset = have_;
    bool range_wrong = false;
    HttpRequest req;
    req.url = resolve_url(http_.endpoint(), cache_.repo_id(), commit_, f_.path);
    if (offset > 0) req.headers.push_back(str_cat("Range: bytes=", offset, "-"));
    req.on_headers = [&](long status, const std::map<std::string, std::string>& headers) {
      if (offset == 0) return;
      if (status == 200) {
        // the server ignored the range and sends the whole file: start over
        if (::ftruncate(fd_, 0) != 0 || ::lseek(fd_, 0, SEEK_SET) != 0) range_wrong = true;
        hash_.reset();
        progress_.rewind(have_);
        have_ = 0;
        return;
      }
      const auto it = headers.find("content-range");  // "bytes START-END/TOTAL"
      const std::string expect = str_cat("bytes ", offset, "-");
      if (it == headers.end() || it->second.rfind(expect, 0) != 0) range_wrong = true;
    };
    req.on_body = [&](const char* data, size_t n) { return !range_wrong && write_body(data, n); };
    HttpResponse resp = http_.request(req);
    if (cancelled_) fail("download of ", f_.path, " cancelled");
    if (write_errno_ != 0) {
      const int err = write_errno_;
      write_errno_ = 0;
      if (err == ENOSPC || err == EDQUOT)
        fail("disk full while writing ", partial_, " (", format_bytes(have_), " of ",
             format_bytes(size), " written); free some space and run the command again, the "
             "download resumes where it stopped");
      fail("cannot write ", partial_, ": ", std::strerror(err));
    }
    if (range_wrong) {
      last_error_ = "the server answered the range request with another range";
      return TransferEnd::restart;
    }
    if (resp.status == 416) {
      last_error_ = "the partial file does not fit the file on the server";
      return TransferEnd::restart;
    }
    if (resp.transport_error != 0) {
      if (!transport_error_is_transient(resp.transport_error))
        throw_hub_error(http_, resp, cache_.repo_id(), commit_, "file " + f_.path);
      last_error_ = resp.transport_message;
      return TransferEnd::retry_resume;
    }
    if (resp.status < 200 || resp.status >= 300)
      throw_hub_error(http_, resp, cache_.repo_id(), commit_, "file " + f_.path);
    if (f_.size && have_ < *f_.size) {
      last_error_ = str_cat("the transfer ended after ", have_, " of ", *f_.size, " bytes");
      return TransferEnd::retry_resume;
    }
    return TransferEnd::complete;
  }

  const HttpClient& http_;
  const RepoCache& cache_;
  const std::string& commit_;
  const RepoFile& f_;
  Progress& progress_;
  std::function<bool(uint64_t)> report_;  // bytes present (HubOptions::on_file_progress)
  uint64_t reported_ = 0;
  bool cancelled_ = false;
  std::string blob_;
  std::string partial_;
  int fd_ = -1;
  Sha256 hash_;
  uint64_t have_ = 0;       // bytes in the partial file
  uint64_t received_ = 0;   // bytes received in this run
  int write_errno_ = 0;
  bool announced_ = false;
  std::string last_error_;
};

bool blob_is_good(const RepoCache& cache, const RepoFile& f, bool verify) {
  const auto size = file_size(cache.blob_path(f.etag()));
  if (!size || (f.size && *size != *f.size)) return false;
  if (verify && !f.lfs_sha256.empty()) return sha256_file(cache.blob_path(f.etag())) == f.lfs_sha256;
  return true;
}

}  // namespace

DownloadStats download_files(const HttpClient& http, const RepoCache& cache,
                             const std::string& revision, const std::string& commit,
                             const std::vector<RepoFile>& files_in, const HubOptions& opt) {
  std::vector<RepoFile> files = files_in;
  make_dirs(cache.root() + "/blobs");
  make_dirs(cache.snapshot_dir(commit));
  for (auto& f : files) complete_metadata(http, cache.repo_id(), commit, f);
  // Bytes still to fetch, for the progress total and the disk-space check.
  uint64_t total = 0, missing = 0;
  std::vector<bool> cached(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    cached[i] = blob_is_good(cache, files[i], opt.verify_cached);
    if (cached[i]) continue;
    const uint64_t size = files[i].size.value_or(0);
    total += size;
    missing += size - std::min(size, file_size(cache.incomplete_path(files[i].etag())).value_or(0));
  }
  if (missing > 0) check_disk_space(cache.root() + "/blobs", missing, cache.repo_id());
  DownloadStats stats;
  Progress progress(opt.progress, total);
  std::mutex mu;
  std::exception_ptr first_error;
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex report_mu;
  auto report = [&](const RepoFile& f, uint64_t have) {
    if (!opt.on_file_progress) return true;
    std::lock_guard<std::mutex> lock(report_mu);
    return opt.on_file_progress(HubFileProgress{.file = f.path, .blob = f.etag(), .total = f.size.value_or(have),
                                                .completed = have});
  };
  auto worker = [&] {
    for (size_t i; !stop && (i = next++) < files.size();) {
      try {
        const RepoFile& f = files[i];
        const std::string blob = f.etag();
        bool fetched = false;
        uint64_t received = 0;
        if (!cached[i]) {
          FileLock lock(cache.lock_path(blob),
                        str_cat("another process is downloading ", cache.repo_id(), "/", f.path,
                                "; waiting for it"));
          if (!blob_is_good(cache, f, opt.verify_cached)) {
            std::error_code ec;
            fs::remove(cache.blob_path(blob), ec);  // wrong size or checksum
            received = FileFetcher(http, cache, commit, f, progress,
                                   [&](uint64_t have) { return report(f, have); }).run();
            fetched = true;
            progress.file_done(f.path, f.size.value_or(0));
          } else {
            progress.skip(f.size.value_or(0));  // another process fetched it
          }
        }
        if (!report(f, f.size.value_or(0))) fail("download of ", f.path, " cancelled");
        cache.link_snapshot(commit, f.path, blob);
        std::lock_guard<std::mutex> lock(mu);
        stats.bytes_received += received;
        if (fetched) ++stats.files_downloaded;
        else ++stats.files_cached;
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first_error) first_error = std::current_exception();
        stop = true;
      }
    }
  };
  const size_t n_threads = std::min<size_t>(size_t(std::max(1, opt.n_parallel)), files.size());
  std::vector<std::thread> threads;
  for (size_t t = 1; t < n_threads; ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  progress.finish();
  if (first_error) std::rethrow_exception(first_error);
  cache.write_ref(revision, commit);
  return stats;
}

}  // namespace brisk::hub
