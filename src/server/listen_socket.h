// The listening socket of `brisk serve`: TCP or a Unix socket, and nothing else.
//
// TCP: IPv4 or IPv6 (getaddrinfo on the host), SO_REUSEADDR only. SO_REUSEPORT is never set,
// so a second server on a port in use fails to bind ("address in use") instead of sharing it.
// Unix (`--unix PATH`): the socket file is created mode 0600 (umask while binding, then
// chmod), a stale socket file at the path is replaced, any other kind of file is left alone;
// no TCP socket exists at all in this mode, so the file permissions are the whole access check.
// Accepted TCP sockets get TCP_NODELAY: replies are written in a few writes, and Nagle's
// algorithm meeting the client's delayed ACK would hold each reply back by ~40 ms.
#pragma once
#include <string>

namespace brisk::server {

class ListenSocket {
 public:
  ListenSocket() = default;
  // Throws brisk::Error naming the address (e.g. "address in use").
  static ListenSocket tcp(const std::string& host, int port);
  static ListenSocket unix_path(const std::string& path);
  ~ListenSocket();
  ListenSocket(ListenSocket&& o) noexcept;
  ListenSocket& operator=(ListenSocket&& o) noexcept;
  ListenSocket(const ListenSocket&) = delete;
  ListenSocket& operator=(const ListenSocket&) = delete;

  int fd() const { return fd_; }
  int port() const { return port_; }          // TCP: the bound port; Unix: 0
  bool is_unix() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  // Closes the socket (and removes the Unix socket file). Idempotent.
  void close();

 private:
  int fd_ = -1;
  int port_ = 0;
  std::string path_;
};

// Accepts one connection (non-blocking, close-on-exec; TCP_NODELAY on TCP). Returns -1 when
// none is pending. `peer` receives the client's address ("unix" for Unix sockets).
int listen_socket_accept(const ListenSocket& s, std::string& peer);

}  // namespace brisk::server
