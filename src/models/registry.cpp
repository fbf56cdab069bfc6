#include "models/registry.h"

#include <algorithm>

#include "core/error.h"
#include <nlohmann/json.hpp>

namespace brisk {

const std::vector<const ArchEntry*>& arch_registry() {
  // Listed explicitly: libbrisk is a static library, so self-registering objects that nothing
  // references would be dropped by the linker.
  static const std::vector<const ArchEntry*> entries = {
      &arch_llama(), &arch_mistral(), &arch_qwen2(), &arch_qwen3(), &arch_qwen3moe(), &arch_gemma3(),
      &arch_gemma_embedding(), &arch_gemma4(),
      &arch_qwen35(), &arch_qwen35moe(), &arch_qwen3next(), &arch_whisper(), &arch_bert(), &arch_roberta(),
      &arch_nomic_bert(), &arch_modern_bert(),
  };
  return entries;
}

std::vector<LayerKvNeeds> ArchModel::kv_layers(const ModelConfig& cfg) const {
  std::vector<LayerKvNeeds> out;
  for (int il = 0; il < cfg.n_layer; ++il)
    out.push_back({.n_head_kv = cfg.n_head_kv_of(il), .head_dim = cfg.head_dim_of(il),
                   .window = cfg.sliding(il) ? cfg.sliding_window : 0});
  return out;
}

void ArchModel::encode(const EncoderForward&) const { fail("this model has no encoder"); }
void ArchModel::embed(const EmbedForward&) const { fail("this model is not an embedding model"); }

const ArchEntry* arch_find_hf(const std::vector<std::string>& architectures, const std::string& model_type) {
  for (const std::string& a : architectures)
    for (const ArchEntry* e : arch_registry())
      for (const std::string& n : e->hf_architectures)
        if (n == a) return e;
  for (const ArchEntry* e : arch_registry())
    for (const std::string& n : e->hf_model_types)
      if (n == model_type) return e;
  return nullptr;
}

const ArchEntry* arch_find_hf_config(const nlohmann::json& config) {
  std::vector<std::string> architectures;
  if (!config.is_object()) return nullptr;
  if (auto it = config.find("architectures"); it != config.end() && it->is_array())
    for (const auto& a : *it)
      if (a.is_string()) architectures.push_back(a.get<std::string>());
  const auto mt = config.find("model_type");
  return arch_find_hf(architectures, mt != config.end() && mt->is_string() ? mt->get<std::string>() : std::string());
}

nlohmann::json arch_hf_config_with_defaults(const ArchEntry& entry, const nlohmann::json& config) {
  if (!config.is_object()) return config;
  // A head the entry does not name (found by model_type) would be dropped with its weights.
  if (auto a = config.find("architectures"); a != config.end() && a->is_array())
    for (const nlohmann::json& name : *a) {
      if (!name.is_string()) continue;
      const std::string n = name.get<std::string>();
      const bool head = n.find("ForSequenceClassification") != std::string::npos ||
                        n.find("ForTokenClassification") != std::string::npos;
      BRISK_CHECK(!head || std::find(entry.hf_architectures.begin(), entry.hf_architectures.end(), n) !=
                               entry.hf_architectures.end(),
                  "config.json: ", n, " is not supported (its classification head; ", entry.name,
                  " checkpoints load as ", entry.hf_architectures.empty() ? entry.name : entry.hf_architectures[0], ")");
    }
  if (entry.hf_config_fixed) {
    const auto text = config.find("text_config");
    const nlohmann::json fixed = nlohmann::json::parse(entry.hf_config_fixed);
    for (const auto& [key, want] : fixed.items()) {
      const nlohmann::json* v = text != config.end() && text->is_object() && text->contains(key) ? &(*text)[key]
                                : config.contains(key)                                          ? &config[key]
                                                                                                : nullptr;
      BRISK_CHECK(!v || *v == want || (want.is_null() && v->is_null()), "config.json: ", key, " = ", v ? v->dump() : "",
                  " is not supported by the ", entry.name, " architecture (only ", want.dump(), ")");
    }
  }
  if (!entry.hf_config_defaults) return config;
  const nlohmann::json defaults = nlohmann::json::parse(entry.hf_config_defaults);
  nlohmann::json out = config;
  const auto text = out.find("text_config");
  nlohmann::json& scope = text != out.end() && text->is_object() ? *text : out;
  for (const auto& [key, value] : defaults.items())
    if (!scope.contains(key) && !out.contains(key)) scope[key] = value;
  return out;
}

const ArchEntry* arch_find_gguf(const std::string& name) {
  for (const ArchEntry* e : arch_registry())
    for (const std::string& n : e->gguf_names)
      if (n == name) return e;
  return nullptr;
}

}  // namespace brisk
