#include "cli/model_arg.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/json_file.h"
#include "formats/model_format.h"
#include "hub/resolve.h"

namespace brisk::cli {

namespace fs = std::filesystem;

std::string resolve_model(const std::string& ref, const std::string& hf_token) {
  HubOptions hub;
  hub.token = hf_token;
  return hub_resolve_model(ref, hub);
}

bool on_terminal() { return isatty(STDOUT_FILENO) && isatty(STDERR_FILENO); }

LoadIndicator::LoadIndicator(std::string label) {
  if (!on_terminal()) return;
  thread_ = std::thread([this, label = std::move(label)] {
    static const char* const kFrames[] = {"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"};
    const auto t0 = std::chrono::steady_clock::now();
    bool drawn = false;
    for (int frame = 0; !stop_.load(); ++frame) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (stop_.load() || s < 0.3) continue;
      std::fprintf(stderr, "\r\x1b[Kloading %s %s %.1f s", label.c_str(), kFrames[frame % 10], s);
      std::fflush(stderr);
      drawn = true;
    }
    if (drawn) {
      std::fputs("\r\x1b[K", stderr);
      std::fflush(stderr);
    }
  });
}

LoadIndicator::~LoadIndicator() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<Model> load_model(const ModelLoadOptions& options) {
  std::string label = fs::path(options.path).filename().string();
  if (label.empty()) label = fs::path(options.path).parent_path().filename().string();
  std::error_code ec;
  if (fs::is_regular_file(options.path, ec))
    label += str_cat(" (", (fs::file_size(options.path, ec) + (1 << 19)) >> 20, " MiB)");
  LoadIndicator indicator(label);
  return Model::load(options);
}

ChatTemplate model_chat_template(const std::string& path) {
  const ModelFormat format = model_format_detect(path);
  if (format == ModelFormat::gguf) return ChatTemplate::from_model(path);
  const fs::path dir = format == ModelFormat::folder ? fs::path(path) : fs::path(path).parent_path();
  return ChatTemplate::from_hf_dir(dir.empty() ? "." : dir.string());
}

namespace {

// Whether the model's files declare a chat template (without reading its weights).
bool has_chat_template(const std::string& path) {
  const ModelFormat format = model_format_detect(path);
  if (format == ModelFormat::gguf) {
    const gguf::File f = gguf::File::open(path);
    for (const auto& [key, value] : f.metadata())
      if (key.rfind("tokenizer.chat_template", 0) == 0) return true;
    return false;
  }
  fs::path dir = format == ModelFormat::folder ? fs::path(path) : fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (fs::exists(dir / "chat_template.jinja")) return true;
  for (const char* name : {"chat_template.json", "tokenizer_config.json"}) {
    if (!fs::exists(dir / name)) continue;
    const nlohmann::json j = read_json_file((dir / name).string());
    if (j.is_object() && j.contains("chat_template") && !j["chat_template"].is_null()) return true;
  }
  return false;
}

}  // namespace

std::optional<ChatTemplate> checked_chat_template(const std::string& model_path, const std::string& template_file) {
  std::optional<ChatTemplate> t;
  if (!template_file.empty()) {
    t.emplace(ChatTemplate::from_file(template_file));
  } else if (has_chat_template(model_path)) {
    t.emplace(model_chat_template(model_path));
  } else {
    return std::nullopt;
  }
  ChatRenderInput probe;
  probe.messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", "Hello"}}});
  probe.add_generation_prompt = true;
  probe.bos_token = "";
  probe.eos_token = "";
  t->render(probe);  // parses the template: syntax errors name the file, line and column
  return t;
}

}  // namespace brisk::cli
