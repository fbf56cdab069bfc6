// The models a server offers, loaded on first use and kept resident up to a limit (least
// recently used idle model unloaded first). A LoadedModel bundles what the HTTP layer needs:
// tokenizer, chat template renderer, the scheduler that owns the model's Context.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/engine_api.h"
#include "text/chat_output.h"
#include "runtime/scheduler.h"

namespace brisk {
class EmbedQueue;
class TokenMask;
class Transcriber;
}

namespace brisk::server {

struct ChatPromptInput {
  nlohmann::json messages = nlohmann::json::array();
  nlohmann::json tools;                 // null: none
  bool add_generation_prompt = true;
  nlohmann::json kwargs = nlohmann::json::object();  // chat_template_kwargs (enable_thinking, ...)
};
using ChatRenderer = std::function<std::string(const ChatPromptInput&)>;

struct LoadedModel {
  std::string name;
  std::shared_ptr<const Model> model;        // null when the engine is a test stand-in
  std::shared_ptr<const Tokenizer> tokenizer_owner;  // set when the tokenizer is not the model's
  const Tokenizer* tokenizer = nullptr;
  ChatRenderer render_chat;                  // empty: the model has no chat template
  std::string chat_template;                 // template source
  ChatFormat chat_format = ChatFormat::kContentOnly;  // how outputs mark reasoning / tool calls
  std::vector<int32_t> end_ids;              // end-of-generation tokens
  int32_t n_ctx = 0;
  int64_t created = 0;                       // unix seconds
  // Built on first constrained request (server/constraints.h).
  std::mutex mask_mu;
  std::shared_ptr<const brisk::TokenMask> token_mask;
  std::shared_ptr<const std::vector<std::string>> vocab_texts;  // decoded text of every token
  // Speech-to-text models (server/audio_api.cpp) have a transcriber instead of a scheduler.
  std::shared_ptr<Transcriber> speech;
  // Embedding / reranking models (server/embeddings_api.cpp) have an embedding queue instead.
  std::shared_ptr<EmbedQueue> embed;
  // Bytes of the longest token text plus one (computed on first use): a prompt text longer
  // than n_ctx times this cannot fit in the context (see prompt_byte_limit).
  mutable std::atomic<int32_t> max_token_bytes{0};
  std::unique_ptr<Scheduler> scheduler;      // destroyed first (declared last)
  ~LoadedModel() { scheduler.reset(); }
};

struct ModelSpec {
  std::string name;   // the id clients use
  std::string path;
  std::string hub_ref{};  // set for a model pulled while serving (/api/pull): what deleting it removes
};
using ModelLoader = std::function<std::shared_ptr<LoadedModel>(const ModelSpec&)>;

class ModelRegistry {
 public:
  ModelRegistry(std::vector<ModelSpec> specs, ModelLoader loader, int32_t max_resident);
  // The model (loading it if needed). "" selects the first model. Unknown: HttpError 404.
  std::shared_ptr<LoadedModel> load(const std::string& name);
  // load() for the text routes: a speech model is an HttpError 400 naming the audio routes.
  std::shared_ptr<LoadedModel> get(const std::string& name);
  // load() for the audio routes: a text model is an HttpError 400.
  std::shared_ptr<LoadedModel> get_speech(const std::string& name);
  // load() for the embedding and rerank routes: a generative model is an HttpError 400.
  std::shared_ptr<LoadedModel> get_embed(const std::string& name);
  bool has(const std::string& name) const;
  std::vector<ModelSpec> specs() const;
  std::vector<std::shared_ptr<LoadedModel>> resident() const;
  // Offers one more model (e.g. one pulled from the Hub while serving); a spec of the same
  // name is replaced (its resident engine, if any, unloaded).
  void add(ModelSpec spec);
  // Stops offering a model and unloads it (requests holding it finish first). False when
  // no model has that name.
  bool remove(const std::string& name);
  // Unloads a model when no request holds it; false when it was not resident or is busy.
  bool unload(const std::string& name);
  // Unloads every model (their schedulers cancel what still runs).
  void unload_all();

 private:
  std::optional<ModelSpec> find(const std::string& name) const;
  mutable std::mutex specs_mu_;
  std::vector<ModelSpec> specs_;
  ModelLoader loader_;
  int32_t max_resident_;
  mutable std::mutex mu_;       // resident_ and lru_
  std::mutex load_mu_;          // one load at a time
  std::map<std::string, std::shared_ptr<LoadedModel>> resident_;
  std::list<std::string> lru_;  // front: most recently used
};

}  // namespace brisk::server
