// How the commands get at a model, the same way in each: the reference resolved (a path, or a
// Hub reference downloaded on first use), the chat template read and tried before the weights
// load (a broken template fails at once, not after a long load), and a load indicator on a
// terminal (nothing when stdout or stderr is not one).
#pragma once
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "runtime/engine_api.h"
#include "text/chat_template.h"

namespace brisk::cli {

// A local path as is; a Hub reference (org/name[:QUANT], ...) from the cache or downloaded.
std::string resolve_model(const std::string& ref, const std::string& hf_token = {});

// Both stdout and stderr are terminals.
bool on_terminal();

// While alive, and when on_terminal(), redraws "loading LABEL ⠙ 1.2 s" on stderr every 100 ms
// after the first 300 ms; the line is erased when it ends.
class LoadIndicator {
 public:
  explicit LoadIndicator(std::string label);
  ~LoadIndicator();
  LoadIndicator(const LoadIndicator&) = delete;
  LoadIndicator& operator=(const LoadIndicator&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Model::load with a LoadIndicator naming the file.
std::shared_ptr<Model> load_model(const ModelLoadOptions& options);

// The chat template(s) of a GGUF file, or of a folder (or the folder of a safetensors file):
// chat_template.jinja, chat_template.json or tokenizer_config.json. Throws when there is none.
ChatTemplate model_chat_template(const std::string& path);

// The chat template of the model at `model_path` (a file given with --template instead when
// `template_file` is not empty), read from the metadata without loading weights and rendered
// once with a one-message conversation. nullopt when the model has none and none is given.
std::optional<ChatTemplate> checked_chat_template(const std::string& model_path, const std::string& template_file);

}  // namespace brisk::cli
