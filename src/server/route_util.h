// Helpers shared by the route files: error conversion, JSON replies, ids, session keys.
#pragma once
#include <functional>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "server/errors.h"
#include "server/http_server.h"

namespace brisk::server {

// Runs `fn`; HttpError / brisk::Error / anything else become the dialect's error body
// (400 for brisk::Error: the library's checks on request data, 500 otherwise).
void guarded(Dialect dialect, const httplib::Request& req, httplib::Response& res, const std::function<void()>& fn);

using RouteHandler = std::function<void(const httplib::Request&, httplib::Response&)>;
// Registers a route (a regex over the path, e.g. "/v1/models/(.+)") under a metrics label
// (e.g. "/v1/models/{id}"); the handler runs inside guarded(). POST routes read the body with
// the server's limit on its decoded size (gzip / deflate / br): over it, 413 and nothing else
// is read or decoded; a body that does not decode is a 400.
void add_get_route(httplib::Server& http, ServerState& state, const std::string& pattern, const std::string& label,
                   Dialect dialect, RouteHandler handler);
void add_post_route(httplib::Server& http, ServerState& state, const std::string& pattern, const std::string& label,
                    Dialect dialect, RouteHandler handler);
void add_delete_route(httplib::Server& http, ServerState& state, const std::string& pattern, const std::string& label,
                      Dialect dialect, RouteHandler handler);
// A POST route that reads its body itself through the reader (multipart uploads with their own
// limit, server/audio_api.cpp), inside guarded().
using ReaderRouteHandler =
    std::function<void(const httplib::Request&, httplib::Response&, const httplib::ContentReader&)>;
void add_post_reader_route(httplib::Server& http, ServerState& state, const std::string& pattern,
                           const std::string& label, Dialect dialect, ReaderRouteHandler handler);
// The label of the route a request matches ("unmatched" when none), for metrics.
std::string route_label(const ServerState& state, const std::string& method, const std::string& path);
void reply_json(httplib::Response& res, const nlohmann::json& body, int status = 200);
void reply_error(httplib::Response& res, Dialect dialect, int status, const std::string& message,
                 const std::string& param = {});
std::string random_id(const char* prefix);
// 64 random bits (a per-thread generator seeded from the OS).
uint64_t random_u64();
int64_t unix_now();
// x-brisk-session header, else the dialect's user field (may be "").
std::string session_key(const httplib::Request& req, const std::string& user_field);
// Refuses new generations while the server drains for shutdown (503).
void check_not_draining(const ServerState& state);

}  // namespace brisk::server
