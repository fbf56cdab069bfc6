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
void guarded(ServerState& state, Dialect dialect, const char* route, const httplib::Request& req,
             httplib::Response& res, const std::function<void()>& fn);
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
