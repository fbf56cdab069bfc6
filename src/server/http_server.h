// `brisk serve`'s HTTP front: the connection layer (connections.h: limits, deadlines, the API
// key, whole requests buffered before a worker runs them) in front of cpp-httplib's request
// parser and router, the routes of the OpenAI, Anthropic and Ollama dialects and the chat
// page, the decoded body limit,
// one log line and one metrics count per reply, /health, /metrics, graceful shutdown.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "server/connections.h"
#include "server/metrics.h"
#include "server/model_registry.h"

namespace httplib { class Server; }

namespace brisk::server {

class ResponseStore;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                      // 0: any free port (see HttpServer::port())
  std::string unix_path;                // set: listen on this Unix socket instead of TCP
  std::string api_key;                  // "" : no auth (loopback only)
  size_t max_body_bytes = 8u << 20;     // request body, as sent and decoded
  size_t max_audio_bytes = 25u << 20;   // multipart audio uploads (server/audio_api.cpp)
  int32_t max_tokens_ceiling = 0;       // per-request completion ceiling; 0: the context size
  int32_t http_threads = 64;            // requests run at once (workers)
  int32_t max_connections = 1024;       // open connections
  int32_t max_client_connections = 256; // open connections per client address
  double header_timeout_seconds = 10.0; // to receive a request's headers
  double body_timeout_seconds = 60.0;   // to receive its body
  double shutdown_grace_seconds = 10.0; // in-flight requests may finish within this time
  int32_t stored_responses = 256;       // /v1/responses kept for previous_response_id (LRU)
  int ollama_port = -1;                 // >= 0: a second TCP listener (same routes and limits),
                                        // for Ollama clients (0: any free port)
  bool webui = true;                    // the chat page at /
  bool log_requests = true;
};

// A route as registered: for 405 answers (Allow) and the route label of metrics.
struct RouteInfo {
  std::string method;
  std::regex pattern;
  std::string label;   // "/v1/models/{id}"
};

// What the route handlers share.
struct ServerState {
  ModelRegistry* registry = nullptr;
  ServerOptions options;
  Metrics metrics;
  std::vector<RouteInfo> routes;        // filled while routes are registered, read-only after
  std::unique_ptr<ResponseStore> responses;
  std::atomic<bool> draining{false};
  std::atomic<int32_t> in_flight{0};    // generation requests not yet answered
  ~ServerState();
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
void register_responses_routes(httplib::Server& http, ServerState& state);
void register_ollama_routes(httplib::Server& http, ServerState& state);
void register_embeddings_routes(httplib::Server& http, ServerState& state);  // embeddings_api.cpp
// GET / (the chat page, or a line saying the server runs when the page is off) and its files.
void register_webui_routes(httplib::Server& http, ServerState& state);

// For the request the calling worker thread runs: a cheap check "has its client gone away?"
// (the peer closed or reset the connection); always false outside a request.
std::function<bool()> client_disconnect_probe();
// When the request the calling worker thread runs was handed to the router (metrics).
std::chrono::steady_clock::time_point request_arrival_time();

class HttpServer {
 public:
  HttpServer(ModelRegistry& registry, ServerOptions options);
  ~HttpServer();
  // Binds the listening socket, TCP or Unix (throws brisk::Error naming the address).
  void bind();
  int port() const { return port_; }
  int ollama_port() const { return ollama_port_; }  // -1 without the second listener
  // Serves until stop(); returns after in-flight requests ended.
  void serve();
  // Graceful stop (safe from any thread): refuse new generations, let in-flight ones finish
  // within the grace period, cancel the rest, close the listener.
  void stop();
  ServerState& state() { return *state_; }
  int32_t open_connections() const;

 private:
  class Router;
  std::unique_ptr<ServerState> state_;
  std::unique_ptr<Router> http_;
  std::unique_ptr<ConnectionLoop> loop_;
  std::unique_ptr<ConnectionLoop> ollama_loop_;  // --ollama-port: same hooks and limits
  int port_ = 0;
  int ollama_port_ = -1;
  std::atomic<bool> stopping_{false};
};

}  // namespace brisk::server
