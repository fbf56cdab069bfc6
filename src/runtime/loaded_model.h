// The Model implementation: config, weights and the architecture's forward (shared, read-only)
// plus tokenizer and chat template. Contexts of this model run its forward.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
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
  // The forward over weights in the layouts `backend` reads (Backend::weight_layout). The
  // first backend bound gets the loaded bytes, rewritten in place for it; a later backend that
  // wants other layouts gets a store of converted copies (kept while the model lives). Views
  // stay valid while the model lives. Thread-safe.
  const ArchModel& arch_for(const Backend& backend) const;

  ModelInfo info_;
  ModelConfig config_;
  const ArchEntry* entry_ = nullptr;
  std::unique_ptr<WeightStore> weights_;
  std::unique_ptr<ArchModel> arch_;  // over weights_ (built at load, to check the weights)
  // The config of the multi-token-prediction block (ArchModel::mtp) as the load-time forward
  // gave it (kept here: arch_for may rebuild arch_), nullptr without one.
  std::unique_ptr<ModelConfig> mtp_config_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::string chat_template_;
  // Hugging Face folders: the side files that speech models read (runtime/speech_config.h);
  // null when absent.
  nlohmann::json config_json_;
  nlohmann::json generation_config_;
  nlohmann::json preprocessor_config_;
  std::string folder_;  // the Hugging Face folder ("" for GGUF): sentence-transformers files
  // A tensor-parallel shard (models/tp_shard.h): the model whose bytes its weights view.
  std::shared_ptr<const LoadedModel> shard_of_;

 private:
  using LayoutPlan = std::vector<std::pair<QuantType, QuantType>>;
  struct Relaid {
    LayoutPlan plan;
    std::unique_ptr<WeightStore> weights;
    std::unique_ptr<ArchModel> arch;
  };
  mutable std::mutex layout_mutex_;
  mutable bool bound_ = false;      // a context holds arch_: weights_ keeps its layouts
  mutable LayoutPlan bytes_plan_;   // the layouts weights_ holds (empty: as stored)
  mutable std::vector<Relaid> relaid_;
};

}  // namespace brisk
