// Model::load: a GGUF file or a Hugging Face folder (config.json + safetensors, optionally
// tokenizer files and a chat template) -> LoadedModel. The architecture is looked up in the
// registry; config values come from the declarative key table; weights stay in their stored
// format unless a load-time quant type is asked for (safetensors only).
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/log.h"
#include "formats/gguf.h"
#include "formats/json_file.h"
#include "formats/model_format.h"
#include "formats/safetensors.h"
#include "models/name_map.h"
#include "runtime/engine_parts.h"
#include "runtime/loaded_model.h"
#include "runtime/model_tokenizer.h"

namespace brisk {

namespace fs = std::filesystem;

namespace {

std::optional<QuantType> parse_quant(const std::string& q) {
  if (q.empty()) return std::nullopt;
  const auto t = quant_type_from_name(q);
  BRISK_CHECK(t && (*t == QuantType::Q8_0 || *t == QuantType::Q4_0 || *t == QuantType::Q4_K ||
                    *t == QuantType::F16 || *t == QuantType::BF16),
              "--quant '", q, "' is not supported at load (use q8_0, q4_0, q4_k, f16 or bf16)");
  return t;
}

std::string read_text_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  BRISK_CHECK(in.good(), "cannot read ", p.string());
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

void finish(LoadedModel& m, const ArchEntry& entry) {
  ModelConfig& c = m.config_;
  c.arch = entry.name;
  if (c.n_vocab == 0) {
    const StoredTensor* t = m.weights_->find("token_embd.weight");
    BRISK_CHECK(t && t->ne.size() == 2, "model has no token_embd.weight to take the vocabulary size from");
    c.n_vocab = int32_t(t->ne[1]);
  }
  if (entry.sanitize) entry.sanitize(c);
  c.finalize();
  // Weights stay in their stored layouts until a context binds them to a backend (arch_for).
  m.entry_ = &entry;
  m.arch_ = entry.build(c, *m.weights_);
  if (const ArchModel::MtpPart mtp = m.arch_->mtp(); mtp.cfg) m.mtp_config_ = std::make_unique<ModelConfig>(*mtp.cfg);
  ModelInfo& info = m.info_;
  info.architecture = c.arch;
  info.name = c.name;
  info.n_vocab = c.n_vocab;
  info.n_ctx_train = c.n_ctx_train;
  info.n_layer = c.n_layer;
  info.n_embd = c.n_embd;
  info.n_params = m.weights_->total_elements();
  // A decoded token reads every weight once, except the embedding tables (one row each): the
  // token embeddings unless they double as the LM head, and per-layer embeddings.
  uint64_t bytes = m.weights_->total_bytes();
  const bool emb_is_head = c.tie_embeddings || !m.weights_->has("output.weight");
  for (const char* table : {"token_embd.weight", "per_layer_token_embd.weight"}) {
    const StoredTensor* t = m.weights_->find(table);
    if (!t || (emb_is_head && std::string(table) == "token_embd.weight")) continue;
    const uint64_t rows = t->ne.size() >= 2 ? uint64_t(t->ne[1]) : 1;
    bytes -= t->n_bytes - (rows > 0 ? t->n_bytes / rows : 0);
  }
  info.weight_bytes = bytes;
  // Recurrent layers (ArchModel::layer_states, F32 slots) read their state and write it back once
  // per decoded token: a stream beside the weights' (1 MiB per layer of 16 heads of 128 x 128).
  uint64_t state_floats = 0;
  for (const LayerState& l : m.arch_->layer_states())
    for (int64_t n : l.recurrent) state_floats += uint64_t(n);
  info.state_bytes = 2 * state_floats * sizeof(float);
}

std::shared_ptr<Model> load_gguf_file(std::shared_ptr<const gguf::File> file, const std::string& path) {
  const std::string arch = file->architecture();
  const ArchEntry* entry = arch_find_gguf(arch);
  BRISK_CHECK(entry, path, ": unsupported GGUF architecture '", arch, "'");
  auto m = std::make_shared<LoadedModel>();
  m->config_.rope_neox = entry->gguf_rope_neox;
  m->config_.from_gguf = true;
  config_fill_from_gguf(m->config_, *file);
  m->weights_ = WeightStore::from_gguf(file);
  m->config_.tie_embeddings = !m->weights_->has("output.weight");
  finish(*m, *entry);
  // Side files of Hugging Face folders that a converter kept (speech models: token ids and the
  // front end), as JSON under {arch}.hf.*.
  for (auto [key, json] : {std::pair{".hf.config", &m->config_json_}, std::pair{".hf.generation_config", &m->generation_config_},
                           std::pair{".hf.preprocessor_config", &m->preprocessor_config_}}) {
    if (auto s = file->get_string(arch + key)) {
      *json = nlohmann::json::parse(*s, nullptr, false);
      BRISK_CHECK(!json->is_discarded(), path, ": GGUF key ", arch, key, " is not valid JSON");
    }
  }
  m->tokenizer_ = tokenizer_load_gguf(*file);
  if (auto t = file->get_string("tokenizer.chat_template")) m->chat_template_ = *t;
  return m;
}

std::shared_ptr<Model> load_gguf(const ModelLoadOptions& o) {
  BRISK_CHECK(o.quant.empty(), "--quant applies to safetensors checkpoints; ", o.path,
              " is a GGUF file (already in its stored formats)");
  return load_gguf_file(std::make_shared<gguf::File>(gguf::File::open(
                            o.path, o.use_mmap ? MappedFile::Mode::mmap : MappedFile::Mode::read)),
                        o.path);
}

std::shared_ptr<Model> load_hf(const ModelLoadOptions& o) {
  const fs::path dir(o.path);
  const nlohmann::json cfg = read_json_file((dir / "config.json").string());
  const ArchEntry* entry = arch_find_hf_config(cfg);
  BRISK_CHECK(entry, (dir / "config.json").string(), ": unsupported architecture (model_type '",
              cfg.is_object() ? cfg.value("model_type", std::string()) : std::string(), "')");
  auto m = std::make_shared<LoadedModel>();
  m->config_.rope_neox = true;  // transformers' rotate_half pairing
  config_fill_from_hf(m->config_, arch_hf_config_with_defaults(*entry, cfg));
  auto ckpt = std::make_shared<safetensors::Checkpoint>(
      safetensors::Checkpoint::open(o.path, o.use_mmap ? MappedFile::Mode::mmap : MappedFile::Mode::read));
  m->weights_ = WeightStore::from_safetensors(ckpt, entry->hf_name_map ? entry->hf_name_map : &hf_to_gguf_name,
                                              parse_quant(o.quant));
  finish(*m, *entry);
  m->config_json_ = cfg;
  m->folder_ = dir.string();
  if (fs::exists(dir / "generation_config.json"))
    m->generation_config_ = read_json_file((dir / "generation_config.json").string());
  if (fs::exists(dir / "preprocessor_config.json"))
    m->preprocessor_config_ = read_json_file((dir / "preprocessor_config.json").string());
  m->tokenizer_ = tokenizer_load_hf(o.path);
  if (fs::exists(dir / "chat_template.jinja")) {
    m->chat_template_ = read_text_file(dir / "chat_template.jinja");
  } else if (fs::exists(dir / "tokenizer_config.json")) {
    const nlohmann::json tc = read_json_file((dir / "tokenizer_config.json").string());
    if (auto it = tc.find("chat_template"); it != tc.end() && it->is_string()) m->chat_template_ = *it;
  }
  return m;
}

}  // namespace

const ArchModel& LoadedModel::arch_for(const Backend& backend) const {
  std::lock_guard<std::mutex> lock(layout_mutex_);
  auto* self = const_cast<LoadedModel*>(this);
  const WeightStore::LayoutFn layout_of = [&backend](QuantType stored) { return backend.weight_layout(stored); };
  const LayoutPlan plan = weights_->layout_plan(layout_of);
  if (plan == bytes_plan_) {
    bound_ = true;
    return *arch_;
  }
  if (!bound_) {  // no context holds views yet: rewrite the bytes for this backend
    self->weights_->relayout_in_place(layout_of);
    self->arch_ = entry_->build(config_, *self->weights_);
    bytes_plan_ = plan;
    bound_ = true;
    return *arch_;
  }
  for (const Relaid& r : relaid_)
    if (r.plan == plan) return *r.arch;
  Relaid r{.plan = plan, .weights = weights_->relaid_copy(layout_of), .arch = nullptr};
  r.arch = entry_->build(config_, *r.weights);
  relaid_.push_back(std::move(r));
  return *relaid_.back().arch;
}

std::string LoadedModel::bos_text() const {
  if (!tokenizer_ || tokenizer_->bos_id() < 0) return "";
  return tokenizer_->token_text(tokenizer_->bos_id());
}

std::string LoadedModel::eos_text() const {
  if (!tokenizer_ || tokenizer_->eos_id() < 0) return "";
  return tokenizer_->token_text(tokenizer_->eos_id());
}

std::shared_ptr<Model> model_load_gguf_bytes(std::shared_ptr<const MappedFile> bytes) {
  BRISK_CHECK(bytes != nullptr, "model_load_gguf_bytes: no bytes");
  const std::string name = bytes->path();
  return load_gguf_file(std::make_shared<gguf::File>(gguf::File::parse(std::move(bytes))), name);
}

std::shared_ptr<Model> Model::load(const ModelLoadOptions& o) {
  BRISK_CHECK(!o.path.empty(), "no model path given");
  BRISK_CHECK(fs::exists(o.path), "model path ", o.path, " does not exist");
  // By content: a GGUF file, or a Hugging Face folder (also given as one of its safetensors
  // files or its index).
  const ModelFormat format = model_format_detect(o.path);
  if (format == ModelFormat::gguf) return load_gguf(o);
  ModelLoadOptions folder = o;
  folder.path = hf_folder_of(o.path, format);
  return load_hf(folder);
}

}  // namespace brisk
