#include "server/route_util.h"

#include <atomic>
#include <chrono>
#include <random>

#include "core/error.h"
#include "core/log.h"
#include "server/json_fields.h"

namespace brisk::server {

void reply_json(httplib::Response& res, const nlohmann::json& body, int status) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

void reply_error(httplib::Response& res, Dialect dialect, int status, const std::string& message,
                 const std::string& param) {
  reply_json(res, error_body(dialect, status, message, param), status);
}

void guarded(ServerState& state, Dialect dialect, const char* route, const httplib::Request& req,
             httplib::Response& res, const std::function<void()>& fn) {
  try {
    // The transport reads bodies up to the largest limit (audio uploads); JSON bodies keep theirs.
    if (req.body.size() > state.options.max_body_bytes)
      throw HttpError(413, str_cat("request body exceeds the limit of ", state.options.max_body_bytes, " bytes"));
    fn();
  } catch (const HttpError& e) {
    reply_error(res, dialect, e.status(), e.what(), e.param());
  } catch (const Error& e) {
    reply_error(res, dialect, 400, e.what());
  } catch (const std::exception& e) {
    log_error("serve: ", req.method, " ", req.path, " failed: ", e.what());
    reply_error(res, dialect, 500, str_cat("internal error: ", e.what()));
  }
  state.metrics.count_request(route, res.status);
}

uint64_t random_u64() {
  thread_local std::mt19937_64 rng{std::random_device{}() ^
                                   uint64_t(std::chrono::steady_clock::now().time_since_epoch().count())};
  return rng();
}

std::string random_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  // 24 hex digits: 16 from (random ^ counter), 8 more from a second draw.
  const uint64_t a = random_u64() ^ counter.fetch_add(1);
  const uint64_t b = random_u64();
  static const char* hex = "0123456789abcdef";
  std::string out = prefix;
  for (int i = 0; i < 16; ++i) out += hex[(a >> (4 * i)) & 15];
  for (int i = 0; i < 8; ++i) out += hex[(b >> (4 * i)) & 15];
  return out;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string session_key(const httplib::Request& req, const std::string& user_field) {
  std::string s = req.get_header_value("x-brisk-session");
  if (s.empty()) s = user_field;
  if (s.size() > 256) throw HttpError(400, "session key (x-brisk-session or user) is longer than 256 bytes");
  return s;
}

void check_not_draining(const ServerState& state) {
  if (state.draining.load()) throw HttpError(503, "server is shutting down");
}

}  // namespace brisk::server
