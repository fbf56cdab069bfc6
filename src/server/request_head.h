// What the connection layer reads of an HTTP/1.1 request before a worker sees it: the request
// line, the headers that decide framing, access and routing, and where the request ends in
// the bytes received (so the whole request is buffered first and a worker never waits on a
// slow client). Untrusted input: every size is bounded and every malformed request gets the
// status to answer with (400, 411, 413, 431, 501, 505).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace brisk::server {

struct RequestHead {
  std::string method;
  std::string target;             // as sent ("/v1/models?x=1")
  std::string path;               // target up to '?'
  std::string version;            // "HTTP/1.1" or "HTTP/1.0"
  size_t header_bytes = 0;        // request line + headers + blank line
  enum class Body { none, length, chunked } body = Body::none;
  uint64_t content_length = 0;    // Body::length
  bool expect_continue = false;   // Expect: 100-continue
  size_t expect_offset = 0;       // where the Expect header's name starts (0: none)
  bool keep_alive = true;         // HTTP/1.1 without "Connection: close", or 1.0 with keep-alive
  bool has_authorization = false, has_api_key = false;
  std::string authorization;      // Authorization header value
  std::string api_key;            // x-api-key header value
};

struct HeadParse {
  enum class Status { incomplete, complete, error } status = Status::incomplete;
  int error_status = 0;           // Status::error: the HTTP status to answer
  std::string error;              // Status::error: what is wrong
  RequestHead head;               // Status::complete; on errors after the request line, that line
};

// Parses `buf` (the bytes received so far, leading blank lines already skipped). A head longer
// than `max_header_bytes` is an error 431; a Content-Length above `max_body_bytes` an error 413.
HeadParse request_head_parse(std::string_view buf, size_t max_header_bytes, uint64_t max_body_bytes);

// The end of a chunked body, fed the bytes after the head as they arrive.
class ChunkedBodyScanner {
 public:
  // `max_data`: limit of the sum of chunk sizes; `max_raw`: limit of the bytes of the body as
  // sent (sizes, extensions, trailers included).
  ChunkedBodyScanner(uint64_t max_data, uint64_t max_raw) : max_data_(max_data), max_raw_(max_raw) {}
  enum class Result { more, complete, malformed, too_large };
  // Scans bytes [scanned(), data.size()) of the body; data is everything after the head.
  Result scan(std::string_view data);
  size_t end() const { return end_; }      // Result::complete: the body's length in bytes
  size_t scanned() const { return pos_; }

 private:
  enum class State { size, ext, size_lf, data, data_cr, data_lf, last_cr, last_lf };
  uint64_t max_data_, max_raw_;
  State state_ = State::size;
  size_t pos_ = 0, end_ = 0;
  uint64_t chunk_left_ = 0, data_total_ = 0;  // data_total_: sizes announced so far
  int size_digits_ = 0;
  size_t line_bytes_ = 0;
};

// Bytes of blank lines (CRLF or LF) at the start of `buf`, which a server ignores before a
// request line (RFC 9112 2.2).
size_t request_leading_blank_bytes(std::string_view buf);

}  // namespace brisk::server
