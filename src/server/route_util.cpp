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

void guarded(Dialect dialect, const httplib::Request& req, httplib::Response& res, const std::function<void()>& fn) {
  try {
    fn();
  } catch (const HttpError& e) {
    reply_error(res, dialect, e.status(), e.what(), e.param());
  } catch (const Error& e) {
    reply_error(res, dialect, 400, e.what());
  } catch (const std::exception& e) {
    log_error("serve: ", req.method, " ", req.path, " failed: ", e.what());
    reply_error(res, dialect, 500, str_cat("internal error: ", e.what()));
  }
}

namespace {

void record_route(ServerState& state, const char* method, const std::string& pattern, const std::string& label) {
  state.routes.push_back({.method = method, .pattern = std::regex(pattern), .label = label});
}

}  // namespace

void add_get_route(httplib::Server& http, ServerState& state, const std::string& pattern, const std::string& label,
                   Dialect dialect, RouteHandler handler) {
  record_route(state, "GET", pattern, label);
  http.Get(pattern, [dialect, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
    guarded(dialect, req, res, [&] { handler(req, res); });
  });
}

void add_delete_route(httplib::Server& http, ServerState& state, const std::string& pattern, const std::string& label,
                      Dialect dialect, RouteHandler handler) {
  record_route(state, "DELETE", pattern, label);
  http.Delete(pattern, [dialect, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
    guarded(dialect, req, res, [&] { handler(req, res); });
  });
}

void add_post_route(httplib::Server& http, ServerState& state, const std::string& pattern, const std::string& label,
                    Dialect dialect, RouteHandler handler) {
  record_route(state, "POST", pattern, label);
  const size_t limit = state.options.max_body_bytes;
  http.Post(pattern, [dialect, limit, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res,
                                                                    const httplib::ContentReader& reader) {
    std::string body;
    bool over = false;
    // The reader decodes Content-Encoding on the fly; each decoded piece is counted here, so a
    // small compressed body that inflates past the limit stops being decoded at the limit.
    const bool ok = reader([&](const char* data, size_t n) {
      if (n > limit - body.size()) {
        over = true;
        return false;
      }
      body.append(data, n);
      return true;
    });
    if (over) {
      reply_error(res, dialect, 413, str_cat("request body exceeds the limit of ", limit, " bytes (decoded)"));
      return;
    }
    if (!ok) {
      reply_error(res, dialect, 400, "the request body could not be read or decoded");
      return;
    }
    // The parser's Request is not const (only this signature says so); the body goes where
    // the handlers read it.
    const_cast<httplib::Request&>(req).body = std::move(body);
    guarded(dialect, req, res, [&] { handler(req, res); });
  });
}

void add_post_reader_route(httplib::Server& http, ServerState& state, const std::string& pattern,
                           const std::string& label, Dialect dialect, ReaderRouteHandler handler) {
  record_route(state, "POST", pattern, label);
  http.Post(pattern, [dialect, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res,
                                                             const httplib::ContentReader& reader) {
    guarded(dialect, req, res, [&] { handler(req, res, reader); });
  });
}

std::string route_label(const ServerState& state, const std::string& method, const std::string& path) {
  for (const auto& r : state.routes)
    if (r.method == method && std::regex_match(path, r.pattern)) return r.label;
  for (const auto& r : state.routes)
    if (std::regex_match(path, r.pattern)) return r.label;  // a known route, another method (405)
  return "unmatched";
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
