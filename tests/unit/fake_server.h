// A fake model for server tests: a byte-level tokenizer (ids 0-255 are bytes, 256-258 are
// <|im_start|>, <|im_end|>, <|endoftext|>), a ChatML renderer and the FakeContext engine
// favoring printable ASCII, bundled as a LoadedModel, plus a server running on a free port.
#pragma once
#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "fake_engine.h"
#include "server/http_server.h"
#include "server/json_fields.h"
#include "server/model_registry.h"
#include "text/tokenizer.h"

#include <gtest/gtest.h>

namespace brisk::testing {

class FakeTokenizer : public Tokenizer {
 public:
  static constexpr int32_t kImStart = 256, kImEnd = 257, kEos = 258, kVocab = 259;
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& opt) const override {
    std::vector<int32_t> out;
    if (opt.add_special) out.push_back(kImStart);
    for (size_t i = 0; i < text.size();) {
      bool special = false;
      if (opt.parse_special) {
        for (int32_t id : {kImStart, kImEnd, kEos}) {
          const std::string s = token_text(id);
          if (text.compare(i, s.size(), s) == 0) {
            out.push_back(id);
            i += s.size();
            special = true;
            break;
          }
        }
      }
      if (!special) out.push_back(int32_t((unsigned char)text[i++]));
    }
    return out;
  }
  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const override {
    std::string out;
    for (int32_t id : ids) {
      BRISK_CHECK(id >= 0 && id < kVocab, "fake tokenizer: id ", id, " out of range");
      if (id < 256) out += char(id);
      else if (!skip_special) out += token_text(id);
    }
    return out;
  }
  int32_t vocab_size() const override { return kVocab; }
  std::string token_text(int32_t id) const override {
    if (id == kImStart) return "<|im_start|>";
    if (id == kImEnd) return "<|im_end|>";
    if (id == kEos) return "<|endoftext|>";
    return std::string(1, char(id));
  }
  bool is_special(int32_t id) const override { return id >= 256; }
  int32_t bos_id() const override { return -1; }
  int32_t eos_id() const override { return kEos; }
  std::vector<int32_t> end_of_generation_ids() const override { return {kImEnd, kEos}; }
  int32_t token_id(std::string_view text) const override {
    for (int32_t id = 0; id < kVocab; ++id)
      if (token_text(id) == text) return id;
    return -1;
  }
};

