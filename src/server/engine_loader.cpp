#include "server/engine_loader.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "core/log.h"
#include "hub/resolve.h"
#include "runtime/embed_queue.h"
#include "runtime/transcribe.h"
#include "runtime/engine_sampler.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace brisk::server {

namespace {

// A speech-to-text model: one Transcriber (its context holds the beams of one window at a time;
// requests take turns window by window).
std::shared_ptr<LoadedModel> speech_model(const ModelSpec& spec, std::shared_ptr<const Model> model,
                                          const EngineLoadOptions& o) {
  auto m = std::make_shared<LoadedModel>();
  m->name = spec.name;
  m->model = model;
  m->tokenizer = model->tokenizer();
  m->speech = std::make_shared<Transcriber>(model, TranscriberOptions{.device = o.device == "auto" ? "cpu" : o.device,
                                                                      .n_threads = o.n_threads, .max_beams = 5});
  m->created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  log_info("serve: speech model '", spec.name, "' ready on ", m->speech->device(), ": ", model->info().architecture,
           m->tokenizer ? "" : " (no tokenizer: transcripts are empty)");
  return m;
}

// An embedding or reranking model: one queue whose worker packs concurrent requests into the
// same forwards (runtime/embed_queue.h). It needs no tokenizer for token-id inputs.
std::shared_ptr<LoadedModel> embed_model(const ModelSpec& spec, std::shared_ptr<const Model> model,
                                         const EngineLoadOptions& o) {
  auto m = std::make_shared<LoadedModel>();
  m->name = spec.name;
  m->model = model;
  m->tokenizer = model->tokenizer();
  auto embedder = std::make_unique<Embedder>(
      model, EmbedderOptions{.device = o.device == "auto" ? "cpu" : o.device, .n_threads = o.n_threads,
                             .n_batch = std::max(o.n_batch, 8192), .yes_no = o.yes_no});
  m->n_ctx = embedder->max_tokens();
  m->embed = std::make_shared<EmbedQueue>(std::move(embedder));
  m->created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const Embedder& e = m->embed->embedder();
  log_info("serve: embedding model '", spec.name, "' ready: ", model->info().architecture, ", ", e.dim(),
           " dims, pooling ", pooling_name(e.pooling().mode), e.pooling().normalize ? " + L2" : "",
           e.yes_no() ? std::string(", yes/no reranker") : e.n_cls() > 0 ? str_cat(", classification head of ", e.n_cls()) : std::string(),
           m->tokenizer ? "" : " (no tokenizer: token-id inputs only)");
  return m;
}

}  // namespace

ModelLoader engine_model_loader(EngineLoadOptions o) {
  return [o](const ModelSpec& spec) -> std::shared_ptr<LoadedModel> {
    std::shared_ptr<const Model> model = Model::load({.path = hub_resolve_model(spec.path, HubOptions{}), .quant = o.quant, .n_threads = o.n_threads});
    if (model_is_speech(*model)) return speech_model(spec, model, o);
    if (Embedder::supports(*model, o.yes_no)) return embed_model(spec, model, o);
    std::shared_ptr<const Tokenizer> own_tokenizer;
    std::string template_source = model->chat_template();
    if (!o.tokenizer_dir.empty()) {
      own_tokenizer = Tokenizer::from_hf_dir(o.tokenizer_dir);
      try {
        template_source = ChatTemplate::from_hf_dir(o.tokenizer_dir).source("default");
      } catch (const std::exception&) {
        // No template there: keep the model's.
      }
    }
    const Tokenizer* tokenizer = own_tokenizer ? own_tokenizer.get() : model->tokenizer();
    BRISK_CHECK(tokenizer != nullptr, "serve: model '", spec.name, "' (", spec.path,
                ") has no tokenizer; give --tokenizer DIR (a Hugging Face folder with tokenizer.json)");
    const ContextOptions copt{.n_ctx = o.n_ctx, .n_seq_max = o.n_parallel, .n_batch = o.n_batch,
                              .kv_type = o.kv_type, .n_threads = o.n_threads, .device = o.device,
                              .kv_block_size = o.kv_block_size,
                              // recurrent state: snapshots at the prefix cache's blocks
                              .state_snapshot_interval = o.scheduler.cache.block_size,
                              .state_checkpoints = bool(o.make_spec)};
    SchedulerOptions sched = o.scheduler;
    if (o.make_spec) {
      const SpecOptions so = o.make_spec(model, spec.path, copt);
      sched.spec.source = so.source;
      sched.spec.draft_max = so.draft_max;
      sched.spec.draft_min = so.draft_min;
      sched.spec.adaptive = so.adaptive;
    }
    auto ctx = Context::create(model, copt);
    const std::string ctx_device = ctx->options().device;
    auto m = std::make_shared<LoadedModel>();
    m->name = spec.name;
    m->model = model;
    m->tokenizer_owner = own_tokenizer;
    m->tokenizer = tokenizer;
    m->end_ids = m->tokenizer->end_of_generation_ids();
    m->n_ctx = ctx->options().n_ctx;
    m->created = std::chrono::duration_cast<std::chrono::seconds>(
                     std::chrono::system_clock::now().time_since_epoch()).count();
    m->chat_template = template_source;
    m->chat_format = chat_format_detect(m->chat_template, model->info().architecture);
    if (!m->chat_template.empty()) {
      auto tmpl = std::make_shared<const ChatTemplate>(m->chat_template, spec.path);
      const std::string bos = model->bos_text(), eos = model->eos_text();
      m->render_chat = [tmpl, bos, eos](const ChatPromptInput& in) {
        ChatRenderInput r;
        r.messages = nlohmann::ordered_json::parse(in.messages.dump());
        r.tools = in.tools.is_null() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json::parse(in.tools.dump());
        r.add_generation_prompt = in.add_generation_prompt;
        r.bos_token = bos;
        r.eos_token = eos;
        r.kwargs = nlohmann::ordered_json::parse(in.kwargs.dump());
        return tmpl->render(r);
      };
    } else {
      log_warn("serve: model '", spec.name, "' has no chat template: only /v1/completions works");
    }
    m->scheduler = std::make_unique<Scheduler>(std::move(ctx), engine_sampler_factory(), sched);
    log_info("serve: model '", spec.name, "' ready on ", ctx_device, ": ", model->info().architecture, ", context ",
             m->n_ctx, " x ", o.n_parallel, " sequences (KV blocks of ", o.kv_block_size, "), output format ",
             chat_format_name(m->chat_format));
    return m;
  };
}

}  // namespace brisk::server
