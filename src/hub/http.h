// A small HTTP client over libcurl for the Hub: one request at a time per call, redirects
// followed by hand so that the token (Authorization) is sent only to the Hub's own origin and
// never to the storage host a download redirects to.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"

namespace brisk::hub {

// The Hub could not be reached or the transfer broke (as opposed to an HTTP error status).
class NetworkError : public Error {
 public:
  NetworkError(const std::string& what, bool transient) : Error(what), transient_(transient) {}
  bool transient() const { return transient_; }  // worth retrying (cut transfer, timeout)

 private:
  bool transient_;
};

struct HttpRequest {
  std::string url{};
  std::vector<std::string> headers{};    // extra request headers, e.g. "Range: bytes=100-"
  bool head = false;                   // HEAD instead of GET
  bool follow_redirects = true;        // at most 10 hops
  size_t max_body_bytes = 64u << 20;   // for bodies kept in memory
  // When set, the body of a 2xx answer streams here instead of into HttpResponse::body;
  // returning false aborts the transfer (HttpResponse::aborted).
  std::function<bool(const char* data, size_t n)> on_body{};
  // Called once the final answer's status and headers are known, before its body.
  std::function<void(long status, const std::map<std::string, std::string>& headers)> on_headers{};
};

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers{};  // of the final answer; names lowercase
  std::string body{};                            // non-2xx bodies, or 2xx without on_body
  std::string url{};                             // the final URL after redirects
  bool aborted = false;                        // on_body returned false
  // Transport failure (connection refused, cut transfer, ...): curl's code and message.
  int transport_error = 0;
  std::string transport_message{};

  std::string header(const std::string& lowercase_name) const;  // "" when absent
};

class HttpClient {
 public:
  // `endpoint`: the Hub origin ("https://huggingface.co"); `token` sent only there.
  HttpClient(std::string endpoint, std::string token);

  HttpResponse request(const HttpRequest& req) const;
  const std::string& endpoint() const { return endpoint_; }
  bool has_token() const { return !token_.empty(); }

 private:
  std::string endpoint_{};
  std::string token_{};
};

// "scheme://host:port" of a URL, lowercase, with the default port made explicit.
std::string url_origin(const std::string& url);
// Percent-encodes everything but unreserved characters and, when keep_slash, '/'.
std::string url_escape(const std::string& s, bool keep_slash);
// True for curl codes worth a retry with resume (cut transfer, timeout, reset).
bool transport_error_is_transient(int code);

}  // namespace brisk::hub