inline std::string fake_render(const server::ChatPromptInput& in) {
  std::string out;
  if (in.tools.is_array()) out += "<|im_start|>system\ntools: " + server::dump_json(in.tools) + "<|im_end|>\n";
  for (const auto& m : in.messages) {
    out += "<|im_start|>" + m.value("role", "") + "\n";
    if (m.contains("content") && m["content"].is_string()) out += m["content"].get<std::string>();
    if (m.contains("tool_calls")) out += "<tool_call>" + server::dump_json(m["tool_calls"]) + "</tool_call>";
    out += "<|im_end|>\n";
  }
  if (in.add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

struct FakeModelOptions {
  int32_t n_ctx = 1024;
  int32_t n_seq_max = 4;
  int32_t n_batch = 128;
  int32_t max_queue = 64;
  int32_t block_size = 8;
};

inline std::shared_ptr<server::LoadedModel> make_fake_model(const FakeModelOptions& o) {
  auto m = std::make_shared<server::LoadedModel>();
  auto tok = std::make_shared<FakeTokenizer>();
  m->tokenizer_owner = tok;
  m->tokenizer = tok.get();
  m->render_chat = fake_render;
  m->end_ids = tok->end_of_generation_ids();
  m->n_ctx = o.n_ctx;
  m->chat_format = ChatFormat::kHermes;
  auto ctx = std::make_unique<FakeContext>(
      ContextOptions{.n_ctx = o.n_ctx, .n_seq_max = o.n_seq_max, .n_batch = o.n_batch}, FakeTokenizer::kVocab, 'a', 'z' + 1);
  SchedulerOptions so;
  so.max_queue = o.max_queue;
  so.cache.block_size = o.block_size;
  m->scheduler = std::make_unique<Scheduler>(std::move(ctx), greedy_factory(), so);
  return m;
}

// What the fake model answers (greedily) to `prompt_text`.
inline std::string fake_answer(const std::string& prompt_text, int32_t n) {
  FakeTokenizer tok;
  const auto ids = tok.encode(prompt_text, {.add_special = false, .parse_special = true});
  return tok.decode(fake_greedy(ids, n, FakeTokenizer::kVocab, {}, 'a', 'z' + 1), true);
}

struct TestServer {
  std::unique_ptr<server::ModelRegistry> registry;
  std::unique_ptr<server::HttpServer> server;
  std::thread thread;
  int loads = 0;

  explicit TestServer(server::ServerOptions opt = {}, std::vector<std::string> names = {"fake"},
                      FakeModelOptions mo = {}, int32_t max_resident = 2) {
    std::vector<server::ModelSpec> specs;
    for (auto& n : names) specs.push_back({n, "/nonexistent/" + n});
    registry = std::make_unique<server::ModelRegistry>(
        specs, [this, mo](const server::ModelSpec&) { ++loads; return make_fake_model(mo); }, max_resident);
    opt.port = 0;
    opt.log_requests = std::getenv("BRISK_TEST_LOG") != nullptr;
    server = std::make_unique<server::HttpServer>(*registry, opt);
    server->bind();
    thread = std::thread([this] { server->serve(); });
  }
  ~TestServer() {
    server->stop();
    if (thread.joinable()) thread.join();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", server->port());
    c.set_read_timeout(30);
    return c;
  }
};

// A raw TCP connection to a test server, for what an HTTP client library would not send
// (half requests, chunked bodies by hand, disconnects).
class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(uint16_t(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawClient() { close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;
  bool connected() const { return connected_; }
  bool send(const std::string& s) {
    size_t done = 0;
    while (done < s.size()) {
      const ssize_t n = ::send(fd_, s.data() + done, s.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += size_t(n);
    }
    return true;
  }
  // Reads until the peer closes, `until` appears, or `timeout_ms` passes without data.
  std::string read(int timeout_ms, const std::string& until = {}) {
    std::string out;
    char buf[16384];
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, timeout_ms) <= 0) break;
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_by_peer_ = true;
        break;
      }
      out.append(buf, size_t(n));
      if (!until.empty() && out.find(until) != std::string::npos) break;
    }
    return out;
  }
  bool closed_by_peer() const { return closed_by_peer_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool closed_by_peer_ = false;
};

// The status code of the first response in `raw` (0 if none).
inline int http_status(const std::string& raw) {
  if (raw.rfind("HTTP/1.1 ", 0) != 0 || raw.size() < 12) return 0;
  return std::atoi(raw.substr(9, 3).c_str());
}

// The body of a `Content-Length` response in `raw`.
inline std::string http_body(const std::string& raw) {
  const size_t end = raw.find("\r\n\r\n");
  return end == std::string::npos ? std::string() : raw.substr(end + 4);
}

// Data payloads of an SSE body (`data: X` lines), and the event names (`event: X`).
inline std::vector<std::string> sse_payloads(const std::string& body, std::vector<std::string>* events = nullptr) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find('\n', pos);
    if (end == std::string::npos) end = body.size();
    const std::string line = body.substr(pos, end - pos);
    if (line.rfind("data: ", 0) == 0) out.push_back(line.substr(6));
    if (events && line.rfind("event: ", 0) == 0) events->push_back(line.substr(7));
    pos = end + 1;
  }
  return out;
}

// POSTs `body` and checks the status; the parsed reply (null when absent).
inline nlohmann::json post_json(httplib::Client& c, const std::string& path, const nlohmann::json& body,
                                int expect_status = 200, httplib::Headers headers = {}) {
  auto r = c.Post(path.c_str(), headers, body.dump(), "application/json");
  EXPECT_TRUE(r) << "no response from " << path;
  if (!r) return nlohmann::json();
  EXPECT_EQ(r->status, expect_status) << path << ": " << r->body;
  return nlohmann::json::parse(r->body, nullptr, false);
}

inline nlohmann::json chat_body(const std::string& text, int max_tokens) {
  return {{"model", "fake"}, {"messages", {{{"role", "user"}, {"content", text}}}}, {"max_tokens", max_tokens}};
}

// The value of `name` in the Prometheus text (-1 when absent).
inline double metric_value(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::atof(text.c_str() + at + name.size() + 2);
}

}  // namespace brisk::testing
