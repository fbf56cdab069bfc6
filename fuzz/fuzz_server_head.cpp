// libFuzzer target: the connection layer's request reading on arbitrary bytes: the head parser
// (request line, headers, framing, limits) and, after a parsed head, the chunked-body scanner fed
// the rest in pieces. Checks: a complete head ends inside the input and within the head limit;
// an error carries a 4xx / 5xx status and a message; the scanner never reads past its input,
// never claims an end beyond it, and agrees with itself when fed in one piece.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/request_head.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace brisk::server;
  if (size < 1 || size > (256u << 10)) return 0;
  const size_t piece = 1 + (data[0] & 31);
  const std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t skip = request_leading_blank_bytes(in);
  const std::string_view buf = in.substr(skip);
  const HeadParse p = request_head_parse(buf, 4096, 1u << 16);
  if (p.status == HeadParse::Status::error) {
    if (p.error_status < 400 || p.error_status > 599 || p.error.empty()) std::abort();
    return 0;
  }
  if (p.status == HeadParse::Status::incomplete) return 0;
  if (p.head.header_bytes > buf.size() || p.head.header_bytes > 4096) std::abort();
  if (p.head.body != RequestHead::Body::chunked) return 0;
  const std::string_view body = buf.substr(p.head.header_bytes);
  ChunkedBodyScanner whole(1u << 16, 1u << 17), pieces(1u << 16, 1u << 17);
  const auto r = whole.scan(body);
  if (whole.scanned() > body.size()) std::abort();
  if (r == ChunkedBodyScanner::Result::complete && whole.end() > body.size()) std::abort();
  auto q = ChunkedBodyScanner::Result::more;
  for (size_t n = piece; q == ChunkedBodyScanner::Result::more; n += piece) {
    q = pieces.scan(body.substr(0, std::min(n, body.size())));
    if (n >= body.size()) break;
  }
  if (q != r || (r == ChunkedBodyScanner::Result::complete && pieces.end() != whole.end())) std::abort();
  return 0;
}
