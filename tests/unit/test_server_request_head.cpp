// The connection layer's request reading: heads (framing, limits, the headers it acts on),
// chunked bodies scanned as they arrive, and the listening socket (no shared ports,
// TCP_NODELAY on accepted connections).
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "core/error.h"
#include "server/listen_socket.h"
#include "server/request_head.h"

using namespace brisk;
using namespace brisk::server;

namespace {

HeadParse head_of(const std::string& s, uint64_t max_body = 1000) { return request_head_parse(s, 4096, max_body); }

}  // namespace

TEST(ServerRequestHead, CompleteHeadsAndTheirFraming) {
  HeadParse p = head_of("GET /v1/models?x=1 HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer k\r\n\r\nrest");
  ASSERT_EQ(p.status, HeadParse::Status::complete);
  EXPECT_EQ(p.head.method, "GET");
  EXPECT_EQ(p.head.path, "/v1/models");
  EXPECT_EQ(p.head.header_bytes, std::string("GET /v1/models?x=1 HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer k\r\n\r\n").size());
  EXPECT_EQ(p.head.body, RequestHead::Body::none);
  EXPECT_TRUE(p.head.keep_alive);
  EXPECT_EQ(p.head.authorization, "Bearer k");

  p = head_of("POST /v1/chat/completions HTTP/1.1\r\ncontent-length: 12\r\nX-Api-Key: k2\r\nConnection: close\r\n\r\n");
  ASSERT_EQ(p.status, HeadParse::Status::complete);
  EXPECT_EQ(p.head.body, RequestHead::Body::length);
  EXPECT_EQ(p.head.content_length, 12u);
  EXPECT_FALSE(p.head.keep_alive);
  EXPECT_TRUE(p.head.has_api_key);
  EXPECT_EQ(p.head.api_key, "k2");

  p = head_of("POST /x HTTP/1.1\r\nTransfer-Encoding: Chunked\r\nExpect: 100-continue\r\n\r\n");
  ASSERT_EQ(p.status, HeadParse::Status::complete);
  EXPECT_EQ(p.head.body, RequestHead::Body::chunked);
  EXPECT_TRUE(p.head.expect_continue);

  p = head_of("GET / HTTP/1.0\r\n\r\n");
  ASSERT_EQ(p.status, HeadParse::Status::complete);
  EXPECT_FALSE(p.head.keep_alive);
}

TEST(ServerRequestHead, IncompleteHeadsWait) {
  EXPECT_EQ(head_of("GET /health HT").status, HeadParse::Status::incomplete);
  EXPECT_EQ(head_of("GET /health HTTP/1.1\r\nHost: a\r\n").status, HeadParse::Status::incomplete);
  EXPECT_EQ(request_leading_blank_bytes("\r\n\nGET"), 3u);
}

