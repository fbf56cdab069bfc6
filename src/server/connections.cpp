#include "server/connections.h"

#include <httplib.h>

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/log.h"

namespace brisk::server {

namespace {

constexpr size_t kReadChunk = 64u << 10;
constexpr double kLingerSeconds = 1.0;  // a refused connection is drained this long before closing

const char* reason_phrase(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
  }
}

}  // namespace

struct ConnectionLoop::Conn {
  enum class Phase { head, body, busy, closing };
  int fd = -1;
  std::string peer;
  std::string buf;                 // received, not yet served
  Phase phase = Phase::head;
  bool idle = true;                // head phase with no byte of the next request yet
  Clock::time_point deadline;
  bool reserve_only = false;       // admitted beyond the limits: /health and /metrics only
  RequestHead head;                // body / busy
  std::optional<ChunkedBodyScanner> chunked;
  uint64_t reserved = 0;           // bytes of body_memory_budget held
  uint64_t body_limit = 0;         // this request's body limit (Hooks::body_limit)
  int32_t served = 0;
  std::string out;                 // closing: reply bytes not yet written
  uint64_t drain_left = 0;         // closing: bytes still read and dropped
  bool watched_out = false;
};

ConnectionLoop::ConnectionLoop(ListenSocket socket, ConnectionLimits limits, Hooks hooks)
    : socket_(std::move(socket)), limits_(limits), hooks_(std::move(hooks)) {
  if (limits_.body_memory_budget == 0) limits_.body_memory_budget = 32 * limits_.max_body_bytes;
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  BRISK_CHECK(epoll_fd_ >= 0 && wake_fd_ >= 0, "serve: epoll / eventfd: ", std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  ev.data.fd = socket_.fd();
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, socket_.fd(), &ev);
  workers_ = std::make_unique<httplib::ThreadPool>(size_t(std::max(1, limits_.workers)));
  control_ = std::make_unique<httplib::ThreadPool>(size_t(std::max(1, limits_.control_workers)));
}

ConnectionLoop::~ConnectionLoop() {
  stop();
  if (workers_) workers_->shutdown();
  if (control_) control_->shutdown();
  for (auto& [fd, c] : conns_) ::close(fd);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

ConnectionLoop::Clock::time_point ConnectionLoop::after(double seconds) const {
  return Clock::now() + std::chrono::microseconds(int64_t(seconds * 1e6));
}

void ConnectionLoop::stop() {
  stopping_ = true;
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
}

void ConnectionLoop::watch(Conn& c, bool in, bool out) {
  epoll_event ev{};
  ev.events = (in ? uint32_t(EPOLLIN | EPOLLRDHUP) : 0u) | (out ? uint32_t(EPOLLOUT) : 0u);
  ev.data.fd = c.fd;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev) != 0) ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c.fd, &ev);
  c.watched_out = out;
}

void ConnectionLoop::close_conn(int fd) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  body_memory_ -= c.reserved;
  if (c.reserve_only) {
    --reserve_in_use_;
  } else if (auto pc = per_client_.find(c.peer); pc != per_client_.end() && --pc->second <= 0) {
    per_client_.erase(pc);
  }
  ::close(fd);
  conns_.erase(it);
  open_--;
}

