// Ollama dialect, the model routes: GET /api/tags, POST /api/show, GET /api/ps, POST /api/pull
// (from the Hugging Face Hub through brisk's hub code, with Ollama's progress stream), DELETE
// /api/delete (models pulled through /api/pull), GET /api/version, HEAD /.
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <httplib.h>

#include "core/error.h"
#include "core/log.h"
#include "hub/cache_scan.h"
#include "hub/reference.h"
#include "hub/resolve.h"
#include "hub/select.h"
#include "hub/sha256.h"
#include "runtime/sampler.h"
#include "server/json_fields.h"
#include "server/ollama_common.h"
#include "server/route_util.h"

namespace brisk::server {
namespace {

namespace fs = std::filesystem;

// The Ollama API level these routes follow (clients compare it against the features they use).
constexpr const char* kOllamaApiVersion = "0.12.0";

struct ModelFiles {
  uint64_t size = 0;
  fs::file_time_type modified{};
  std::string format;        // "gguf" | "safetensors" | ""
  std::string quant;         // GGUF quant label from the file name, "" when unknown
  std::string family;        // config.json model_type, "" when unknown
};

// What the files of a served model say without loading it (a Hub reference not downloaded
// yet has no files: zeros).
ModelFiles inspect_files(const std::string& path) {
  ModelFiles f;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    f.size = fs::file_size(path, ec);
    f.modified = fs::last_write_time(path, ec);
    if (path.size() > 5 && path.substr(path.size() - 5) == ".gguf") f.format = "gguf";
    f.quant = hub::gguf_quant_label(fs::path(path).filename().string());
    return f;
  }
  if (!fs::is_directory(path, ec)) return f;
  for (auto it = fs::directory_iterator(path, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code e2;
    if (!fs::is_regular_file(it->path(), e2)) continue;  // follows the Hub cache's links
    f.size += fs::file_size(it->path(), e2);
    f.modified = std::max(f.modified, fs::last_write_time(it->path(), e2));
    const std::string ext = it->path().extension().string();
    if (ext == ".safetensors") f.format = "safetensors";
    if (ext == ".gguf" && f.format.empty()) f.format = "gguf";
  }
  std::ifstream cfg(fs::path(path) / "config.json");
  if (cfg) {
    const json c = json::parse(cfg, nullptr, false);
    if (c.is_object() && c.contains("model_type") && c["model_type"].is_string()) f.family = c["model_type"];
  }
  return f;
}

std::string file_time_rfc3339(fs::file_time_type t) {
  if (t == fs::file_time_type{}) return ollama_time(std::chrono::system_clock::time_point{});
  const auto sys = std::chrono::time_point_cast<std::chrono::system_clock::duration>(
      t - fs::file_time_type::clock::now() + std::chrono::system_clock::now());
  return ollama_time(sys);
}

// "0.6B", "494M": Ollama's parameter_size.
std::string parameter_size(uint64_t n) {
  if (n == 0) return "";
  char buf[32];
  if (n >= 1000000000ull) std::snprintf(buf, sizeof(buf), "%.1fB", double(n) / 1e9);
  else if (n >= 1000000ull) std::snprintf(buf, sizeof(buf), "%.0fM", double(n) / 1e6);
  else std::snprintf(buf, sizeof(buf), "%.0fK", double(n) / 1e3);
  return buf;
}

std::shared_ptr<LoadedModel> resident_model(const ModelRegistry& registry, const std::string& served) {
  for (const auto& m : registry.resident())
    if (m->name == served) return m;
  return nullptr;
}

// A stable identifier of a served model's files (Ollama lists a manifest digest).
std::string model_digest(const ModelSpec& s, const ModelFiles& f) {
  hub::Sha256 h;
  const std::string key = str_cat(s.path, "\n", f.size, "\n", f.modified.time_since_epoch().count());
  h.update(key.data(), key.size());
  return h.hex();
}

json model_details(const ModelFiles& f, const LoadedModel* m) {
  std::string family = f.family;
  uint64_t n_params = 0;
  if (m && m->model) {
    family = m->model->info().architecture;
    n_params = m->model->info().n_params;
  }
  return {{"parent_model", ""},
          {"format", f.format},
          {"family", family},
          {"families", family.empty() ? json(nullptr) : json::array({family})},
          {"parameter_size", parameter_size(n_params)},
          {"quantization_level", f.quant}};
}

json model_entry(const ModelRegistry& registry, const ModelSpec& s) {
  const ModelFiles f = inspect_files(s.path);
  const auto m = resident_model(registry, s.name);
  const std::string listed = ollama_listed_name(s.name);
  return {{"name", listed},
          {"model", listed},
          {"modified_at", file_time_rfc3339(f.modified)},
          {"size", f.size},
          {"digest", model_digest(s, f)},
          {"details", model_details(f, m.get())}};
}

std::optional<ModelSpec> spec_named(const ModelRegistry& registry, const std::string& served) {
  for (const auto& s : registry.specs())
    if (s.name == served) return s;
  return std::nullopt;
}

void ollama_tags(ServerState& st, const httplib::Request&, httplib::Response& res) {
  json models = json::array();
  for (const auto& s : st.registry->specs()) models.push_back(model_entry(*st.registry, s));
  reply_json(res, {{"models", models}});
}

void ollama_ps(ServerState& st, const httplib::Request&, httplib::Response& res) {
  json models = json::array();
  // Resident models stay until --max-models evicts them: no expiry time (the far future, as
  // Ollama writes a model kept forever).
  const std::string never = "2318-01-01T00:00:00Z";
  for (const auto& m : st.registry->resident()) {
    const auto spec = spec_named(*st.registry, m->name);
    if (!spec) continue;
    json e = model_entry(*st.registry, *spec);
    e.erase("modified_at");
    e["expires_at"] = never;
    e["size_vram"] = 0;
    e["context_length"] = m->n_ctx;
    models.push_back(std::move(e));
  }
  reply_json(res, {{"models", models}});
}

// The engine defaults as Modelfile PARAMETER lines.
std::string parameters_text() {
  const SamplerParams d;
  return str_cat("temperature ", d.temperature, "\ntop_k ", d.top_k, "\ntop_p ", d.top_p, "\nmin_p ", d.min_p,
                 "\nrepeat_penalty ", d.repeat_penalty, "\nrepeat_last_n ", d.penalty_last_n);
}

void ollama_show(ServerState& st, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  const std::string served = ollama_served_name(*st.registry, ollama_model_field(body));
  const auto spec = spec_named(*st.registry, served);
  if (!spec) throw HttpError(404, str_cat("model \"", served, "\" not found"), "model");
  // The metadata is read from the loaded model (loading it when it is not resident).
  const auto m = st.registry->load(served);
  const ModelFiles f = inspect_files(spec->path);
  json info = json::object();
  json caps = m->embed ? json::array({"embedding"}) : json::array({"completion"});
  if (m->model) {
    const ModelInfo& mi = m->model->info();
    info["general.architecture"] = mi.architecture;
    info["general.basename"] = mi.name;
    info["general.parameter_count"] = mi.n_params;
    info[mi.architecture + ".context_length"] = mi.n_ctx_train;
    info[mi.architecture + ".embedding_length"] = mi.n_embd;
    info[mi.architecture + ".block_count"] = mi.n_layer;
    info["tokenizer.ggml.vocab_size"] = mi.n_vocab;
  }
  if (m->chat_format != ChatFormat::kContentOnly) caps.push_back("tools");
  if (m->chat_template.find("think") != std::string::npos || m->chat_template.find("THINK") != std::string::npos ||
      m->chat_format == ChatFormat::kGptOss || m->chat_format == ChatFormat::kGemma4)
    caps.push_back("thinking");
  reply_json(res, {{"license", ""},
                   {"modelfile", str_cat("# served by brisk ", BRISK_VERSION, "\nFROM ", spec->path, "\n")},
                   {"parameters", parameters_text()},
                   {"template", m->chat_template},
                   {"system", ""},
                   {"details", model_details(f, m.get())},
                   {"model_info", info},
                   {"capabilities", caps},
                   {"modified_at", file_time_rfc3339(f.modified)}});
}

// A pull's progress lines, written by the download thread and read by the stream.
struct PullFeed {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> lines;
  bool done = false;
  std::atomic<bool> cancelled{false};
  void push(const json& j) {
    std::lock_guard<std::mutex> lock(mu);
    lines.push_back(ndjson_line(j));
    cv.notify_all();
  }
};

// The Hub reference an Ollama model name stands for: "hf.co/org/name:Q8_0" as it is
// (brisk's references take the same form), a ":latest" tag dropped.
std::string pull_reference(const std::string& name) {
  const std::string tag = ":latest";
  if (name.size() > tag.size() && name.compare(name.size() - tag.size(), tag.size(), tag) == 0)
    return name.substr(0, name.size() - tag.size());
  return name;
}

// Downloads `ref` and offers it under `served`; progress as Ollama reports it.
void run_pull(ModelRegistry& registry, const std::string& ref, const std::string& served, PullFeed* feed) {
  if (feed) feed->push({{"status", "pulling manifest"}});
  HubOptions opt;
  opt.progress = HubProgress::quiet;
  if (feed) {
    opt.on_file_progress = [feed](const HubFileProgress& p) {
      if (feed->cancelled) return false;  // the client went away
      const std::string digest = p.blob.size() == 64 ? "sha256:" + p.blob : p.blob;
      feed->push({{"status", str_cat("pulling ", p.blob.substr(0, 12))},
                  {"digest", digest},
                  {"total", p.total},
                  {"completed", p.completed}});
      return true;
    };
  }
  const HubPullResult r = hub_pull(ref, opt, /*allow_cache_fallback=*/false);
  if (feed) feed->push({{"status", "verifying sha256 digest"}});
  registry.add(ModelSpec{.name = served, .path = r.local_path, .hub_ref = ref});
  if (feed) feed->push({{"status", "writing manifest"}});
  log_info("serve: pulled '", ref, "' (", r.files.size(), " file(s)) as model '", served, "'");
}

void ollama_pull(ServerState& st, const httplib::Request& req, httplib::Response& res) {
  check_not_draining(st);
  const json body = parse_body(req.body);
  const std::string name = ollama_model_field(body);
  if (name.empty()) bad_request("model", "'model' is required");
  const std::string ref = pull_reference(name);
  if (hub::looks_like_local_path(ref)) bad_request("model", str_cat("'", name, "' is a local path, not a Hub reference"));
  try {
    (void)hub::parse_hub_ref(ref);
  } catch (const Error& e) {
    bad_request("model", e.what());
  }
  const bool stream = get_bool(body, "stream").value_or(true);
  ModelRegistry* registry = st.registry;
  if (!stream) {
    run_pull(*registry, ref, ref, nullptr);
    return reply_json(res, {{"status", "success"}});
  }
  // The download runs on a thread of its own; the reply streams its progress. The thread is
  // joined when the reply is done with (a client that leaves cancels the download).
  struct PullJob {
    std::shared_ptr<PullFeed> feed = std::make_shared<PullFeed>();
    std::thread thread;
    ~PullJob() {
      feed->cancelled = true;
      if (thread.joinable()) thread.join();
    }
  };
  auto job = std::make_shared<PullJob>();
  std::shared_ptr<PullFeed> feed = job->feed;
  job->thread = std::thread([feed, registry, ref] {
    try {
      run_pull(*registry, ref, ref, feed.get());
      feed->push({{"status", "success"}});
    } catch (const std::exception& e) {
      log_warn("serve: pull of '", ref, "' failed: ", e.what());
      feed->push({{"error", e.what()}});
    }
    std::lock_guard<std::mutex> lock(feed->mu);
    feed->done = true;
    feed->cv.notify_all();
  });
  auto probe = client_disconnect_probe();
  res.status = 200;
  res.set_chunked_content_provider(
      "application/x-ndjson",
      [feed, probe](size_t, httplib::DataSink& sink) -> bool {
        std::unique_lock<std::mutex> lock(feed->mu);
        feed->cv.wait_for(lock, std::chrono::milliseconds(500), [&] { return feed->done || !feed->lines.empty(); });
        std::string out;
        while (!feed->lines.empty()) {
          out += feed->lines.front();
          feed->lines.pop_front();
        }
        const bool done = feed->done;
        lock.unlock();
        if (!out.empty() && !sink.write(out.data(), out.size())) return feed->cancelled = true, false;
        if (out.empty() && probe()) return feed->cancelled = true, false;
        if (done) sink.done();
        return true;
      },
      [job](bool) { job->feed->cancelled = true; });
}

void ollama_delete(ServerState& st, const httplib::Request& req, httplib::Response& res) {
  const json body = parse_body(req.body);
  const std::string served = ollama_served_name(*st.registry, ollama_model_field(body));
  const auto spec = spec_named(*st.registry, served);
  if (!spec) throw HttpError(404, str_cat("model \"", served, "\" not found"), "model");
  if (spec->hub_ref.empty())
    throw HttpError(400, str_cat("model \"", served, "\" was given to `brisk serve` on its command line; only models "
                                 "pulled through /api/pull are deleted"),
                    "model");
  st.registry->remove(served);
  const auto r = hub::remove_from_cache(hub_options_from_env({}).cache_dir, spec->hub_ref);
  log_info("serve: deleted model '", served, "' (", r.removed.size(), " item(s) removed from the Hub cache)");
  res.status = 200;
}

}  // namespace

void register_ollama_generation_routes(httplib::Server& http, ServerState& state);

void register_ollama_routes(httplib::Server& http, ServerState& state) {
  ServerState* st = &state;
  using Fn = void (*)(ServerState&, const httplib::Request&, httplib::Response&);
  auto get = [&](const char* path, Fn fn) {
    add_get_route(http, state, path, path, Dialect::ollama,
                  [st, fn](const httplib::Request& req, httplib::Response& res) { fn(*st, req, res); });
  };
  auto post = [&](const char* path, Fn fn) {
    add_post_route(http, state, path, path, Dialect::ollama,
                   [st, fn](const httplib::Request& req, httplib::Response& res) { fn(*st, req, res); });
  };
  get("/api/tags", ollama_tags);
  get("/api/ps", ollama_ps);
  get("/api/version", [](ServerState&, const httplib::Request&, httplib::Response& res) {
    reply_json(res, {{"version", kOllamaApiVersion}, {"brisk_version", BRISK_VERSION}});
  });
  post("/api/show", ollama_show);
  post("/api/pull", ollama_pull);
  add_delete_route(http, state, "/api/delete", "/api/delete", Dialect::ollama,
                   [st](const httplib::Request& req, httplib::Response& res) { ollama_delete(*st, req, res); });
  register_ollama_generation_routes(http, state);
}

}  // namespace brisk::server
