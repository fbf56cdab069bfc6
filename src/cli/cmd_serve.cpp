// brisk serve: the OpenAI-, Anthropic- and Ollama-compatible HTTP server, with a chat page.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/model_arg.h"
#include "cli/spec_args.h"
#include "core/error.h"
#include "core/log.h"
#include "runtime/kv_cache.h"
#include "server/engine_loader.h"
#include "server/http_server.h"

namespace {

// "[NAME=]MODEL": the name the API lists (default: the file or folder name).
brisk::server::ModelSpec model_spec(const std::string& v) {
  brisk::server::ModelSpec s;
  const size_t eq = v.find('=');
  if (eq != std::string::npos && eq > 0 && !std::filesystem::exists(v)) {
    s.name = v.substr(0, eq);
    s.path = v.substr(eq + 1);
  } else {
    s.path = v;
    s.name = std::filesystem::path(v).filename().replace_extension().string();
    if (s.name.empty()) s.name = std::filesystem::path(v).parent_path().filename().string();
  }
  if (s.name.empty() || s.path.empty()) brisk::cli::usage_fail("--model '", v, "': expected [NAME=]MODEL");
  return s;
}

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

int cmd_serve(const std::vector<std::string>& argv) {
  using namespace brisk::server;
  std::vector<ModelSpec> specs;
  std::vector<std::string> positional_models;
  ServerOptions so;
  EngineLoadOptions eo;
  eo.n_parallel = 8;
  int32_t max_models = 1, port = so.port, max_body = int32_t(so.max_body_bytes), max_audio = int32_t(so.max_audio_bytes), grace = 10;
  int32_t header_timeout = 10, body_timeout = 60;
  std::string kv = "f16";
  std::string unix_path;
  if (const char* k = std::getenv("BRISK_API_KEY")) so.api_key = k;
  brisk::cli::ArgParser p("serve", "[NAME=]MODEL... [options]",
                          "The OpenAI-, Anthropic- and Ollama-compatible HTTP server, with a chat page at /.");
  p.option({"-m", "--model"}, "[NAME=]MODEL",
           "a model to serve (repeatable; the first loads at startup); NAME is what the API lists",
           [&](const std::string& v) { specs.push_back(model_spec(v)); });
  p.positionals("MODEL", &positional_models, "more models, as --model", 0);
  p.text({"--host"}, &so.host, "ADDR", "address to bind (default 127.0.0.1; others need an API key)");
  p.integer({"--port"}, &port, 0, 65535, "N", "TCP port (default 8080; 0 picks a free one)");
  p.text({"--api-key"}, &so.api_key, "KEY",
         "required key (or BRISK_API_KEY); sent as 'Authorization: Bearer' or 'x-api-key'");
  p.integer({"-c", "--ctx", "--ctx-size"}, &eo.n_ctx, 16, 1 << 24, "N", "context per sequence (default 4096)");
  p.integer({"-np", "--parallel"}, &eo.n_parallel, 1, 256, "N",
            "sequence slots per model: concurrent requests and cached prefixes (default 8)");
  p.integer({"-b", "--batch"}, &eo.n_batch, 1, 1 << 16, "N", "max tokens per forward (default 512)");
  p.integer({"--prefill-chunk"}, &eo.scheduler.prefill_chunk, 1, 1 << 16, "N",
            "prompt tokens per step, shared by all prefilling requests (default 256)");
  p.integer({"--queue"}, &eo.scheduler.max_queue, 0, 1 << 20, "N", "waiting requests per model before 503 (default 64)");
  p.option({"--cache-tokens"}, "N", "token budget of idle cached prefixes (default: unbounded within slots)",
           [&](const std::string& v) {
             eo.scheduler.cache.cached_token_budget = brisk::cli::parse_integer("--cache-tokens", v, 0, INT32_MAX);
           });
  p.integer({"--cache-block"}, &eo.scheduler.cache.block_size, 1, 4096, "N", "prefix-cache block size in tokens (default 16)");
  p.text({"--kv-type"}, &kv, "T", "f16 | bf16 | f32 | q8_0 (default f16)");
  p.integer({"--kv-block"}, &eo.kv_block_size, 16, 1 << 16, "N",
            "KV cache positions per block, a power of two >= 16 (default 256)");
  brisk::cli::add_device_option(p, &eo.device, "auto: the GPU when one is usable; on a GPU the memory plan is printed");
  p.text({"--quant"}, &eo.quant, "Q", "quantize safetensors weights at load (q8_0, q4_0, q4_k)");
  p.text({"--tokenizer"}, &eo.tokenizer_dir, "DIR", "use this Hugging Face folder's tokenizer (and chat template)");
  std::string yes_no = "auto";
  p.text({"--yes-no-reranker"}, &yes_no, "auto|on|off",
         "serve causal LMs as yes/no rerankers on /v1/rerank (Qwen3-Reranker); auto: a GGUF with pooling_type rank "
         "and the yes / no head, or a causal-LM folder named *reranker* (default auto)");
  brisk::cli::add_threads_option(p, &eo.n_threads);
  p.integer({"--max-models"}, &max_models, 1, 64, "N", "models resident at once, least recently used unloaded (default 1)");
  p.integer({"--max-tokens"}, &so.max_tokens_ceiling, 1, INT32_MAX, "N", "completion ceiling per request (default: the context size)");
  p.integer({"--max-body"}, &max_body, 1024, INT32_MAX, "BYTES", "request body limit (default 8 MiB)");
  p.integer({"--max-audio"}, &max_audio, 1024, INT32_MAX, "BYTES", "audio upload limit of /v1/audio/* (default 25 MiB)");
  p.integer({"--http-threads"}, &so.http_threads, 1, 4096, "N", "requests run at once (default 64)");
  p.integer({"--max-connections"}, &so.max_connections, 1, 1 << 20, "N",
            "open connections (default 1024); 16 more may ask only for /health and /metrics");
  p.integer({"--max-client-connections"}, &so.max_client_connections, 1, 1 << 20, "N",
            "open connections per client address (default 256)");
  p.integer({"--header-timeout"}, &header_timeout, 1, 3600, "S", "seconds to receive a request's headers (default 10)");
  p.integer({"--body-timeout"}, &body_timeout, 1, 3600, "S", "seconds to receive a request's body (default 60)");
  p.integer({"--shutdown-grace"}, &grace, 0, 3600, "S", "seconds in-flight requests get on SIGINT/SIGTERM (default 10)");
  p.text({"--unix"}, &unix_path, "PATH", "serve on a Unix socket (created mode 0600) instead of TCP (no TCP socket at all)");
  int32_t ollama_port = -1;
  p.integer({"--ollama-port"}, &ollama_port, 0, 65535, "N",
            "also listen on this port (Ollama's is 11434), same routes and limits; the Ollama API (/api/...) is on "
            "--port either way");
  bool no_webui = false;
  p.flag({"--no-webui"}, &no_webui, "no chat page at / (the API routes stay)");
  brisk::cli::SpecArgs spec_args;
  brisk::cli::add_spec_options(p, &spec_args);
  p.integer({"--spec-max-seqs"}, &eo.scheduler.spec.max_batch_seqs, 1, 256, "N",
            "verify drafts while at most N sequences decode, in one batch; more decode plainly (default 4)");
  p.note("A request turns speculative decoding off with \"speculative.n_max\": 0 (llama.cpp server's field) or "
         "drafts fewer tokens with a smaller value.");
  if (!p.parse(argv)) return 0;
  brisk::cli::refuse_device_list("serve", eo.device);
  if (yes_no != "auto" && yes_no != "on" && yes_no != "off") brisk::cli::usage_fail("--yes-no-reranker: auto, on or off");
  eo.yes_no = yes_no == "on" ? brisk::YesNoMode::on : yes_no == "off" ? brisk::YesNoMode::off : brisk::YesNoMode::detect;
  so.ollama_port = ollama_port;
  so.webui = !no_webui;
  if (brisk::cli::spec_requested(spec_args))
    eo.make_spec = [spec_args](const std::shared_ptr<const brisk::Model>& model, const std::string& path, const brisk::ContextOptions& c) {
      return brisk::cli::make_spec_options(spec_args, model, path, c);
    };
  for (const std::string& m : positional_models) specs.push_back(model_spec(m));
  so.port = port;
  so.max_body_bytes = size_t(max_body);
  so.max_audio_bytes = size_t(max_audio);
  so.shutdown_grace_seconds = grace;
  so.header_timeout_seconds = header_timeout;
  so.body_timeout_seconds = body_timeout;
  if (specs.empty()) brisk::cli::usage_fail("a model is required ([NAME=]MODEL or -m [NAME=]MODEL)");
  // Chat templates are tried before any weights load (a Hub reference not yet downloaded is
  // checked when it loads).
  if (!eo.tokenizer_dir.empty()) {
    brisk::cli::checked_chat_template(eo.tokenizer_dir, "");
  } else {
    for (const ModelSpec& s : specs)
      if (std::filesystem::exists(s.path)) brisk::cli::checked_chat_template(s.path, "");
  }
  const auto kv_type = brisk::kv_cache_type_from_name(kv);
  if (!kv_type) brisk::cli::usage_fail("--kv-type '", kv, "': use f16, bf16, f32 or q8_0");
  eo.kv_type = *kv_type;
  BRISK_CHECK(is_loopback(so.host) || !so.api_key.empty(), "binding ", so.host,
              " exposes the server beyond this machine: give --api-key KEY (or BRISK_API_KEY)");

  // Signals go to one thread that stops the server; every other thread inherits the mask.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  so.unix_path = unix_path;
  // Each model as it loads: a --ctx beyond its trained context is clamped there (Context) and
  // said in one line, as generate and run do.
  const bool ctx_given = p.given("--ctx");
  ModelLoader load = [base = engine_model_loader(eo), ctx_given, n_ctx = eo.n_ctx](const ModelSpec& spec) {
    std::shared_ptr<LoadedModel> m = base(spec);
    const brisk::cli::ContextSize c =
        brisk::cli::context_size("serve", n_ctx, ctx_given, n_ctx, m->model->info().n_ctx_train);
    if (!c.note.empty()) std::fprintf(stderr, "%s (model '%s')\n", c.note.c_str(), spec.name.c_str());
    return m;
  };
  ModelRegistry registry(specs, std::move(load), max_models);
  HttpServer server(registry, so);
  server.bind();  // before the load: a port in use fails at once
  {
    brisk::cli::LoadIndicator loading(specs.front().name);
    registry.load(specs.front().name);  // load the first model now: errors show at startup
  }
  if (!unix_path.empty()) {
    std::fprintf(stderr, "brisk serve: listening on unix:%s (%zu model%s, first '%s')\n", unix_path.c_str(),
                 specs.size(), specs.size() == 1 ? "" : "s", specs.front().name.c_str());
  } else {
    std::fprintf(stderr, "brisk serve: listening on http://%s:%d (%zu model%s, first '%s')\n", so.host.c_str(),
                 server.port(), specs.size(), specs.size() == 1 ? "" : "s", specs.front().name.c_str());
    if (server.ollama_port() >= 0)
      std::fprintf(stderr, "brisk serve: also listening on http://%s:%d (for Ollama clients)\n", so.host.c_str(),
                   server.ollama_port());
    if (so.webui) std::fprintf(stderr, "brisk serve: chat page at http://%s:%d/\n", so.host.c_str(), server.port());
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
  registry.unload_all();
  std::fprintf(stderr, "brisk serve: stopped\n");
  return 0;
}

}  // namespace

BRISK_COMMAND("serve", "OpenAI- and Anthropic-compatible HTTP server", cmd_serve);
