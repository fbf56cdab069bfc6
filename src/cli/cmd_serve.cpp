// brisk serve: the OpenAI- and Anthropic-compatible HTTP server.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "cli/command.h"
#include "core/error.h"
#include "core/log.h"
#include "runtime/kv_cache.h"
#include "server/engine_loader.h"
#include "server/http_server.h"
#include "server/unix_socket_bridge.h"

namespace {

using brisk::fail;

void usage() {
  std::printf(
      "usage: brisk serve --model [NAME=]PATH [--model ...] [options]\n"
      "  --host ADDR          address to bind (default 127.0.0.1; others need an API key)\n"
      "  --port N             TCP port (default 8080; 0 picks a free one)\n"
      "  --api-key KEY        required key (or BRISK_API_KEY); sent as 'Authorization: Bearer' or 'x-api-key'\n"
      "  --ctx N              context per sequence (default 4096)\n"
      "  --parallel N         sequence slots per model: concurrent requests and cached prefixes (default 8)\n"
      "  --batch N            max tokens per forward (default 512)\n"
      "  --prefill-chunk N    prompt tokens per step, shared by all prefilling requests (default 256)\n"
      "  --queue N            waiting requests per model before 503 (default 64)\n"
      "  --cache-tokens N     token budget of idle cached prefixes (default: unbounded within slots)\n"
      "  --cache-block N      prefix-cache block size in tokens (default 16)\n"
      "  --kv-type T          f16 | bf16 | f32 | q8_0 (default f16)\n"
      "  --kv-block N         KV cache positions per block, a power of two >= 16 (default 256); the paged\n"
      "                       cache holds --parallel x ceil(--ctx / N) blocks, shared by cached prefixes\n"
      "  --device D           auto | cpu | cuda | cuda:N (default auto: the GPU when one is usable); on a GPU\n"
      "                       the memory plan (weights + KV cache + activations) is printed at startup\n"
      "  --quant Q            quantize safetensors weights at load (q8_0, q4_0, q4_k)\n"
      "  --tokenizer DIR      use this Hugging Face folder's tokenizer (and chat template)\n"
      "  -t, --threads N      compute threads (default: all cores)\n"
      "  --max-models N       models resident at once, least recently used unloaded (default 1)\n"
      "  --max-tokens N       completion ceiling per request (default: the context size)\n"
      "  --max-body BYTES     request body limit (default 8 MiB)\n"
      "  --max-audio BYTES    audio upload limit of /v1/audio/* (default 25 MiB)\n"
      "  --http-threads N     connections served at once (default 64)\n"
      "  --shutdown-grace S   seconds in-flight requests get on SIGINT/SIGTERM (default 10)\n"
      "  --unix PATH          serve on a Unix socket (created mode 0600) instead of TCP\n");
}

int32_t parse_int(const std::string& flag, const std::string& v, int64_t lo, int64_t hi) {
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < lo || x > hi) fail(flag, ": expected an integer in [", lo, ", ", hi, "], got '", v, "'");
  return int32_t(x);
}

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