void ConnectionLoop::accept_all() {
  while (accepting_) {
    std::string peer;
    const int fd = listen_socket_accept(socket_, peer);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: stop watching the socket for a moment instead of spinning.
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, socket_.fd(), nullptr);
        accept_paused_until_ = after(0.1);
        log_warn("serve: cannot accept connections: ", std::strerror(errno));
      }
      return;
    }
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->peer = peer;
    c->deadline = after(limits_.header_timeout_s);
    const int32_t from_peer = per_client_.count(peer) ? per_client_[peer] : 0;
    const bool over = int32_t(conns_.size()) - reserve_in_use_ >= limits_.max_connections ||
                      from_peer >= limits_.max_per_client;
    if (over) {
      if (reserve_in_use_ >= limits_.control_reserve) {
        refused_++;
        // No room even in the reserve: answer without keeping the descriptor.
        const std::string body = hooks_.error_body(nullptr, 503, "too many connections; retry later");
        const std::string reply = str_cat("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n",
                                          "Content-Length: ", body.size(), "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n", body);
        [[maybe_unused]] ssize_t n = ::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (hooks_.on_reply) hooks_.on_reply(nullptr, 503);
        ::close(fd);
        continue;
      }
      c->reserve_only = true;
      ++reserve_in_use_;
    } else {
      per_client_[peer]++;
    }
    open_++;
    Conn& ref = *c;
    conns_.emplace(fd, std::move(c));
    watch(ref, true, false);
  }
}

void ConnectionLoop::refuse(Conn& c, const RequestHead* head, int status, const std::string& message) {
  const std::string body = hooks_.error_body(head, status, message);
  c.out = str_cat("HTTP/1.1 ", status, " ", reason_phrase(status), "\r\nContent-Type: application/json\r\nContent-Length: ",
                  body.size(), "\r\n", status == 503 ? "Retry-After: 1\r\n" : "", "Connection: close\r\n\r\n", body);
  if (hooks_.on_reply) hooks_.on_reply(head, status);
  c.phase = Conn::Phase::closing;
  c.buf.clear();
  c.buf.shrink_to_fit();
  body_memory_ -= c.reserved;
  c.reserved = 0;
  c.drain_left = limits_.max_body_bytes + limits_.max_header_bytes;
  c.deadline = after(kLingerSeconds);
  continue_closing(c);
}

