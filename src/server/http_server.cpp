#include "server/http_server.h"

#include <httplib.h>

#include <sys/socket.h>

#include <chrono>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "server/auth.h"
#include "server/route_util.h"

namespace brisk::server {
namespace {

thread_local std::chrono::steady_clock::time_point t_request_start;

// httplib 0.11 listens with a backlog of 5: a burst of clients connecting at once overflows
// it and some connections fail. This exposes the listening socket so that its backlog can
// be raised (listen() again on a listening socket only changes the backlog).
class Listener : public httplib::Server {
 public:
  void raise_backlog() {
    const socket_t fd = svr_sock_;
    if (fd != INVALID_SOCKET) ::listen(fd, SOMAXCONN);
  }
};

Dialect dialect_of(const std::string& path) {
  return path.rfind("/v1/messages", 0) == 0 ? Dialect::anthropic : Dialect::openai;
}

}  // namespace

HttpServer::HttpServer(ModelRegistry& registry, ServerOptions options)
    : state_(std::make_unique<ServerState>()), http_(std::make_unique<Listener>()) {
  state_->registry = &registry;
  state_->options = std::move(options);
  ServerState* st = state_.get();
  const int32_t threads = std::max(4, st->options.http_threads);
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
  // Audio uploads may be larger than JSON bodies: httplib skips (never buffers) a body above
  // the larger limit with a 413; the routes hold their own bodies to theirs (route_util.h).
  http_->set_payload_max_length(std::max(st->options.max_body_bytes, st->options.max_audio_bytes));
  http_->set_keep_alive_max_count(1000);
  http_->set_read_timeout(60);
  http_->set_write_timeout(60);

  http_->set_pre_routing_handler([st](const httplib::Request& req, httplib::Response& res) {
    t_request_start = std::chrono::steady_clock::now();
    if (st->options.admit_peer && !st->options.admit_peer(req.remote_port)) {
      reply_error(res, dialect_of(req.path), 403, "this server accepts requests only through its Unix socket");
      st->metrics.count_request("auth", 403);
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    if (!request_authorized(st->options.api_key, req.get_header_value("Authorization"),
                            req.get_header_value("x-api-key"))) {
      const bool given = req.has_header("Authorization") || req.has_header("x-api-key");
      reply_error(res, dialect_of(req.path), 401,
                  given ? "invalid API key" : "missing API key (send 'Authorization: Bearer KEY' or 'x-api-key: KEY')");
      st->metrics.count_request("auth", 401);
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  // Replies httplib produces itself (unknown route 404, body too large 413, bad request 400)
  // get the dialect's error body.
  http_->set_error_handler([st](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string msg;
    switch (res.status) {
      case 404: msg = str_cat("no route for ", req.method, " ", req.path); break;
      case 413: msg = str_cat("request body exceeds the limit of ", st->options.max_body_bytes, " bytes"); break;
      case 405: msg = str_cat("method ", req.method, " not allowed on ", req.path); break;
      default: msg = str_cat("HTTP error ", res.status);
    }
    const int status = res.status;
    reply_error(res, dialect_of(req.path), status, msg);
  });

  http_->set_logger([st](const httplib::Request& req, const httplib::Response& res) {
    if (!st->options.log_requests) return;
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_request_start).count();
    log_write(LogLevel::info, str_cat("serve: ", req.remote_addr, " ", req.method, " ", req.path, " ", res.status, " ",
                                      req.body.size(), "B in ", int64_t(ms), " ms"));
  });

  http_->Get("/health", [st](const httplib::Request&, httplib::Response& res) {
    reply_json(res, {{"status", st->draining ? "draining" : "ok"},
                     {"models", st->registry->specs().size()},
                     {"resident", st->registry->resident().size()}},
               st->draining ? 503 : 200);
  });
  http_->Get("/metrics", [st](const httplib::Request& req, httplib::Response& res) {
    guarded(*st, Dialect::openai, "/metrics", req, res, [&] {
      res.set_content(st->metrics.render(*st->registry), "text/plain; version=0.0.4");
    });
  });
  register_openai_routes(*http_, *st);
  register_anthropic_routes(*http_, *st);
  register_audio_routes(*http_, *st);
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::bind() {
  const auto& o = state_->options;
  if (o.port == 0) {
    port_ = http_->bind_to_any_port(o.host);
    BRISK_CHECK(port_ > 0, "serve: cannot bind ", o.host, " on any port");
  } else {
    BRISK_CHECK(http_->bind_to_port(o.host, o.port), "serve: cannot bind ", o.host, ":", o.port,
                " (address in use or not available)");
    port_ = o.port;
  }
  static_cast<Listener*>(http_.get())->raise_backlog();
}

void HttpServer::serve() { http_->listen_after_bind(); }

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
  http_->stop();
}

}  // namespace brisk::server