int cmd_serve(const std::vector<std::string>& argv) {
  using namespace brisk::server;
  std::vector<ModelSpec> specs;
  ServerOptions so;
  EngineLoadOptions eo;
  eo.n_parallel = 8;
  int32_t max_models = 1;
  std::string kv = "f16";
  std::string unix_path;
  if (const char* k = std::getenv("BRISK_API_KEY")) so.api_key = k;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& f = argv[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= argv.size()) fail("serve: ", f, " needs a value");
      return argv[++i];
    };
    if (f == "-h" || f == "--help") { usage(); return 0; }
    else if (f == "--model" || f == "-m") {
      const std::string v = value();
      const size_t eq = v.find('=');
      ModelSpec s;
      if (eq != std::string::npos && eq > 0 && !std::filesystem::exists(v)) {
        s.name = v.substr(0, eq);
        s.path = v.substr(eq + 1);
      } else {
        s.path = v;
        s.name = std::filesystem::path(v).filename().replace_extension().string();
        if (s.name.empty()) s.name = std::filesystem::path(v).parent_path().filename().string();
      }
      BRISK_CHECK(!s.name.empty() && !s.path.empty(), "serve: --model '", v, "': expected [NAME=]PATH");
      specs.push_back(std::move(s));
    }
    else if (f == "--host") so.host = value();
    else if (f == "--port") so.port = parse_int(f, value(), 0, 65535);
    else if (f == "--api-key") so.api_key = value();
    else if (f == "--unix") unix_path = value();
    else if (f == "--ctx" || f == "-c") eo.n_ctx = parse_int(f, value(), 16, 1 << 24);
    else if (f == "--parallel" || f == "-np") eo.n_parallel = parse_int(f, value(), 1, 256);
    else if (f == "--batch" || f == "-b") eo.n_batch = parse_int(f, value(), 1, 1 << 16);
    else if (f == "--prefill-chunk") eo.scheduler.prefill_chunk = parse_int(f, value(), 1, 1 << 16);
    else if (f == "--queue") eo.scheduler.max_queue = parse_int(f, value(), 0, 1 << 20);
    else if (f == "--cache-tokens") eo.scheduler.cache.cached_token_budget = parse_int(f, value(), 0, INT32_MAX);
    else if (f == "--cache-block") eo.scheduler.cache.block_size = parse_int(f, value(), 1, 4096);
    else if (f == "--kv-type") kv = value();
    else if (f == "--kv-block") eo.kv_block_size = parse_int(f, value(), 16, 1 << 16);
    else if (f == "--device") eo.device = value();
    else if (f == "--quant") eo.quant = value();
    else if (f == "--tokenizer") eo.tokenizer_dir = value();
    else if (f == "-t" || f == "--threads") eo.n_threads = parse_int(f, value(), 0, 1024);
    else if (f == "--max-models") max_models = parse_int(f, value(), 1, 64);
    else if (f == "--max-tokens") so.max_tokens_ceiling = parse_int(f, value(), 1, INT32_MAX);
    else if (f == "--max-body") so.max_body_bytes = size_t(parse_int(f, value(), 1024, INT32_MAX));
    else if (f == "--max-audio") so.max_audio_bytes = size_t(parse_int(f, value(), 1024, INT32_MAX));
    else if (f == "--http-threads") so.http_threads = parse_int(f, value(), 4, 4096);
    else if (f == "--shutdown-grace") so.shutdown_grace_seconds = parse_int(f, value(), 0, 3600);
    else fail("serve: unknown argument '", f, "' (see brisk serve --help)");
  }
  BRISK_CHECK(!specs.empty(), "serve: --model [NAME=]PATH is required (see brisk serve --help)");
  const auto kv_type = brisk::kv_cache_type_from_name(kv);
  BRISK_CHECK(kv_type.has_value(), "serve: --kv-type '", kv, "': use f16, bf16, f32 or q8_0");
  eo.kv_type = *kv_type;
  BRISK_CHECK(is_loopback(so.host) || !so.api_key.empty(), "serve: binding ", so.host,
              " exposes the server beyond this machine: give --api-key KEY (or BRISK_API_KEY)");

  // Signals go to one thread that stops the server; every other thread inherits the mask.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::unique_ptr<UnixSocketBridge> bridge;
  if (!unix_path.empty()) {
    // The HTTP server listens on an ephemeral loopback port admitting only the bridge's peers.
    so.host = "127.0.0.1";
    so.port = 0;
    so.admit_peer = [&bridge](int peer_port) { return bridge && bridge->owns_peer_port(peer_port); };
  }
  ModelRegistry registry(specs, engine_model_loader(eo), max_models);
  registry.load(specs.front().name);  // load the first model now: errors show at startup
  HttpServer server(registry, so);
  server.bind();
  if (!unix_path.empty()) {
    bridge = std::make_unique<UnixSocketBridge>(unix_path, server.port());
    bridge->start();
    std::fprintf(stderr, "brisk serve: listening on unix:%s (%zu model%s, first '%s')\n", unix_path.c_str(),
                 specs.size(), specs.size() == 1 ? "" : "s", specs.front().name.c_str());
  } else {
    std::fprintf(stderr, "brisk serve: listening on http://%s:%d (%zu model%s, first '%s')\n", so.host.c_str(),
                 server.port(), specs.size(), specs.size() == 1 ? "" : "s", specs.front().name.c_str());
  }
  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    std::fprintf(stderr, "brisk serve: %s received, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    server.stop();
  });
  server.serve();
  // serve() also returns when the listener fails; make the signal thread exit in that case.
  if (signal_thread.joinable()) {
    pthread_kill(signal_thread.native_handle(), SIGTERM);
    signal_thread.join();
  }
  if (bridge) bridge->stop();
  registry.unload_all();
  std::fprintf(stderr, "brisk serve: stopped\n");
  return 0;
}

}  // namespace

BRISK_COMMAND("serve", "OpenAI- and Anthropic-compatible HTTP server", cmd_serve);
