// The Model implementation: config, weights and the architecture's forward (shared, read-only)
// plus tokenizer and chat template. Contexts of this model run its forward.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "models/config.h"
#include "models/registry.h"
#include "models/weights.h"
#include "runtime/engine_api.h"

namespace brisk {

namespace gguf { class File; }

class LoadedModel final : public Model {
 public:
  const ModelInfo& info() const override { return info_; }
  const Tokenizer* tokenizer() const override { return tokenizer_.get(); }
  const std::string& chat_template() const override { return chat_template_; }
  std::string bos_text() const override;
  std::string eos_text() const override;

  const ModelConfig& config() const { return config_; }
  const ArchModel& arch() const { return *arch_; }

  ModelInfo info_;
  ModelConfig config_;
  std::unique_ptr<WeightStore> weights_;
  std::unique_ptr<ArchModel> arch_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::string chat_template_;
  // Hugging Face folders: the side files that speech models read (runtime/speech_config.h);
  // null when absent.
  nlohmann::json config_json_;
  nlohmann::json generation_config_;
  nlohmann::json preprocessor_config_;
};

}  // namespace brisk
