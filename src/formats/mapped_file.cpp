// MappedFile: read-only bytes of a file, memory-mapped or read into a 64-byte-aligned buffer.
#include "formats/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/large_alloc.h"

namespace brisk {
namespace {



// Owns an fd for the duration of open().
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Heap copies are at least page-aligned (tensor data keeps any GGUF alignment up to 4096), and
// large ones sit on huge pages (core/large_alloc.h).
void* aligned_buffer(size_t size, const std::string& what) {
  void* p = large_alloc(size);
  BRISK_CHECK(p, what, ": cannot allocate ", size, " bytes");
  return p;
}

}  // namespace

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path, Mode mode) {
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  BRISK_CHECK(f.fd >= 0, path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  BRISK_CHECK(::fstat(f.fd, &st) == 0, path, ": cannot stat: ", std::strerror(errno));
  BRISK_CHECK(!S_ISDIR(st.st_mode), path, ": is a directory, expected a file");
  BRISK_CHECK(S_ISREG(st.st_mode), path, ": not a regular file");
  BRISK_CHECK(st.st_size >= 0, path, ": negative file size");
  const size_t size = static_cast<size_t>(st.st_size);

  std::shared_ptr<MappedFile> m(new MappedFile());
  m->path_ = path;
  m->size_ = size;
  if (mode == Mode::mmap && size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, f.fd, 0);
    BRISK_CHECK(p != MAP_FAILED, path, ": cannot map ", size, " bytes: ", std::strerror(errno));
    m->data_ = static_cast<const uint8_t*>(p);
    m->mapped_ = true;
    return m;
  }
  m->owned_ = aligned_buffer(size, path);
  m->data_ = static_cast<const uint8_t*>(m->owned_);
  auto* dst = static_cast<uint8_t*>(m->owned_);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(f.fd, dst + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    BRISK_CHECK(n >= 0, path, ": read failed at offset ", done, ": ", std::strerror(errno));
    BRISK_CHECK(n > 0, path, ": file shrank while reading (", done, " of ", size, " bytes)");
    done += static_cast<size_t>(n);
  }
  return m;
}

std::shared_ptr<const MappedFile> MappedFile::from_memory(const void* data, size_t size,
                                                          std::string name) {
  std::shared_ptr<MappedFile> m(new MappedFile());
  m->path_ = std::move(name);
  m->size_ = size;
  m->owned_ = aligned_buffer(size, m->path_);
  if (size > 0) std::memcpy(m->owned_, data, size);
  m->data_ = static_cast<const uint8_t*>(m->owned_);
  return m;
}

std::shared_ptr<const MappedFile> MappedFile::filled(size_t size, std::string name,
                                                     const std::function<void(uint8_t*)>& fill) {
  std::shared_ptr<MappedFile> m(new MappedFile());
  m->path_ = std::move(name);
  m->size_ = size;
  m->owned_ = aligned_buffer(size, m->path_);
  if (size > 0) fill(static_cast<uint8_t*>(m->owned_));
  m->data_ = static_cast<const uint8_t*>(m->owned_);
  return m;
}

MappedFile::~MappedFile() {
  if (mapped_) ::munmap(const_cast<uint8_t*>(data_), size_);
  large_free(owned_);
}

}  // namespace brisk
