// `brisk serve` against hostile and careless clients on the fake engine: body limits for every
// transfer and content encoding, slow clients, connection limits and the reserve for /health
// and /metrics, the API key checked before any body is read, disconnects of non-streamed
// requests, keep-alive latency, 405 / Retry-After / metrics of every reply.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "fake_server.h"

using namespace brisk;
using namespace brisk::server;
using brisk::testing::chat_body;
using brisk::testing::http_body;
using brisk::testing::http_status;
using brisk::testing::metric_value;
using brisk::testing::post_json;
using brisk::testing::RawClient;
using brisk::testing::TestServer;
using nlohmann::json;

namespace {

std::string post_head(const std::string& path, const std::string& extra) {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra + "\r\n";
}

std::string gzip_bytes(const std::string& data) {
  httplib::detail::gzip_compressor z;
  std::string out;
  z.compress(data.data(), data.size(), true, [&](const char* d, size_t n) {
    out.append(d, n);
    return true;
  });
  return out;
}

std::string metrics_text(TestServer& ts, const std::string& key = {}) {
  auto c = ts.client();
  auto m = key.empty() ? c.Get("/metrics") : c.Get("/metrics", {{"Authorization", "Bearer " + key}});
  return m ? m->body : std::string();
}

}  // namespace

TEST(ServerLimits, ChunkedBodyOverTheLimitIs413BeforeItIsAllSent) {
  ServerOptions opt;
  opt.max_body_bytes = 64 << 10;
  TestServer ts(opt);
  RawClient c(ts.server->port());
  ASSERT_TRUE(c.send(post_head("/v1/chat/completions", "Transfer-Encoding: chunked\r\n")));
  const std::string chunk = "4000\r\n" + std::string(0x4000, ' ') + "\r\n";  // 16 KiB of data each
  bool refused = false;
  std::string reply;
  for (int i = 0; i < 64 && !refused; ++i) {  // 1 MiB in all, if nothing stops it
    if (!c.send(chunk)) refused = true;
    reply += c.read(5);
    refused = refused || !reply.empty();
  }
  reply += c.read(2000, "}");
  EXPECT_EQ(http_status(reply), 413) << reply.substr(0, 200);
  EXPECT_NE(reply.find("Connection: close"), std::string::npos);
  EXPECT_NE(http_body(reply).find("exceeds the limit"), std::string::npos) << reply;
}

TEST(ServerLimits, ChunkedBodyWithinTheLimitIsServed) {
  TestServer ts;
  RawClient c(ts.server->port());
  const std::string body = chat_body("hi", 3).dump();
  const std::string half = body.substr(0, body.size() / 2), rest = body.substr(body.size() / 2);
  char size1[16], size2[16];
  std::snprintf(size1, sizeof size1, "%zx", half.size());
  std::snprintf(size2, sizeof size2, "%zx", rest.size());
  ASSERT_TRUE(c.send(post_head("/v1/chat/completions", "Transfer-Encoding: chunked\r\n") + size1 + "\r\n" + half +
                     "\r\n" + size2 + "\r\n" + rest + "\r\n0\r\n\r\n"));
  const std::string reply = c.read(5000, "\"usage\"");
  EXPECT_EQ(http_status(reply), 200) << reply;
}

