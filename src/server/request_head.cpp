#include "server/request_head.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace brisk::server {
namespace {

constexpr size_t kHeadMaxTargetBytes = 8192;   // as cpp-httplib's request-line limit
constexpr size_t kHeadMaxChunkLineBytes = 4096;

bool head_token_char(unsigned char c) {
  return std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(char(c)) != std::string_view::npos;
}

std::string head_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower((unsigned char)c));
  return out;
}

std::string_view head_trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

HeadParse head_error(int status, std::string what, const RequestHead* head = nullptr) {
  HeadParse p;
  p.status = HeadParse::Status::error;
  p.error_status = status;
  p.error = std::move(what);
  if (head) p.head = *head;  // what was read of it (its method and path name the route)
  return p;
}

// Whether a comma-separated header value lists `token` (case-insensitive).
bool head_lists_token(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    if (head_lower(head_trim(value.substr(0, comma))) == token) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

size_t request_leading_blank_bytes(std::string_view buf) {
  size_t i = 0;
  while (i < buf.size()) {
    if (buf[i] == '\n') ++i;
    else if (buf[i] == '\r' && i + 1 < buf.size() && buf[i + 1] == '\n') i += 2;
    else break;
  }
  return i;
}

HeadParse request_head_parse(std::string_view buf, size_t max_header_bytes, uint64_t max_body_bytes) {
  // The head ends at the first empty line.
  size_t end = std::string_view::npos;
  for (size_t i = buf.find('\n'); i != std::string_view::npos && i < max_header_bytes + 2; i = buf.find('\n', i + 1)) {
    if (i + 1 < buf.size() && buf[i + 1] == '\n') {
      end = i + 2;
      break;
    }
    if (i + 2 < buf.size() && buf[i + 1] == '\r' && buf[i + 2] == '\n') {
      end = i + 3;
      break;
    }
  }
  if (end == std::string_view::npos) {
    if (buf.size() > max_header_bytes) return head_error(431, str_cat("request headers exceed ", max_header_bytes, " bytes"));
    return {};
  }
  if (end > max_header_bytes) return head_error(431, str_cat("request headers exceed ", max_header_bytes, " bytes"));
  HeadParse out;
  RequestHead& h = out.head;
  h.header_bytes = end;

  // Request line: METHOD SP TARGET SP VERSION.
  size_t line_end = buf.find('\n');
  std::string_view line = head_trim(buf.substr(0, line_end));
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == 0 || sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return head_error(400, "malformed request line");
  h.method = std::string(line.substr(0, sp1));
  h.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
  h.version = std::string(line.substr(sp2 + 1));
  for (char c : h.method)
    if (!head_token_char((unsigned char)c)) return head_error(400, "malformed request method");
  if (h.target.empty()) return head_error(400, "malformed request target");
  if (h.target.size() > kHeadMaxTargetBytes) return head_error(414, str_cat("request target exceeds ", kHeadMaxTargetBytes, " bytes"));
  for (char c : h.target)
    if ((unsigned char)c <= 0x20 || c == 0x7f) return head_error(400, "malformed request target");
  if (h.version != "HTTP/1.1" && h.version != "HTTP/1.0") {
    if (h.version.rfind("HTTP/", 0) == 0) return head_error(505, str_cat("HTTP version '", h.version, "' is not supported"));
    return head_error(400, "malformed request line");
  }
  h.path = h.target.substr(0, h.target.find('?'));
  h.keep_alive = h.version == "HTTP/1.1";

  bool has_length = false, has_chunked = false;
  for (size_t pos = line_end + 1; pos < end;) {
    const size_t nl = buf.find('\n', pos);
    std::string_view field = buf.substr(pos, nl - pos);
    const size_t field_start = pos;
    pos = nl + 1;
    if (!field.empty() && field.back() == '\r') field.remove_suffix(1);
    if (field.empty()) break;  // the blank line
    if (field.front() == ' ' || field.front() == '\t') return head_error(400, "folded header lines are not accepted", &h);
    const size_t colon = field.find(':');
    if (colon == std::string_view::npos || colon == 0) return head_error(400, "malformed header line", &h);
    for (size_t i = 0; i < colon; ++i)
      if (!head_token_char((unsigned char)field[i])) return head_error(400, "malformed header name", &h);
    const std::string name = head_lower(field.substr(0, colon));
    const std::string_view value = head_trim(field.substr(colon + 1));
    if (name == "content-length") {
      uint64_t n = 0;
      if (value.empty() || value.size() > 19) return head_error(400, "malformed Content-Length", &h);
      for (char c : value) {
        if (!std::isdigit((unsigned char)c)) return head_error(400, "malformed Content-Length", &h);
        n = n * 10 + uint64_t(c - '0');
      }
      if (has_length && n != h.content_length) return head_error(400, "conflicting Content-Length headers", &h);
      has_length = true;
      h.content_length = n;
    } else if (name == "transfer-encoding") {
      if (has_chunked || head_lower(value) != "chunked")
        return head_error(501, str_cat("Transfer-Encoding '", std::string(value), "' is not supported (only 'chunked')"), &h);
      has_chunked = true;
    } else if (name == "connection") {
      if (head_lists_token(value, "close")) h.keep_alive = false;
      else if (head_lists_token(value, "keep-alive")) h.keep_alive = true;
    } else if (name == "expect") {
      if (head_lower(value) != "100-continue") return head_error(417, str_cat("Expect '", std::string(value), "' is not supported"), &h);
      h.expect_continue = true;
      h.expect_offset = field_start;
    } else if (name == "authorization") {
      h.has_authorization = true;
      h.authorization = std::string(value);
    } else if (name == "x-api-key") {
      h.has_api_key = true;
      h.api_key = std::string(value);
    }
  }
  if (has_length && has_chunked) return head_error(400, "both Content-Length and Transfer-Encoding are set", &h);
  if (has_chunked) {
    h.body = RequestHead::Body::chunked;
  } else if (has_length) {
    if (h.content_length > max_body_bytes)
      return head_error(413, str_cat("request body of ", h.content_length, " bytes exceeds the limit of ", max_body_bytes, " bytes"), &h);
    h.body = h.content_length > 0 ? RequestHead::Body::length : RequestHead::Body::none;
  } else if (h.method == "POST" || h.method == "PUT" || h.method == "PATCH") {
    return head_error(411, "a request body needs Content-Length or Transfer-Encoding: chunked", &h);
  }
  out.status = HeadParse::Status::complete;
  return out;
}

ChunkedBodyScanner::Result ChunkedBodyScanner::scan(std::string_view data) {
  // After a size line: the chunk's data, or the end of the body for a chunk of size 0.
  const auto size_line_done = [&] {
    line_bytes_ = 0;
    size_digits_ = 0;
    if (chunk_left_ == 0) {
      state_ = State::last_cr;
      return true;
    }
    if (chunk_left_ > max_data_ - data_total_) return false;
    data_total_ += chunk_left_;
    state_ = State::data;
    return true;
  };
  while (pos_ < data.size()) {
    if (pos_ >= max_raw_) return Result::too_large;
    const char c = data[pos_];
    switch (state_) {
      case State::size:
      case State::ext:
        if (++line_bytes_ > kHeadMaxChunkLineBytes) return Result::malformed;
        if (c == '\r') {
          if (size_digits_ == 0) return Result::malformed;
          state_ = State::size_lf;
        } else if (c == '\n') {
          if (size_digits_ == 0) return Result::malformed;
          if (!size_line_done()) return Result::too_large;
        } else if (state_ == State::size && std::isxdigit((unsigned char)c)) {
          if (++size_digits_ > 15) return Result::too_large;
          chunk_left_ = chunk_left_ * 16 + uint64_t(std::isdigit((unsigned char)c) ? c - '0' : std::tolower(c) - 'a' + 10);
        } else if (c == ';' || c == ' ' || c == '\t') {
          state_ = State::ext;  // chunk extensions are ignored
        } else if (state_ == State::size) {
          return Result::malformed;
        }
        ++pos_;
        break;
      case State::size_lf:
        if (c != '\n') return Result::malformed;
        ++pos_;
        if (!size_line_done()) return Result::too_large;
        break;
      case State::data: {
        const uint64_t take = std::min<uint64_t>(chunk_left_, data.size() - pos_);
        pos_ += size_t(take);
        chunk_left_ -= take;
        if (chunk_left_ == 0) state_ = State::data_cr;
        break;
      }
      case State::data_cr:
        if (c != '\r') return Result::malformed;
        state_ = State::data_lf;
        ++pos_;
        break;
      case State::data_lf:
        if (c != '\n') return Result::malformed;
        state_ = State::size;
        ++pos_;
        break;
      case State::last_cr:
        // Trailer fields are not accepted (the request parser behind this does not read them).
        if (c == '\n') {
          end_ = ++pos_;
          return Result::complete;
        }
        if (c != '\r') return Result::malformed;
        state_ = State::last_lf;
        ++pos_;
        break;
      case State::last_lf:
        if (c != '\n') return Result::malformed;
        end_ = ++pos_;
        return Result::complete;
    }
  }
  return pos_ > max_raw_ ? Result::too_large : Result::more;
}

}  // namespace brisk::server
