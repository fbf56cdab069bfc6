#include "server/listen_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace brisk::server {

ListenSocket ListenSocket::tcp(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
  BRISK_CHECK(rc == 0, "serve: cannot resolve '", host, "': ", gai_strerror(rc));
  std::string last_error = "no address";
  ListenSocket out;
  for (addrinfo* a = found; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));  // restart over TIME_WAIT; never SO_REUSEPORT
    if (a->ai_family == AF_INET6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &yes, sizeof(yes));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      last_error = errno == EADDRINUSE ? "address in use" : std::strerror(errno);
      ::close(fd);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
    out.fd_ = fd;
    out.port_ = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6&>(bound).sin6_port)
                                           : ntohs(reinterpret_cast<sockaddr_in&>(bound).sin_port);
    break;
  }
  ::freeaddrinfo(found);
  BRISK_CHECK(out.fd_ >= 0, "serve: cannot listen on ", host, ":", port, " (", last_error, ")");
  return out;
}

ListenSocket ListenSocket::unix_path(const std::string& path) {
  sockaddr_un addr{};
  BRISK_CHECK(!path.empty() && path.size() < sizeof(addr.sun_path), "serve: --unix '", path,
              "': the path must be 1 to ", sizeof(addr.sun_path) - 1, " bytes long");
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    BRISK_CHECK(S_ISSOCK(st.st_mode), "serve: --unix '", path, "' exists and is not a socket; not replacing it");
    // A socket that still answers belongs to a running server: never take it over.
    const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size());
    const bool live = probe >= 0 && ::connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    if (probe >= 0) ::close(probe);
    BRISK_CHECK(!live, "serve: --unix '", path, "': a server is already listening there (address in use)");
    ::unlink(path.c_str());
  }
  ListenSocket out;
  out.fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  BRISK_CHECK(out.fd_ >= 0, "serve: cannot create a Unix socket: ", std::strerror(errno));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  const mode_t old_mask = ::umask(0177);  // the socket file is created 0600
  const int rc = ::bind(out.fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  const int bind_errno = errno;
  ::umask(old_mask);
  if (rc != 0) {
    ::close(out.fd_);
    out.fd_ = -1;
    fail("serve: cannot listen on Unix socket '", path, "': ", std::strerror(bind_errno));
  }
  out.path_ = path;  // from here on close() removes the file
  if (::chmod(path.c_str(), 0600) != 0 || ::listen(out.fd_, SOMAXCONN) != 0)
    fail("serve: cannot listen on Unix socket '", path, "': ", std::strerror(errno));
  return out;
}

ListenSocket::~ListenSocket() { close(); }

ListenSocket::ListenSocket(ListenSocket&& o) noexcept : fd_(o.fd_), port_(o.port_), path_(std::move(o.path_)) {
  o.fd_ = -1;
  o.path_.clear();
}

ListenSocket& ListenSocket::operator=(ListenSocket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    port_ = o.port_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
    o.path_.clear();
  }
  return *this;
}

void ListenSocket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!path_.empty()) ::unlink(path_.c_str());
  path_.clear();
}

int listen_socket_accept(const ListenSocket& s, std::string& peer) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  const int fd = ::accept4(s.fd(), reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return -1;
  char buf[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in&>(addr).sin_addr, buf, sizeof(buf));
  } else if (addr.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6&>(addr).sin6_addr, buf, sizeof(buf));
  }
  if (addr.ss_family == AF_INET || addr.ss_family == AF_INET6) {
    const int yes = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
    peer = buf;
  } else {
    peer = "unix";
  }
  return fd;
}

}  // namespace brisk::server
