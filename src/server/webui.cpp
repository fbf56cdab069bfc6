// The chat page: GET / serves webui/index.html, GET /webui/FILE the page's scripts and styles,
// all from the bytes embedded at build time (webui_assets.h). Each reply has a strong ETag
// (a conditional request with it is a 304) and `Cache-Control: no-cache` (revalidated on
// every load, so a new binary's page is never mixed with an old script). With the page off
// (--no-webui), GET / answers a plain line, as Ollama's server does (clients probe it).
#include <httplib.h>

#include "core/error.h"
#include "server/route_util.h"
#include "server/webui_assets.h"

namespace brisk::server {
namespace {

const WebAsset* find_asset(std::string_view path) {
  for (const WebAsset& a : webui_assets())
    if (a.path == path) return &a;
  return nullptr;
}

void reply_asset(const WebAsset& a, const httplib::Request& req, httplib::Response& res) {
  res.set_header("ETag", std::string(a.etag));
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Content-Type-Options", "nosniff");
  if (a.path.ends_with(".html")) {
    // Scripts and styles come from this server only; model output can never load or run any.
    res.set_header("Content-Security-Policy",
                   "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                   "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'");
    res.set_header("Referrer-Policy", "no-referrer");
  }
  const std::string inm = req.get_header_value("If-None-Match");
  if (!inm.empty() && inm.find(std::string(a.etag)) != std::string::npos) {
    res.status = 304;
    return;
  }
  res.status = 200;
  res.set_content(std::string(a.bytes), std::string(a.content_type));
}

}  // namespace

void register_webui_routes(httplib::Server& http, ServerState& state) {
  const bool on = state.options.webui;
  add_get_route(http, state, "/", "/", Dialect::openai, [on](const httplib::Request& req, httplib::Response& res) {
    const WebAsset* index = on ? find_asset("index.html") : nullptr;
    if (!index) {
      res.status = 200;
      res.set_content("brisk is running\n", "text/plain; charset=utf-8");
      return;
    }
    reply_asset(*index, req, res);
  });
  if (!on) return;
  add_get_route(http, state, "/webui/([A-Za-z0-9_.-]+)", "/webui/{file}", Dialect::openai,
                [](const httplib::Request& req, httplib::Response& res) {
                  const std::string name = req.matches[1];
                  const WebAsset* a = name == "index.html" ? nullptr : find_asset(name);
                  if (!a) throw HttpError(404, str_cat("no file ", req.path));
                  reply_asset(*a, req, res);
                });
}

}  // namespace brisk::server