// Writes what remains of a refusal, then reads and drops input until the client closes, the
// drain budget is spent or the linger deadline passes.
void ConnectionLoop::continue_closing(Conn& c) {
  while (!c.out.empty()) {
    const ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.out.erase(0, size_t(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      watch(c, true, true);
      return;
    }
    close_conn(c.fd);
    return;
  }
  if (c.watched_out) {
    ::shutdown(c.fd, SHUT_WR);
    watch(c, true, false);
  } else {
    ::shutdown(c.fd, SHUT_WR);
  }
  char buf[16384];
  for (;;) {
    const ssize_t n = ::recv(c.fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0 && uint64_t(n) < c.drain_left) {
      c.drain_left -= uint64_t(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    close_conn(c.fd);  // end of input, an error, or the budget spent
    return;
  }
}

void ConnectionLoop::on_readable(Conn& c) {
  if (c.phase == Conn::Phase::closing) return continue_closing(c);
  // Read what is there, at most what the request in progress may still need (plus one chunk).
  // A head in progress needs no room for a body: a client cannot make the loop buffer one early.
  const uint64_t cap = limits_.max_header_bytes + 2 * kReadChunk +
                       (c.phase == Conn::Phase::body ? 2 * limits_.max_body_bytes : 0);
  for (;;) {
    if (c.buf.size() >= cap) break;
    const size_t old = c.buf.size();
    c.buf.resize(old + kReadChunk);
    const ssize_t n = ::recv(c.fd, c.buf.data() + old, kReadChunk, MSG_DONTWAIT);
    if (n > 0) {
      c.buf.resize(old + size_t(n));
      if (size_t(n) < kReadChunk) break;
      continue;
    }
    c.buf.resize(old);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0 && errno == EINTR) continue;
    // Closed by the client (or reset): a partial request is abandoned.
    close_conn(c.fd);
    return;
  }
  advance(c);
}

void ConnectionLoop::advance(Conn& c) {
  if (c.phase == Conn::Phase::head) {
    const size_t blank = request_leading_blank_bytes(c.buf);
    if (blank) c.buf.erase(0, blank);
    if (c.buf.empty()) return;
    if (c.idle) {  // the first byte of a request: its head has header_timeout_s from now
      c.idle = false;
      c.deadline = after(limits_.header_timeout_s);
    }
    HeadParse p = request_head_parse(c.buf, limits_.max_header_bytes, limits_.max_body_bytes);
    if (p.status == HeadParse::Status::incomplete) return;
    if (p.status == HeadParse::Status::error) {
      c.head = std::move(p.head);
      return refuse(c, c.head.method.empty() ? nullptr : &c.head, p.error_status, p.error);
    }
    c.head = std::move(p.head);
    const bool control = hooks_.is_control && hooks_.is_control(c.head);
    if (c.reserve_only && !control)
      return refuse(c, &c.head, 503, "too many connections; this one may only ask for /health or /metrics");
    if (stopping_) return refuse(c, &c.head, 503, "server is shutting down");
    if (hooks_.screen) {
      if (auto r = hooks_.screen(c.head)) return refuse(c, &c.head, r->status, r->message);
    }
    if (c.head.body != RequestHead::Body::none) {
      c.body_limit = hooks_.body_limit ? std::min(hooks_.body_limit(c.head), limits_.max_body_bytes) : limits_.max_body_bytes;
      if (c.head.body == RequestHead::Body::length && c.head.content_length > c.body_limit)
        return refuse(c, &c.head, 413, str_cat("request body exceeds the limit of ", c.body_limit, " bytes"));
      const uint64_t need = c.head.body == RequestHead::Body::length ? c.head.content_length
                                                                     : 2 * c.body_limit + kReadChunk;
      if (body_memory_ + need > limits_.body_memory_budget)
        return refuse(c, &c.head, 503, "server is busy receiving other requests; retry later");
      body_memory_ += need;
      c.reserved = need;
      if (c.head.body == RequestHead::Body::chunked)
        c.chunked.emplace(c.body_limit, 2 * c.body_limit + kReadChunk);
      if (c.head.expect_continue) {
        // The loop answers 100-continue itself (the body is read here) and hides the header
        // from the request parser, which would otherwise send a second interim reply.
        static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
        [[maybe_unused]] ssize_t n = ::send(c.fd, kContinue, sizeof(kContinue) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        c.buf[c.head.expect_offset] = 'X';  // "Expect:" -> "Xxpect:", an unknown header
      }
    }
    c.phase = Conn::Phase::body;
    c.deadline = after(limits_.body_timeout_s);
  }
  if (c.phase != Conn::Phase::body) return;
  const size_t head = c.head.header_bytes;
  switch (c.head.body) {
    case RequestHead::Body::none:
      return dispatch(c, head);
    case RequestHead::Body::length:
      if (c.buf.size() >= head + c.head.content_length) return dispatch(c, head + size_t(c.head.content_length));
      return;
    case RequestHead::Body::chunked:
      switch (c.chunked->scan(std::string_view(c.buf).substr(head))) {
        case ChunkedBodyScanner::Result::complete: return dispatch(c, head + c.chunked->end());
        case ChunkedBodyScanner::Result::malformed: return refuse(c, &c.head, 400, "malformed chunked request body");
        case ChunkedBodyScanner::Result::too_large:
          return refuse(c, &c.head, 413, str_cat("request body exceeds the limit of ", c.body_limit, " bytes"));
        case ChunkedBodyScanner::Result::more: return;
      }
  }
}

void ConnectionLoop::dispatch(Conn& c, size_t request_bytes) {
  c.phase = Conn::Phase::busy;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
  ++busy_;
  const bool control = hooks_.is_control && hooks_.is_control(c.head);
  const bool last = stopping_ || !c.head.keep_alive || c.served + 1 >= limits_.keep_alive_max;
  Conn* conn = &c;
  auto task = [this, conn, request_bytes, last] {
    bool keep = false;
    try {
      ConnectionRequest r{.fd = conn->fd,
                          .peer = conn->peer,
                          .bytes = std::string_view(conn->buf).substr(0, request_bytes),
                          .head = &conn->head,
                          .last = last};
      keep = hooks_.serve(r) && !last;
    } catch (const std::exception& e) {
      log_error("serve: request failed: ", e.what());
    }
    conn->buf.erase(0, request_bytes);
    ++conn->served;
    {
      std::lock_guard<std::mutex> lock(returned_mu_);
      returned_.emplace_back(conn, keep);
    }
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
  };
  (control ? control_ : workers_)->enqueue(std::move(task));
}

void ConnectionLoop::take_back_returned() {
  std::vector<std::pair<Conn*, bool>> back;
  {
    std::lock_guard<std::mutex> lock(returned_mu_);
    back.swap(returned_);
  }
  for (auto [c, keep] : back) {
    --busy_;
    body_memory_ -= c->reserved;
    c->reserved = 0;
    c->chunked.reset();
    if (!keep || stopping_) {
      close_conn(c->fd);
      continue;
    }
    c->phase = Conn::Phase::head;
    c->idle = true;
    c->deadline = after(limits_.idle_timeout_s);
    if (c->buf.capacity() > 2 * kReadChunk && c->buf.size() < kReadChunk) c->buf.shrink_to_fit();
    watch(*c, true, false);
    advance(*c);  // a pipelined request may be buffered already
  }
}

void ConnectionLoop::sweep_deadlines() {
  const auto now = Clock::now();
  std::vector<int> expired;
  for (auto& [fd, c] : conns_)
    if (c->phase != Conn::Phase::busy && now >= c->deadline) expired.push_back(fd);
  for (int fd : expired) {
    auto it = conns_.find(fd);
    if (it == conns_.end()) continue;
    Conn& c = *it->second;
    if (c.phase == Conn::Phase::head && !c.idle && !c.buf.empty()) {
      refuse(c, nullptr, 408, "the request headers did not arrive in time");
    } else if (c.phase == Conn::Phase::body) {
      refuse(c, &c.head, 408, "the request body did not arrive in time");
    } else {
      close_conn(fd);  // idle, silent since accept, or done lingering
    }
  }
}

void ConnectionLoop::run() {
  epoll_event events[64];
  auto next_sweep = Clock::now();
  for (;;) {
    if (stopping_ && accepting_) {
      accepting_ = false;
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, socket_.fd(), nullptr);
      socket_.close();
      std::vector<int> idle;
      for (auto& [fd, c] : conns_)
        if (c->phase != Conn::Phase::busy && c->phase != Conn::Phase::closing) idle.push_back(fd);
      for (int fd : idle) close_conn(fd);
    }
    if (!accepting_ && busy_ == 0) {
      std::lock_guard<std::mutex> lock(returned_mu_);
      if (returned_.empty()) break;
    }
    const int n = ::epoll_wait(epoll_fd_, events, 64, 100);
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_fd_) {
        uint64_t v;
        [[maybe_unused]] ssize_t r = ::read(wake_fd_, &v, sizeof(v));
        continue;
      }
      if (fd == socket_.fd()) {
        if (accepting_) accept_all();
        continue;
      }
      auto it = conns_.find(fd);
      if (it == conns_.end() || it->second->phase == Conn::Phase::busy) continue;
      on_readable(*it->second);
    }
    take_back_returned();
    const auto now = Clock::now();
    if (now >= next_sweep) {
      sweep_deadlines();
      next_sweep = now + std::chrono::milliseconds(100);
      if (accepting_ && accept_paused_until_ != Clock::time_point{} && now >= accept_paused_until_) {
        accept_paused_until_ = {};
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = socket_.fd();
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, socket_.fd(), &ev);
      }
    }
  }
  // Whatever still lingers is closed now.
  std::vector<int> rest;
  for (auto& [fd, c] : conns_) rest.push_back(fd);
  for (int fd : rest) close_conn(fd);
}

}  // namespace brisk::server
