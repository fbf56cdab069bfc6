#include "server/model_registry.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "server/errors.h"

namespace brisk::server {

ModelRegistry::ModelRegistry(std::vector<ModelSpec> specs, ModelLoader loader, int32_t max_resident)
    : specs_(std::move(specs)), loader_(std::move(loader)), max_resident_(std::max(1, max_resident)) {
  BRISK_CHECK(!specs_.empty(), "serve: no model given (use --model [NAME=]PATH)");
  for (size_t i = 0; i < specs_.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      BRISK_CHECK(specs_[i].name != specs_[j].name, "serve: model name '", specs_[i].name, "' given twice");
}

std::optional<ModelSpec> ModelRegistry::find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(specs_mu_);
  if (name.empty()) return specs_.empty() ? std::nullopt : std::optional<ModelSpec>(specs_.front());
  for (const auto& s : specs_)
    if (s.name == name) return s;
  return std::nullopt;
}

bool ModelRegistry::has(const std::string& name) const { return find(name).has_value(); }

std::vector<ModelSpec> ModelRegistry::specs() const {
  std::lock_guard<std::mutex> lock(specs_mu_);
  return specs_;
}

void ModelRegistry::add(ModelSpec spec) {
  BRISK_CHECK(!spec.name.empty() && !spec.path.empty(), "serve: a model needs a name and a path");
  {
    std::lock_guard<std::mutex> lock(specs_mu_);
    auto it = std::find_if(specs_.begin(), specs_.end(), [&](const ModelSpec& s) { return s.name == spec.name; });
    if (it == specs_.end()) {
      specs_.push_back(std::move(spec));
      return;
    }
    if (it->path == spec.path) return;
    *it = spec;
  }
  unload(spec.name);
}

bool ModelRegistry::remove(const std::string& name) {
  {
    std::lock_guard<std::mutex> lock(specs_mu_);
    auto it = std::find_if(specs_.begin(), specs_.end(), [&](const ModelSpec& s) { return s.name == name; });
    if (it == specs_.end()) return false;
    specs_.erase(it);
  }
  std::shared_ptr<LoadedModel> gone;
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = resident_.find(name); it != resident_.end()) {
    gone = std::move(it->second);  // freed when the last request holding it ends
    resident_.erase(it);
    lru_.remove(name);
  }
  return true;
}

bool ModelRegistry::unload(const std::string& name) {
  std::shared_ptr<LoadedModel> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = resident_.find(name);
    if (it == resident_.end() || it->second.use_count() > 1) return false;
    gone = std::move(it->second);
    resident_.erase(it);
    lru_.remove(name);
  }
  log_info("serve: unloaded model '", name, "'");
  return true;
}

std::shared_ptr<LoadedModel> ModelRegistry::get(const std::string& name) {
  std::shared_ptr<LoadedModel> m = load(name);
  if (m->embed)
    throw HttpError(400, str_cat("model '", m->name, "' is an embedding model: use /v1/embeddings or /v1/rerank"), "model");
  if (!m->scheduler)
    throw HttpError(400, str_cat("model '", m->name, "' is a speech model: use /v1/audio/transcriptions or /v1/audio/translations"),
                    "model");
  return m;
}

std::shared_ptr<LoadedModel> ModelRegistry::get_embed(const std::string& name) {
  std::shared_ptr<LoadedModel> m = load(name);
  if (!m->embed)
    throw HttpError(400, str_cat("model '", m->name, "' is not an embedding model (it ", m->speech ? "transcribes speech" : "generates text",
                                 "); serve an encoder such as BERT, XLM-RoBERTa or a cross-encoder for /v1/embeddings and /v1/rerank"),
                    "model");
  return m;
}

std::shared_ptr<LoadedModel> ModelRegistry::get_speech(const std::string& name) {
  std::shared_ptr<LoadedModel> m = load(name);
  if (!m->speech) throw HttpError(400, str_cat("model '", m->name, "' is not a speech-to-text model"), "model");
  return m;
}

std::shared_ptr<LoadedModel> ModelRegistry::load(const std::string& name) {
  const std::optional<ModelSpec> spec = find(name);
  if (!spec) throw HttpError(404, str_cat("model '", name, "' does not exist"), "model");
  auto lookup = [&]() -> std::shared_ptr<LoadedModel> {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = resident_.find(spec->name);
    if (it == resident_.end()) return nullptr;
    lru_.remove(spec->name);
    lru_.push_front(spec->name);
    return it->second;
  };
  if (auto m = lookup()) return m;
  std::lock_guard<std::mutex> load_lock(load_mu_);
  if (auto m = lookup()) return m;
  // Make room first: unload least recently used models that no request holds.
  std::vector<std::shared_ptr<LoadedModel>> unloaded;
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (int32_t(resident_.size()) >= max_resident_) {
      auto victim = std::find_if(lru_.rbegin(), lru_.rend(),
                                 [&](const std::string& n) { return resident_.at(n).use_count() == 1; });
      if (victim == lru_.rend()) {
        log_warn("serve: every resident model is busy; loading '", spec->name, "' beyond the limit of ",
                 max_resident_);
        break;
      }
      log_info("serve: unloading model '", *victim, "' (least recently used)");
      unloaded.push_back(resident_.at(*victim));
      resident_.erase(*victim);
      lru_.erase(std::next(victim).base());
    }
  }
  unloaded.clear();  // freed here, outside mu_
  log_info("serve: loading model '", spec->name, "' from ", spec->path);
  std::shared_ptr<LoadedModel> m = loader_(*spec);
  BRISK_CHECK(m && ((m->scheduler && m->tokenizer) || m->speech || m->embed), "serve: loading model '", spec->name, "' gave no engine");
  m->name = spec->name;
  std::lock_guard<std::mutex> lock(mu_);
  resident_[spec->name] = m;
  lru_.push_front(spec->name);
  return m;
}

std::vector<std::shared_ptr<LoadedModel>> ModelRegistry::resident() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<LoadedModel>> out;
  for (const auto& [n, m] : resident_) out.push_back(m);
  return out;
}

void ModelRegistry::unload_all() {
  std::map<std::string, std::shared_ptr<LoadedModel>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all.swap(resident_);
    lru_.clear();
  }
  all.clear();
}

}  // namespace brisk::server
