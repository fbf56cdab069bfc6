#include "server/http_server.h"

#include <httplib.h>

#include <poll.h>
#include <sys/select.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "server/auth.h"
#include "server/json_fields.h"
#include "server/response_store.h"
#include "server/route_util.h"

namespace brisk::server {
namespace {

thread_local std::chrono::steady_clock::time_point t_request_start;
thread_local int t_connection_fd = -1;

Dialect dialect_of(const std::string& path) {
  if (path.rfind("/api/", 0) == 0) return Dialect::ollama;
  return path.rfind("/v1/messages", 0) == 0 ? Dialect::anthropic : Dialect::openai;
}

// One buffered request (head and body, complete) as the request parser reads it, and the
// connection it answers on. Writes wait at most `write_timeout_ms` for room in the socket.
class ConnectionStream : public httplib::Stream {
 public:
  ConnectionStream(const ConnectionRequest& r, int write_timeout_ms)
      : fd_(r.fd), request_(r.bytes), peer_(r.peer), timeout_ms_(write_timeout_ms) {}
  bool is_readable() const override { return pos_ < request_.size(); }
  bool is_writable() const override {
    pollfd p{fd_, POLLOUT, 0};
    return ::poll(&p, 1, timeout_ms_) > 0 && !(p.revents & (POLLERR | POLLHUP | POLLNVAL));
  }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, request_.size() - pos_);
    std::memcpy(ptr, request_.data() + pos_, n);
    pos_ += n;
    return ssize_t(n);  // 0: the request's bytes are all read
  }
  ssize_t write(const char* ptr, size_t size) override {
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::send(fd_, ptr + done, size - done, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        done += size_t(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && is_writable()) continue;
      failed_ = true;
      return -1;
    }
    return ssize_t(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = std::string(peer_);
    port = 0;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip.clear();
    port = 0;
  }
  // The parser refuses descriptors >= FD_SETSIZE (it was built for select()); nothing here
  // uses select(), so larger descriptors are reported as -1.
  socket_t socket() const override { return fd_ < FD_SETSIZE ? fd_ : -1; }
  bool failed() const { return failed_; }

 private:
  int fd_;
  std::string_view request_;
  std::string_view peer_;
  int timeout_ms_;
  size_t pos_ = 0;
  bool failed_ = false;
};

}  // namespace

// cpp-httplib's request parser and router, run on requests the connection layer buffered.
class HttpServer::Router : public httplib::Server {
 public:
  bool serve_one(ConnectionStream& strm, bool last, bool& closed) {
    return process_request(strm, last, closed, nullptr);
  }
  // Streamed replies stop when this reports "shutting down" (see write_content_chunked).
  void set_running(bool on) { svr_sock_ = on ? 0 : INVALID_SOCKET; }
};

ServerState::~ServerState() = default;

std::chrono::steady_clock::time_point request_arrival_time() { return t_request_start; }

