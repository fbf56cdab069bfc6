// `brisk serve`'s HTTP front: routes of the OpenAI and Anthropic dialects, API key check,
// body size limit, one log line per request, /health, /metrics, graceful shutdown.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "server/metrics.h"
#include "server/model_registry.h"

namespace httplib { class Server; }

namespace brisk::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                      // 0: any free port (see HttpServer::port())
  std::string api_key;                  // "" : no auth (loopback only)
  size_t max_body_bytes = 8u << 20;
  size_t max_audio_bytes = 25u << 20;   // multipart audio uploads (server/audio_api.cpp)
  int32_t max_tokens_ceiling = 0;       // per-request completion ceiling; 0: the context size
  int32_t http_threads = 64;            // concurrent connections served
  double shutdown_grace_seconds = 10.0; // in-flight requests may finish within this time
  bool log_requests = true;
  // When set (--unix), a TCP request is served only if this accepts its peer port.
  std::function<bool(int peer_port)> admit_peer{};
};

// What the route handlers share.
struct ServerState {
  ModelRegistry* registry = nullptr;
  ServerOptions options;
  Metrics metrics;
  std::atomic<bool> draining{false};
  std::atomic<int32_t> in_flight{0};    // generation requests not yet answered
};

// Counts a generation request as in flight for its lifetime.
class InFlight {
 public:
  explicit InFlight(ServerState& s) : s_(s) { s_.in_flight++; }
  ~InFlight() { s_.in_flight--; }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  ServerState& s_;
};

void register_openai_routes(httplib::Server& http, ServerState& state);
void register_anthropic_routes(httplib::Server& http, ServerState& state);
void register_audio_routes(httplib::Server& http, ServerState& state);

class HttpServer {
 public:
  HttpServer(ModelRegistry& registry, ServerOptions options);
  ~HttpServer();
  // Binds the listening socket (throws brisk::Error naming the address on failure).
  void bind();
  int port() const { return port_; }
  // Serves until stop(); returns after in-flight requests ended.
  void serve();
  // Graceful stop (safe from any thread): refuse new generations, let in-flight ones finish
  // within the grace period, cancel the rest, close the listener.
  void stop();
  ServerState& state() { return *state_; }

 private:
  std::unique_ptr<ServerState> state_;
  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
};

}  // namespace brisk::server