TEST(ServerRequestHead, BadHeadsGetTheirStatus) {
  const std::vector<std::pair<std::string, int>> cases = {
      {"POST /x HTTP/1.1\r\nContent-Length: 1001\r\n\r\n", 413},
      {"POST /x HTTP/1.1\r\n\r\n", 411},
      {"POST /x HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
      {"POST /x HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"POST /x HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 400},
      {"POST /x HTTP/1.1\r\nContent-Length: -3\r\n\r\n", 400},
      {"POST /x HTTP/1.1\r\nExpect: magic\r\nContent-Length: 3\r\n\r\n", 417},
      {"GET /x HTTP/2.0\r\n\r\n", 505},
      {"GET /x\r\n\r\n", 400},
      {"GET /x HTTP/1.1\r\n folded: yes\r\n\r\n", 400},
      {"GET /x HTTP/1.1\r\nBad Header: 1\r\n\r\n", 400},
      {"GET /" + std::string(9000, 'a') + " HTTP/1.1\r\n\r\n", 431},  // over the 4096-byte head limit
      {std::string(5000, 'G'), 431},
  };
  for (const auto& [text, status] : cases) {
    const HeadParse p = head_of(text);
    EXPECT_EQ(p.status, HeadParse::Status::error) << text.substr(0, 80);
    EXPECT_EQ(p.error_status, status) << text.substr(0, 80) << ": " << p.error;
    EXPECT_FALSE(p.error.empty());
  }
  const HeadParse long_target = request_head_parse("GET /" + std::string(9000, 'a') + " HTTP/1.1\r\n\r\n", 65536, 10);
  EXPECT_EQ(long_target.error_status, 414);
}

TEST(ServerRequestHead, ChunkedBodiesEndWhereTheLastChunkEnds) {
  const std::string body = "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\nNEXT";
  ChunkedBodyScanner whole(100, 1000);
  ASSERT_EQ(whole.scan(body), ChunkedBodyScanner::Result::complete);
  EXPECT_EQ(whole.end(), body.size() - 4);
  // Byte by byte, as a slow client sends it.
  ChunkedBodyScanner slow(100, 1000);
  ChunkedBodyScanner::Result r = ChunkedBodyScanner::Result::more;
  for (size_t n = 1; n <= body.size() && r == ChunkedBodyScanner::Result::more; ++n) r = slow.scan(body.substr(0, n));
  ASSERT_EQ(r, ChunkedBodyScanner::Result::complete);
  EXPECT_EQ(slow.end(), body.size() - 4);
}

TEST(ServerRequestHead, ChunkedBodiesOverTheLimitsOrMalformedStopEarly) {
  // The sizes announced go over the data limit: refused at the size line, before the data.
  ChunkedBodyScanner big(100, 1000);
  EXPECT_EQ(big.scan("40\r\n" + std::string(64, 'a') + "\r\n40\r\n"), ChunkedBodyScanner::Result::too_large);
  ChunkedBodyScanner huge(100, 1000);
  EXPECT_EQ(huge.scan("ffffffffffffffffff\r\n"), ChunkedBodyScanner::Result::too_large);
  // One-byte chunks: the framing counts against the raw limit.
  std::string tiny;
  for (int i = 0; i < 100; ++i) tiny += "1\r\na\r\n";
  ChunkedBodyScanner raw(1000, 200);
  EXPECT_EQ(raw.scan(tiny), ChunkedBodyScanner::Result::too_large);
  for (const std::string bad : {"zz\r\n", "5\r\nhelloXX", "\r\n", "3\r\nabc\r\n0\r\nTrailer: x\r\n\r\n"}) {
    ChunkedBodyScanner s(100, 1000);
    EXPECT_EQ(s.scan(bad), ChunkedBodyScanner::Result::malformed) << bad;
  }
  ChunkedBodyScanner endless_ext(100, 100000);
  EXPECT_EQ(endless_ext.scan("5;" + std::string(5000, 'x')), ChunkedBodyScanner::Result::malformed);
}

TEST(ServerListenSocket, APortInUseIsRefusedNotShared) {
  ListenSocket a = ListenSocket::tcp("127.0.0.1", 0);
  ASSERT_GT(a.port(), 0);
  try {
    ListenSocket b = ListenSocket::tcp("127.0.0.1", a.port());
    ADD_FAILURE() << "a second socket listens on port " << a.port();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("address in use"), std::string::npos) << e.what();
  }
}

TEST(ServerListenSocket, AcceptedConnectionsHaveNoDelaySet) {
  ListenSocket s = ListenSocket::tcp("127.0.0.1", 0);
  const int client = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(s.port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  std::string peer;
  int fd = -1;
  for (int i = 0; i < 100 && fd < 0; ++i) {
    fd = listen_socket_accept(s, peer);
    if (fd < 0) ::usleep(1000);
  }
  ASSERT_GE(fd, 0);
  EXPECT_EQ(peer, "127.0.0.1");
  int on = 0;
  socklen_t len = sizeof on;
  ASSERT_EQ(::getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, &len), 0);
  EXPECT_NE(on, 0) << "Nagle's algorithm would delay replies written in pieces by ~40 ms";
  ::close(fd);
  ::close(client);
}
