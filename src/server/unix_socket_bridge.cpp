#include "server/unix_socket_bridge.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/error.h"
#include "core/log.h"

namespace brisk::server {

UnixSocketBridge::UnixSocketBridge(std::string path, int tcp_port) : path_(std::move(path)), tcp_port_(tcp_port) {
  sockaddr_un addr{};
  BRISK_CHECK(!path_.empty() && path_.size() < sizeof(addr.sun_path), "serve: --unix '", path_,
              "': the path must be 1 to ", sizeof(addr.sun_path) - 1, " bytes long");
  struct stat st {};
  if (lstat(path_.c_str(), &st) == 0) {
    BRISK_CHECK(S_ISSOCK(st.st_mode), "serve: --unix '", path_, "' exists and is not a socket; not replacing it");
    ::unlink(path_.c_str());
  }
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  BRISK_CHECK(listen_fd_ >= 0, "serve: cannot create a Unix socket: ", std::strerror(errno));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path_.c_str(), path_.size());
  const mode_t old_mask = ::umask(0177);  // the socket file is created 0600
  const int rc = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  const int bind_errno = errno;
  ::umask(old_mask);
  if (rc != 0 || ::chmod(path_.c_str(), 0600) != 0 || ::listen(listen_fd_, 128) != 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
    fail("serve: cannot listen on Unix socket '", path_, "': ", std::strerror(rc != 0 ? bind_errno : errno));
  }
  BRISK_CHECK(::pipe2(wake_pipe_, O_CLOEXEC) == 0, "serve: pipe: ", std::strerror(errno));
}

UnixSocketBridge::~UnixSocketBridge() {
  stop();
  // Connections still being pumped hold no reference to this object beyond `ports_`/`active_`:
  // wait (bounded) for them so their threads never touch a destroyed bridge.
  for (int i = 0; i < 500 && active_.load() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  for (int fd : wake_pipe_)
    if (fd >= 0) ::close(fd);
}

void UnixSocketBridge::start() { acceptor_ = std::thread([this] { accept_loop(); }); }

void UnixSocketBridge::stop() {
  if (stopping_.exchange(true)) return;
  if (wake_pipe_[1] >= 0) {
    const char c = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_pipe_[1], &c, 1);
  }
  if (acceptor_.joinable()) acceptor_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
  ::unlink(path_.c_str());
}

bool UnixSocketBridge::owns_peer_port(int port) const {
  std::lock_guard<std::mutex> lock(mu_);
  return ports_.count(port) != 0;
}

void UnixSocketBridge::accept_loop() {
  while (!stopping_) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      log_error("serve: Unix socket poll failed: ", std::strerror(errno));
      return;
    }
    if (fds[1].revents) return;
    if (!(fds[0].revents & POLLIN)) continue;
    const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    active_++;
    std::thread([this, client] {
      pump(client);
      active_--;
    }).detach();
  }
}

// Copies bytes between the Unix client and a fresh loopback TCP connection to the server
// until either side closes.
void UnixSocketBridge::pump(int client) {
  const int upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(tcp_port_));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int local_port = -1;
  if (upstream >= 0 && ::connect(upstream, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    if (::getsockname(upstream, reinterpret_cast<sockaddr*>(&local), &len) == 0) local_port = ntohs(local.sin_port);
  }
  if (local_port < 0) {
    log_error("serve: Unix socket bridge cannot reach 127.0.0.1:", tcp_port_);
    if (upstream >= 0) ::close(upstream);
    ::close(client);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ports_.insert(local_port);
  }
  char buf[65536];
  bool open[2] = {true, true};  // client->upstream, upstream->client
  while (open[0] || open[1]) {
    pollfd fds[2] = {{client, short(open[0] ? POLLIN : 0), 0}, {upstream, short(open[1] ? POLLIN : 0), 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    bool failed = false;
    for (int dir = 0; dir < 2 && !failed; ++dir) {
      if (!open[dir] || !(fds[dir].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const int from = dir == 0 ? client : upstream, to = dir == 0 ? upstream : client;
      const ssize_t n = ::read(from, buf, sizeof(buf));
      if (n <= 0) {
        open[dir] = false;
        ::shutdown(to, SHUT_WR);
        if (dir == 1) open[0] = false;  // server closed: the exchange is over
        continue;
      }
      for (ssize_t off = 0; off < n;) {
        const ssize_t w = ::send(to, buf + off, size_t(n - off), MSG_NOSIGNAL);
        if (w <= 0) {
          failed = true;
          break;
        }
        off += w;
      }
    }
    if (failed) break;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ports_.erase(local_port);
  }
  ::close(upstream);
  ::close(client);
}

}  // namespace brisk::server
