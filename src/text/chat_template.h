// Chat templates: the Jinja template a model ships to turn a conversation into its prompt
// text, rendered exactly as Hugging Face transformers' apply_chat_template does
// (trim_blocks and lstrip_blocks on; globals messages, tools, documents, add_generation_prompt,
// bos_token, eos_token and the extra keyword arguments; raise_exception and strftime_now).
//
// A model may ship several named variants ("default", "tool_use", "rag", ...). With no variant
// requested, the choice follows transformers: "tool_use" when tools are given and it exists,
// else "default", else the only template.
//
// Sources: GGUF metadata (tokenizer.chat_template, tokenizer.chat_template.NAME), a Hugging Face
// folder (chat_template.jinja, chat_template.json, or tokenizer_config.json "chat_template" as a
// string or a list of {name, template}), or a template file.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace brisk {

namespace gguf { class File; }
namespace jinja { class Template; }

struct ChatRenderInput {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools = nullptr;  // null: no tools (the template sees None)
  bool add_generation_prompt = false;
  std::optional<std::string> bos_token;  // absent: undefined in the template
  std::optional<std::string> eos_token;
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();  // e.g. enable_thinking
  std::string variant;  // "" = transformers' default choice
  // Cut the render right after the last message's content (an assistant prefill to continue),
  // as transformers' continue_final_message does.
  bool continue_final_message = false;
};

// The conversation file format of `brisk template --input`:
// {"messages": [...], "tools": [...], "add_generation_prompt": true, "bos_token": "...",
//  "eos_token": "...", "kwargs": {...}} (+ optional "variant", "continue_final_message").
// `where` names the source in errors.
ChatRenderInput chat_render_input_from_json(const nlohmann::ordered_json& conv,
                                            const std::string& where);

class ChatTemplate {
 public:
  // One template; `origin` (a path or key) appears in error messages.
  explicit ChatTemplate(std::string source, std::string origin = "chat_template");
  // Named variants (name, source); at least one.
  ChatTemplate(std::vector<std::pair<std::string, std::string>> variants, std::string origin);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  static ChatTemplate from_file(const std::string& path);
  static ChatTemplate from_gguf(const gguf::File& file);
  static ChatTemplate from_hf_dir(const std::string& dir);
  // A .gguf file or a Hugging Face folder.
  static ChatTemplate from_model(const std::string& path);

  std::vector<std::string> variant_names() const;
  // The variant render() would use for this input (throws when the requested one is absent).
  const std::string& select_variant(const ChatRenderInput& input) const;
  const std::string& source(const std::string& variant) const;

  std::string render(const ChatRenderInput& input) const;

 private:
  std::map<std::string, std::string> variants_;
  std::string origin_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::shared_ptr<const jinja::Template>> parsed_;
};

}  // namespace brisk