TEST(ServerLimits, GzipBombIs413AtTheDecodedLimit) {
  ServerOptions opt;
  opt.max_body_bytes = 64 << 10;
  TestServer ts(opt);
  // 50 MB of spaces inside a JSON string: about 50 KB compressed, far below the limit as sent.
  std::string big = "{\"model\":\"fake\",\"messages\":[{\"role\":\"user\",\"content\":\"" + std::string(50u << 20, ' ') + "\"}]}";
  const std::string bomb = gzip_bytes(big);
  big.clear();
  big.shrink_to_fit();
  ASSERT_LT(bomb.size(), size_t(opt.max_body_bytes));
  auto c = ts.client();
  httplib::Headers h = {{"Content-Encoding", "gzip"}};
  const auto t0 = std::chrono::steady_clock::now();
  auto r = c.Post("/v1/chat/completions", h, bomb, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413) << r->body;
  EXPECT_NE(r->body.find("decoded"), std::string::npos) << r->body;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  // The same body within the limit decodes and is served.
  const std::string small = gzip_bytes(chat_body("hi", 2).dump());
  r = c.Post("/v1/chat/completions", h, small, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  // An encoding the server does not decode is refused, not passed on undecoded.
  r = c.Post("/v1/chat/completions", {{"Content-Encoding", "zstd"}}, small, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 415) << r->body;
}

TEST(ServerLimits, ContentLengthOverTheLimitIsRefusedWithoutReadingTheBody) {
  ServerOptions opt;
  opt.max_body_bytes = 4096;
  TestServer ts(opt);
  RawClient c(ts.server->port());
  ASSERT_TRUE(c.send(post_head("/v1/chat/completions", "Content-Length: 1000000000\r\n")));
  const std::string reply = c.read(2000, "}");
  EXPECT_EQ(http_status(reply), 413) << reply;
}

TEST(ServerLimits, PromptTextThatCannotFitIsRefusedBeforeTokenizing) {
  brisk::testing::FakeModelOptions mo;
  mo.n_ctx = 64;
  TestServer ts({}, {"fake"}, mo);
  auto c = ts.client();
  // 64 tokens of at most 14 bytes each (the longest fake token text, plus one).
  json e = post_json(c, "/v1/chat/completions", chat_body(std::string(64 * 15 + 1, 'x'), 4), 400);
  EXPECT_NE(e["error"]["message"].get<std::string>().find("bytes"), std::string::npos) << e;
  e = post_json(c, "/v1/completions", {{"model", "fake"}, {"prompt", std::string(2000, 'y')}}, 400);
  EXPECT_EQ(e["error"]["param"], "prompt");
}

TEST(ServerLimits, SlowClientsDoNotStarveHealth) {
  ServerOptions opt;
  opt.header_timeout_seconds = 2;
  TestServer ts(opt);
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < 64; ++i) {
    slow.push_back(std::make_unique<RawClient>(ts.server->port()));
    ASSERT_TRUE(slow.back()->send("GET /v1/mod"));
  }
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto c = ts.client();
    auto h = c.Get("/health");
    ASSERT_TRUE(h) << "probe " << i;
    EXPECT_EQ(h->status, 200);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  }
  // A head that does not arrive in time: 408, and the connection is closed.
  const std::string reply = slow[0]->read(5000);
  EXPECT_EQ(http_status(reply), 408) << reply;
  EXPECT_TRUE(slow[0]->closed_by_peer());
}

