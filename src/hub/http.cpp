#include "hub/http.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <mutex>

namespace brisk::hub {
namespace {

void global_init_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Transfer {
  const HttpRequest* req = nullptr;
  HttpResponse* resp = nullptr;
  bool headers_done = false;
  bool body_to_sink = false;
  bool overflow = false;
};

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  const std::string line(data, n);
  if (line.rfind("HTTP/", 0) == 0) {  // a new answer (after 100-continue or a redirect)
    t->resp->headers.clear();
    const size_t sp = line.find(' ');
    t->resp->status = sp == std::string::npos ? 0 : std::strtol(line.c_str() + sp + 1, nullptr, 10);
    return n;
  }
  const size_t colon = line.find(':');
  if (colon != std::string::npos && t->resp->headers.size() < 256)
    t->resp->headers[lower(trim(line.substr(0, colon)))] = trim(line.substr(colon + 1));
  return n;
}

size_t on_write(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  if (!t->headers_done) {
    t->headers_done = true;
    const long st = t->resp->status;
    t->body_to_sink = st >= 200 && st < 300 && t->req->on_body != nullptr;
    if (t->req->on_headers && st >= 200 && st < 300) t->req->on_headers(st, t->resp->headers);
  }
  if (t->body_to_sink) {
    if (!t->req->on_body(data, n)) {
      t->resp->aborted = true;
      return 0;
    }
    return n;
  }
  if (t->resp->body.size() + n > t->req->max_body_bytes) {
    t->overflow = true;
    return 0;
  }
  t->resp->body.append(data, n);
  return n;
}

// One hop, no redirects followed.
HttpResponse perform(const HttpRequest& req, const std::string& url,
                     const std::vector<std::string>& headers) {
  global_init_once();
  HttpResponse resp;
  resp.url = url;
  CURL* curl = curl_easy_init();
  BRISK_CHECK(curl != nullptr, "cannot initialize libcurl");
  curl_slist* list = nullptr;
  for (const auto& h : headers) list = curl_slist_append(list, h.c_str());
  Transfer t;
  t.req = &req;
  t.resp = &resp;
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "brisk/" BRISK_VERSION);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 15L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);   // abort a transfer stalled
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 60L);   // for a minute
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
  if (req.head) curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  const CURLcode rc = curl_easy_perform(curl);
  if (rc == CURLE_OK && !t.headers_done && req.on_headers && resp.status >= 200 &&
      resp.status < 300)
    req.on_headers(resp.status, resp.headers);  // empty body
  char* redirect = nullptr;
  if (curl_easy_getinfo(curl, CURLINFO_REDIRECT_URL, &redirect) == CURLE_OK && redirect)
    resp.headers["location"] = redirect;  // made absolute by curl
  if (rc != CURLE_OK && !resp.aborted) {
    resp.transport_error = int(rc);
    resp.transport_message = errbuf[0] ? std::string(errbuf) : curl_easy_strerror(rc);
    if (t.overflow) resp.transport_message = "answer larger than expected";
  }
  curl_slist_free_all(list);
  curl_easy_cleanup(curl);
  return resp;
}

}  // namespace

std::string HttpResponse::header(const std::string& lowercase_name) const {
  const auto it = headers.find(lowercase_name);
  return it == headers.end() ? std::string() : it->second;
}

std::string url_origin(const std::string& url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return "";
  const std::string scheme = lower(url.substr(0, scheme_end));
  const size_t host_start = scheme_end + 3;
  size_t host_end = url.find_first_of("/?#", host_start);
  if (host_end == std::string::npos) host_end = url.size();
  std::string host = lower(url.substr(host_start, host_end - host_start));
  const size_t at = host.rfind('@');
  if (at != std::string::npos) host = host.substr(at + 1);
  if (host.find(':') == std::string::npos || host.back() == ']')
    host += scheme == "https" ? ":443" : ":80";
  return scheme + "://" + host;
}

std::string url_escape(const std::string& s, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out.push_back(char(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

bool transport_error_is_transient(int code) {
  switch (CURLcode(code)) {
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

HttpClient::HttpClient(std::string endpoint, std::string token)
    : endpoint_(std::move(endpoint)), token_(std::move(token)) {}

HttpResponse HttpClient::request(const HttpRequest& req) const {
  const std::string hub_origin = url_origin(endpoint_);
  std::string url = req.url;
  for (int hop = 0; hop <= 10; ++hop) {
    std::vector<std::string> headers = req.headers;
    if (!token_.empty() && url_origin(url) == hub_origin)
      headers.push_back("Authorization: Bearer " + token_);
    HttpResponse resp = perform(req, url, headers);
    const bool redirect = resp.status == 301 || resp.status == 302 || resp.status == 303 ||
                          resp.status == 307 || resp.status == 308;
    if (!redirect || !req.follow_redirects || resp.transport_error != 0) return resp;
    const std::string next = resp.header("location");
    if (next.empty()) return resp;
    const size_t scheme_end = next.find("://");
    const std::string scheme = scheme_end == std::string::npos ? "" : lower(next.substr(0, scheme_end));
    BRISK_CHECK(scheme == "http" || scheme == "https", "the Hub redirected ", url,
                " to an unsupported location ", next);
    url = next;
  }
  fail("too many redirects starting at ", req.url);
}

}  // namespace brisk::hub