std::function<bool()> client_disconnect_probe() {
  const int fd = t_connection_fd;
  if (fd < 0) return [] { return false; };
  return [fd] {
    pollfd p{fd, short(POLLRDHUP), 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
  };
}

HttpServer::HttpServer(ModelRegistry& registry, ServerOptions options)
    : state_(std::make_unique<ServerState>()), http_(std::make_unique<Router>()) {
  state_->registry = &registry;
  state_->options = std::move(options);
  state_->responses = std::make_unique<ResponseStore>(size_t(std::max(1, state_->options.stored_responses)));
  ServerState* st = state_.get();
  http_->set_keep_alive_max_count(1000);
  http_->set_keep_alive_timeout(5);

  // Content encodings the body reader decodes; anything else would reach the routes undecoded.
  http_->set_pre_routing_handler([st](const httplib::Request& req, httplib::Response& res) {
    t_request_start = std::chrono::steady_clock::now();
    if (req.has_header("Content-Encoding")) {
      const std::string enc = req.get_header_value("Content-Encoding");
      if (enc != "gzip" && enc != "deflate" && enc != "br" && enc != "identity") {
        reply_error(res, dialect_of(req.path), 415,
                    str_cat("Content-Encoding '", enc, "' is not supported (gzip, deflate, br or identity)"));
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    (void)st;
    return httplib::Server::HandlerResponse::Unhandled;
  });

  // Replies the parser and router produce themselves (no route 404, wrong method 405,
  // malformed request 400) get the dialect's error body.
  http_->set_error_handler([st](const httplib::Request& req, httplib::Response& res) {
    if (res.status == 404 && res.body.empty()) {
      std::string allow;
      for (const auto& r : st->routes)
        if (r.method != req.method && std::regex_match(req.path, r.pattern) && allow.find(r.method) == std::string::npos)
          allow += (allow.empty() ? "" : ", ") + r.method;
      if (!allow.empty()) {
        res.status = 405;
        res.set_header("Allow", allow);
      }
    }
    if (!res.body.empty()) return;
    std::string msg;
    switch (res.status) {
      case 404: msg = str_cat("no route for ", req.method, " ", req.path); break;
      case 405: msg = str_cat("method ", req.method, " is not allowed on ", req.path, " (allowed: ", res.get_header_value("Allow"), ")"); break;
      case 413: msg = str_cat("request body exceeds the limit of ", st->options.max_body_bytes, " bytes"); break;
      default: msg = str_cat("HTTP error ", res.status);
    }
    const int status = res.status;
    reply_error(res, dialect_of(req.path), status, msg);
  });

  // Runs on every reply, its status final, before a byte of it is written: the reply is
  // counted (so a client that reads /metrics next sees it) and every 503 says when to retry.
  http_->set_post_routing_handler([st](const httplib::Request& req, httplib::Response& res) {
    st->metrics.count_request(route_label(*st, req.method, req.path), res.status);
    if (res.status == 503 && !res.has_header("Retry-After")) res.set_header("Retry-After", "1");
  });

  // One log line per reply.
  http_->set_logger([st](const httplib::Request& req, const httplib::Response& res) {
    if (!st->options.log_requests) return;
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_request_start).count();
    log_write(LogLevel::info, str_cat("serve: ", req.remote_addr, " ", req.method, " ", req.path, " ", res.status, " ",
                                      req.body.size(), "B in ", int64_t(ms), " ms"));
  });

  add_get_route(*http_, *st, "/health", "/health", Dialect::openai, [st](const httplib::Request&, httplib::Response& res) {
    reply_json(res, {{"status", st->draining ? "draining" : "ok"},
                     {"models", st->registry->specs().size()},
                     {"resident", st->registry->resident().size()}},
               st->draining ? 503 : 200);
  });
  add_get_route(*http_, *st, "/metrics", "/metrics", Dialect::openai, [this, st](const httplib::Request&, httplib::Response& res) {
    res.set_content(st->metrics.render(*st->registry, {.open_connections = open_connections(),
                                                         .refused_connections = loop_ ? loop_->refused_connections() : 0}),
                    "text/plain; version=0.0.4");
  });
  register_openai_routes(*http_, *st);
  register_anthropic_routes(*http_, *st);
  register_audio_routes(*http_, *st);
  register_embeddings_routes(*http_, *st);
  register_responses_routes(*http_, *st);
  register_ollama_routes(*http_, *st);
  register_webui_routes(*http_, *st);
}

HttpServer::~HttpServer() { stop(); }

int32_t HttpServer::open_connections() const {
  return (loop_ ? loop_->open_connections() : 0) + (ollama_loop_ ? ollama_loop_->open_connections() : 0);
}

void HttpServer::bind() {
  const auto& o = state_->options;
  ListenSocket socket = o.unix_path.empty() ? ListenSocket::tcp(o.host, o.port) : ListenSocket::unix_path(o.unix_path);
  port_ = socket.port();
  std::optional<ListenSocket> ollama_socket;
  if (o.ollama_port >= 0) {
    BRISK_CHECK(o.unix_path.empty(), "serve: --ollama-port is a TCP listener; it cannot go with --unix");
    ollama_socket.emplace(ListenSocket::tcp(o.host, o.ollama_port));
    ollama_port_ = ollama_socket->port();
  }
  ConnectionLimits limits{.max_connections = o.max_connections,
                          .max_per_client = o.max_client_connections,
                          .control_reserve = 16,
                          .header_timeout_s = o.header_timeout_seconds,
                          .body_timeout_s = o.body_timeout_seconds,
                          .idle_timeout_s = 5.0,
                          .write_timeout_s = 60.0,
                          .max_header_bytes = 64u << 10,
                          .max_body_bytes = std::max(o.max_body_bytes, o.max_audio_bytes),
                          .body_memory_budget = 32 * uint64_t(o.max_body_bytes) + 4 * uint64_t(o.max_audio_bytes),
                          .workers = std::max(1, o.http_threads),
                          .control_workers = 2,
                          .keep_alive_max = 1000};
  ServerState* st = state_.get();
  Router* router = http_.get();
  const int write_timeout_ms = int(limits.write_timeout_s * 1000);
  ConnectionLoop::Hooks hooks;
  hooks.serve = [router, write_timeout_ms](const ConnectionRequest& r) {
    ConnectionStream strm(r, write_timeout_ms);
    t_connection_fd = r.fd;
    bool closed = false;
    const bool ok = router->serve_one(strm, r.last, closed);
    t_connection_fd = -1;
    return ok && !closed && !strm.failed();
  };
  hooks.screen = [st](const RequestHead& h) -> std::optional<ConnectionLoop::Refusal> {
    if (h.path == "/health") return std::nullopt;
    // The chat page's files are public (they hold no data; the page asks for the key).
    if ((h.method == "GET" || h.method == "HEAD") && (h.path == "/" || h.path.rfind("/webui/", 0) == 0))
      return std::nullopt;
    if (request_authorized(st->options.api_key, h.authorization, h.api_key)) return std::nullopt;
    const bool given = h.has_authorization || h.has_api_key;
    return ConnectionLoop::Refusal{
        401, given ? "invalid API key" : "missing API key (send 'Authorization: Bearer KEY' or 'x-api-key: KEY')"};
  };
  hooks.error_body = [](const RequestHead* h, int status, const std::string& message) {
    return dump_json(error_body(h ? dialect_of(h->path) : Dialect::openai, status, message));
  };
  hooks.on_reply = [st](const RequestHead* h, int status) {
    st->metrics.count_request(h ? route_label(*st, h->method, h->path) : "connection", status);
    if (st->options.log_requests)
      log_write(LogLevel::info, str_cat("serve: ", h ? h->method + " " + h->path : std::string("connection"), " ", status,
                                        " (refused before routing)"));
  };
  // Audio uploads (server/audio_api.cpp) have their own limit; every other body the JSON one.
  hooks.body_limit = [st](const RequestHead& h) -> uint64_t {
    return h.path.rfind("/v1/audio/", 0) == 0 ? st->options.max_audio_bytes : st->options.max_body_bytes;
  };
  hooks.is_control = [](const RequestHead& h) {
    return (h.method == "GET" || h.method == "HEAD") && (h.path == "/health" || h.path == "/metrics");
  };
  if (ollama_socket) ollama_loop_ = std::make_unique<ConnectionLoop>(std::move(*ollama_socket), limits, hooks);
  loop_ = std::make_unique<ConnectionLoop>(std::move(socket), limits, std::move(hooks));
  http_->set_running(true);
}

void HttpServer::serve() {
  BRISK_CHECK(loop_ != nullptr, "serve: bind() first");
  std::thread second;
  if (ollama_loop_) second = std::thread([this] { ollama_loop_->run(); });
  loop_->run();
  if (second.joinable()) {
    ollama_loop_->stop();
    second.join();
  }
}

void HttpServer::stop() {
  if (stopping_.exchange(true)) return;
  ServerState& st = *state_;
  st.draining = true;
  // Let in-flight generations finish within the grace period, then cancel what remains.
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(int64_t(st.options.shutdown_grace_seconds * 1000));
  while (st.in_flight.load() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (st.in_flight.load() > 0)
    log_warn("serve: cancelling ", st.in_flight.load(), " requests still running at shutdown");
  for (const auto& m : st.registry->resident())
    if (m->scheduler) m->scheduler->shutdown();
  // Cancelled streams end promptly; wait briefly so their final events are written.
  const auto flush_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (st.in_flight.load() > 0 && std::chrono::steady_clock::now() < flush_deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  http_->set_running(false);
  if (ollama_loop_) ollama_loop_->stop();
  if (loop_) loop_->stop();
}

}  // namespace brisk::server