TEST(ServerLimits, ConnectionsPerClientAreBoundedWithAReserveForHealth) {
  ServerOptions opt;
  opt.max_client_connections = 4;
  TestServer ts(opt);
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::make_unique<RawClient>(ts.server->port()));
    ASSERT_TRUE(held.back()->send("GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"));
    EXPECT_EQ(http_status(held.back()->read(2000, "\"list\"}")), 200);  // kept alive afterwards
  }
  RawClient over(ts.server->port());
  ASSERT_TRUE(over.send("GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string reply = over.read(2000, "}");
  EXPECT_EQ(http_status(reply), 503) << reply;
  EXPECT_NE(reply.find("Retry-After: "), std::string::npos) << reply;
  RawClient health(ts.server->port());
  ASSERT_TRUE(health.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  reply = health.read(2000, "}");
  EXPECT_EQ(http_status(reply), 200) << reply;
  held.clear();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto c = ts.client();
  auto r = c.Get("/v1/models");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(metrics_text(ts).find("brisk_requests_total{route=\"/v1/models\",status=\"503\"} 1"), std::string::npos);
}

TEST(ServerLimits, RequestsWithoutTheKeyAreRefusedBeforeTheirBody) {
  ServerOptions opt;
  opt.api_key = "sekret";
  TestServer ts(opt);
  RawClient c(ts.server->port());
  // The body is announced and never sent: the refusal must not wait for it.
  ASSERT_TRUE(c.send(post_head("/v1/chat/completions", "Content-Length: 5000\r\n")));
  const auto t0 = std::chrono::steady_clock::now();
  const std::string reply = c.read(3000, "}");
  EXPECT_EQ(http_status(reply), 401) << reply;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  RawClient wrong(ts.server->port());
  ASSERT_TRUE(wrong.send(post_head("/v1/messages", "Content-Length: 5000\r\nx-api-key: nope\r\n")));
  const std::string r2 = wrong.read(3000, "}");
  EXPECT_EQ(http_status(r2), 401) << r2;
  EXPECT_NE(http_body(r2).find("authentication_error"), std::string::npos) << r2;
  EXPECT_NE(metrics_text(ts, "sekret").find("brisk_requests_total{route=\"/v1/chat/completions\",status=\"401\"} 1"),
            std::string::npos);
}

TEST(ServerLimits, NonStreamedRequestIsCancelledWhenItsClientLeaves) {
  brisk::testing::FakeModelOptions mo;
  mo.n_ctx = 200000;
  TestServer ts({}, {"fake"}, mo);
  {
    auto c = ts.client();
    post_json(c, "/v1/chat/completions", chat_body("warm", 1));
  }
  auto model = ts.registry->get("fake");
  RawClient raw(ts.server->port());
  const std::string b = chat_body("go on forever", 150000).dump();
  ASSERT_TRUE(raw.send(post_head("/v1/chat/completions", "Content-Length: " + std::to_string(b.size()) + "\r\n") + b));
  for (int i = 0; i < 400 && model->scheduler->stats().active == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(model->scheduler->stats().active, 1);
  raw.close();
  bool freed = false;
  for (int i = 0; i < 300 && !freed; ++i) {
    freed = model->scheduler->stats().active == 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(freed) << "a non-streamed generation kept running after its client left";
  const std::string m = metrics_text(ts);
  EXPECT_NE(m.find("brisk_generations_total{reason=\"cancelled\"} 1"), std::string::npos) << m;
  EXPECT_LT(metric_value(m, "brisk_generated_tokens_total"), 150000);
}

TEST(ServerLimits, KeptAliveRepliesAreNotHeldBack) {
  TestServer ts;
  auto c = ts.client();
  c.set_keep_alive(true);
  c.set_tcp_nodelay(true);  // the client's own writes are not what is measured
  ASSERT_TRUE(c.Get("/v1/models"));
  const int n = 40;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    auto r = c.Get("/v1/models");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / n;
  // Nagle's algorithm against the client's delayed ACK costs ~40 ms per reply.
  EXPECT_LT(ms, 20.0) << ms << " ms per request on a kept-alive connection";
}

TEST(ServerLimits, WrongMethodIs405WithAllow) {
  TestServer ts;
  auto c = ts.client();
  auto r = c.Get("/v1/chat/completions");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->get_header_value("Allow"), "POST");
  EXPECT_NE(r->body.find("not allowed"), std::string::npos) << r->body;
  r = c.Delete("/v1/models");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->get_header_value("Allow"), "GET");
  r = c.Get("/no/such/route");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
}

TEST(ServerLimits, Every503SaysWhenToRetry) {
  brisk::testing::FakeModelOptions mo;
  mo.max_queue = 0;
  TestServer ts({}, {"fake"}, mo);
  auto c = ts.client();
  auto r = c.Post("/v1/chat/completions", chat_body("hi", 3).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  ts.server->state().draining = true;
  r = c.Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  ts.server->state().draining = false;
}

TEST(ServerLimits, MetricsCountEveryReplyAndLatencies) {
  ServerOptions opt;
  opt.max_body_bytes = 4096;
  TestServer ts(opt);
  auto c = ts.client();
  post_json(c, "/v1/chat/completions", chat_body("hi", 4));
  c.Get("/nope");
  c.Post("/v1/chat/completions", std::string(5000, ' '), "application/json");
  const std::string m = metrics_text(ts);
  EXPECT_NE(m.find("brisk_requests_total{route=\"/v1/chat/completions\",status=\"200\"} 1"), std::string::npos) << m;
  EXPECT_NE(m.find("brisk_requests_total{route=\"unmatched\",status=\"404\"} 1"), std::string::npos) << m;
  EXPECT_NE(m.find("brisk_requests_total{route=\"/v1/chat/completions\",status=\"413\"} 1"), std::string::npos) << m;
  for (const char* h : {"brisk_time_to_first_token_seconds", "brisk_time_per_output_token_seconds",
                        "brisk_e2e_request_latency_seconds"}) {
    EXPECT_EQ(metric_value(m, std::string(h) + "_count"), 1) << h << "\n" << m;
    EXPECT_NE(m.find(std::string(h) + "_bucket{le=\"+Inf\"} 1"), std::string::npos) << h;
  }
}
