// The connection layer of `brisk serve`: one thread accepts connections and reads requests,
// worker threads only run complete requests.
//
// The loop thread (epoll) owns every connection that is not running a request: it accepts,
// applies the connection limits, reads a request's head and then its whole body into the
// connection's buffer, each within its deadline, and only then hands the request to a worker.
// A slow or silent client therefore holds a file descriptor and a bounded buffer, never a
// worker. What the loop refuses it answers itself (the status, a JSON error body, `Connection:
// close`, `Retry-After` on 503) and then drains the connection for a moment before closing it,
// so the client reads the answer instead of a reset:
//   - over `max_connections` or `max_per_client` open connections: 503, except that up to
//     `control_reserve` further connections are admitted for /health and /metrics only;
//   - a head not complete within `header_timeout_s`, a body not within `body_timeout_s`: 408;
//   - a head over `max_header_bytes`: 431; a body over `max_body_bytes` as sent (Content-Length
//     or the sum of chunk sizes): 413, without reading it; malformed framing: 400 / 411 / 501;
//   - `Hooks::screen` (the API key) refusing the head: its status, before any body is read;
//   - request bytes buffered over all connections beyond `body_memory_budget`: 503.
// /health and /metrics run on their own `control_workers`, so they answer while every worker
// is busy. A connection goes back to the loop after each request (keep-alive, pipelining).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "server/listen_socket.h"
#include "server/request_head.h"

namespace httplib { class ThreadPool; }

namespace brisk::server {

struct ConnectionLimits {
  int32_t max_connections = 1024;  // open connections in total
  int32_t max_per_client = 256;    // open connections per client address (Unix-socket clients share one)
  int32_t control_reserve = 16;    // beyond those: connections for /health and /metrics only
  double header_timeout_s = 10.0;  // from a connection's accept / a request's first byte to its blank line
  double body_timeout_s = 60.0;    // from the end of the head to the end of the body
  double idle_timeout_s = 5.0;     // a kept-alive connection waiting for its next request
  double write_timeout_s = 60.0;   // one blocked write of a reply
  size_t max_header_bytes = 64u << 10;
  uint64_t max_body_bytes = 8u << 20;  // as sent (the largest of Hooks::body_limit); the decoded size is checked where it is decoded
  uint64_t body_memory_budget = 0;     // request bytes buffered at once; 0: 32 x max_body_bytes
  int32_t workers = 64;                // requests run at once
  int32_t control_workers = 2;         // threads for /health and /metrics only
  int32_t keep_alive_max = 1000;       // requests per connection
};

// A complete request handed to a worker.
struct ConnectionRequest {
  int fd = -1;                 // the connection (the worker writes the reply to it)
  std::string_view peer;       // client address ("unix" on a Unix socket)
  std::string_view bytes;      // head and body, exactly one request
  const RequestHead* head = nullptr;
  bool last = false;           // the connection closes after this request
};

class ConnectionLoop {
 public:
  struct Refusal {
    int status = 0;
    std::string message;
  };
  struct Hooks {
    // Runs a request on a worker thread; true keeps the connection open for the next one.
    std::function<bool(const ConnectionRequest&)> serve;
    // Screens a head before its body is read (the API key): a refusal, or nullopt to go on.
    std::function<std::optional<Refusal>(const RequestHead&)> screen;
    // Body (JSON) of a reply the loop makes itself; `head` is null when none was parsed.
    std::function<std::string(const RequestHead* head, int status, const std::string& message)> error_body;
    // Called once for every reply the loop makes itself (metrics).
    std::function<void(const RequestHead* head, int status)> on_reply;
    // The body limit of a request (at most `max_body_bytes`, the largest any route takes); unset:
    // `max_body_bytes` for every request.
    std::function<uint64_t(const RequestHead& head)> body_limit;
    // Whether a request is /health or /metrics (control workers, control reserve).
    std::function<bool(const RequestHead& head)> is_control;
  };

  ConnectionLoop(ListenSocket socket, ConnectionLimits limits, Hooks hooks);
  ~ConnectionLoop();
  ConnectionLoop(const ConnectionLoop&) = delete;
  ConnectionLoop& operator=(const ConnectionLoop&) = delete;

  // Accepts and serves until stop(); returns after every running request has returned.
  void run();
  // Stops accepting and closes idle connections; running requests finish (safe from any thread).
  void stop();

  int32_t open_connections() const { return open_.load(); }
  uint64_t refused_connections() const { return refused_.load(); }
  const ListenSocket& socket() const { return socket_; }

 private:
  struct Conn;
  using Clock = std::chrono::steady_clock;

  void accept_all();
  void on_readable(Conn& c);
  void advance(Conn& c);
  void dispatch(Conn& c, size_t request_bytes);
  void refuse(Conn& c, const RequestHead* head, int status, const std::string& message);
  void continue_closing(Conn& c);
  void close_conn(int fd);
  void take_back_returned();
  void sweep_deadlines();
  void watch(Conn& c, bool in, bool out);
  Clock::time_point after(double seconds) const;

  ListenSocket socket_;
  ConnectionLimits limits_;
  Hooks hooks_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<int32_t> open_{0};
  std::atomic<uint64_t> refused_{0};
  bool accepting_ = true;
  Clock::time_point accept_paused_until_{};

  // Loop thread only.
  std::unordered_map<int, std::unique_ptr<Conn>> conns_;
  std::unordered_map<std::string, int32_t> per_client_;
  int32_t reserve_in_use_ = 0;
  uint64_t body_memory_ = 0;
  int32_t busy_ = 0;

  std::mutex returned_mu_;
  std::vector<std::pair<Conn*, bool>> returned_;  // (connection, keep it open)

  std::unique_ptr<httplib::ThreadPool> workers_, control_;
};

}  // namespace brisk::server
