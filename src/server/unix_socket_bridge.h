// `brisk serve --unix PATH`: the HTTP library has no Unix-socket listener, so the server
// listens on an ephemeral loopback TCP port and this bridge accepts connections on a Unix
// socket (created mode 0600), connecting each to that port and copying bytes both ways. The
// server admits a request on its TCP port only when it comes from one of the bridge's own
// outgoing connections (`owns_peer_port`), so the loopback port is no back door around the
// socket's file permissions.
#pragma once
#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace brisk::server {

class UnixSocketBridge {
 public:
  // Creates the socket (replacing a stale socket file at `path`, never another kind of file).
  UnixSocketBridge(std::string path, int tcp_port);
  ~UnixSocketBridge();
  UnixSocketBridge(const UnixSocketBridge&) = delete;
  UnixSocketBridge& operator=(const UnixSocketBridge&) = delete;

  void start();
  void stop();  // closes the socket, removes the file; open connections finish by themselves
  // True when a loopback TCP peer port belongs to a connection this bridge opened.
  bool owns_peer_port(int port) const;
  const std::string& path() const { return path_; }

 private:
  void accept_loop();
  void pump(int client_fd);

  std::string path_;
  int tcp_port_;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  std::thread acceptor_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> active_{0};
  mutable std::mutex mu_;
  std::set<int> ports_;
};

}  // namespace brisk::server
