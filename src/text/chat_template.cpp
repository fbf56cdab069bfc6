#include "text/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "formats/gguf.h"
#include "text/jinja/strings.h"
#include "text/jinja/template.h"
#include "text/jinja/value.h"

namespace brisk {

namespace {

constexpr const char* kDefaultVariant = "default";

std::string read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  BRISK_CHECK(f, "cannot open ", path);
  std::ostringstream ss;
  ss << f.rdbuf();
  BRISK_CHECK(!f.bad(), "cannot read ", path);
  return ss.str();
}

// tokenizer_config.json / chat_template.json "chat_template": a string or [{name, template}].
std::vector<std::pair<std::string, std::string>> variants_from_json(const nlohmann::json& v,
                                                                    const std::string& where) {
  std::vector<std::pair<std::string, std::string>> out;
  if (v.is_string()) {
    out.emplace_back(kDefaultVariant, v.get<std::string>());
    return out;
  }
  BRISK_CHECK(v.is_array(), where, ": chat_template must be a string or a list of {name, template}");
  for (size_t i = 0; i < v.size(); ++i) {
    const auto& e = v[i];
    BRISK_CHECK(e.is_object() && e.contains("name") && e["name"].is_string() &&
                    e.contains("template") && e["template"].is_string(),
                where, ": chat_template[", i, "] must be an object with string name and template");
    out.emplace_back(e["name"].get<std::string>(), e["template"].get<std::string>());
  }
  BRISK_CHECK(!out.empty(), where, ": chat_template list is empty");
  return out;
}

// transformers' continue_final_message: keep the render up to the end of the last message's
// text (its last text block when content is a list).
std::string cut_after_final_message(const std::string& rendered, const ChatRenderInput& in,
                                    const std::string& origin) {
  BRISK_CHECK(!in.add_generation_prompt, origin,
              ": continue_final_message and add_generation_prompt are mutually exclusive");
  BRISK_CHECK(!in.messages.empty() && in.messages.back().is_object(), origin,
              ": continue_final_message needs a final message");
  const auto& last = in.messages.back();
  const auto content = last.find("content");
  std::string final_text;
  bool found = false;
  if (content != last.end() && content->is_string()) {
    final_text = content->get<std::string>();
    found = true;
  } else if (content != last.end() && content->is_array()) {
    for (auto it = content->rbegin(); it != content->rend(); ++it) {
      if (it->is_object() && it->contains("text") && (*it)["text"].is_string()) {
        final_text = (*it)["text"].get<std::string>();
        found = true;
        break;
      }
    }
  }
  BRISK_CHECK(found, origin, ": continue_final_message is set but the final message has no text to continue");
  std::string stripped = jinja::pystr::strip(final_text, std::nullopt, true, true);
  std::string lstripped = jinja::pystr::strip(final_text, std::nullopt, true, false);
  size_t loc = rendered.rfind(stripped);
  BRISK_CHECK(loc != std::string::npos, origin,
              ": continue_final_message is set but the final message does not appear in the rendered chat");
  // The template kept the message's trailing spacing (or it has none): cut after all of it.
  if (rendered.compare(loc, lstripped.size(), final_text) == 0) return rendered.substr(0, loc + lstripped.size());
  return rendered.substr(0, loc + stripped.size());
}

}  // namespace

ChatRenderInput chat_render_input_from_json(const nlohmann::ordered_json& conv,
                                            const std::string& where) {
  BRISK_CHECK(conv.is_object(), where, ": the conversation must be a JSON object");
  ChatRenderInput in;
  for (auto it = conv.begin(); it != conv.end(); ++it) {
    const std::string& key = it.key();
    const auto& v = it.value();
    if (key == "messages") {
      BRISK_CHECK(v.is_array(), where, ": \"messages\" must be a list");
      in.messages = v;
    } else if (key == "tools") {
      BRISK_CHECK(v.is_array() || v.is_null(), where, ": \"tools\" must be a list or null");
      in.tools = v;
    } else if (key == "add_generation_prompt") {
      BRISK_CHECK(v.is_boolean(), where, ": \"add_generation_prompt\" must be true or false");
      in.add_generation_prompt = v.get<bool>();
    } else if (key == "bos_token" || key == "eos_token") {
      BRISK_CHECK(v.is_string(), where, ": \"", key, "\" must be a string");
      (key == "bos_token" ? in.bos_token : in.eos_token) = v.get<std::string>();
    } else if (key == "kwargs") {
      BRISK_CHECK(v.is_object(), where, ": \"kwargs\" must be an object");
      in.kwargs = v;
    } else if (key == "continue_final_message") {
      BRISK_CHECK(v.is_boolean(), where, ": \"continue_final_message\" must be true or false");
      in.continue_final_message = v.get<bool>();
    } else if (key == "variant") {
      BRISK_CHECK(v.is_string(), where, ": \"variant\" must be a string");
      in.variant = v.get<std::string>();
    } else {
      fail(where, ": unknown key \"", key, "\" (expected messages, tools, add_generation_prompt, ",
           "bos_token, eos_token, kwargs, variant, continue_final_message)");
    }
  }
  return in;
}

ChatTemplate::ChatTemplate(std::string source, std::string origin) : origin_(std::move(origin)) {
  variants_.emplace(kDefaultVariant, std::move(source));
}

ChatTemplate::ChatTemplate(std::vector<std::pair<std::string, std::string>> variants,
                           std::string origin)
    : origin_(std::move(origin)) {
  BRISK_CHECK(!variants.empty(), origin_, ": no chat template");
  for (auto& [name, src] : variants) variants_[name] = std::move(src);
}

ChatTemplate::~ChatTemplate() = default;

ChatTemplate::ChatTemplate(ChatTemplate&& o) noexcept
    : variants_(std::move(o.variants_)), origin_(std::move(o.origin_)), parsed_(std::move(o.parsed_)) {}

ChatTemplate& ChatTemplate::operator=(ChatTemplate&& o) noexcept {
  variants_ = std::move(o.variants_);
  origin_ = std::move(o.origin_);
  parsed_ = std::move(o.parsed_);
  return *this;
}

ChatTemplate ChatTemplate::from_file(const std::string& path) {
  return ChatTemplate(read_text_file(path), path);
}

ChatTemplate ChatTemplate::from_gguf(const gguf::File& file) {
  std::vector<std::pair<std::string, std::string>> variants;
  const std::string prefix = "tokenizer.chat_template";
  for (const auto& [key, value] : file.metadata()) {
    if (key.compare(0, prefix.size(), prefix) != 0) continue;
    std::string name;
    if (key.size() == prefix.size()) name = kDefaultVariant;
    else if (key[prefix.size()] == '.' && key.size() > prefix.size() + 1) name = key.substr(prefix.size() + 1);
    else continue;
    const std::string* s = value.as_string();
    BRISK_CHECK(s, file.path(), ": metadata ", key, " must be a string");
    variants.emplace_back(name, *s);
  }
  BRISK_CHECK(!variants.empty(), file.path(), ": no tokenizer.chat_template in the GGUF metadata");
  return ChatTemplate(std::move(variants), file.path());
}

ChatTemplate ChatTemplate::from_hf_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::path d(dir);
  if (fs::exists(d / "chat_template.jinja")) {
    std::string p = (d / "chat_template.jinja").string();
    return ChatTemplate(read_text_file(p), p);
  }
  for (const char* name : {"chat_template.json", "tokenizer_config.json"}) {
    fs::path p = d / name;
    if (!fs::exists(p)) continue;
    std::string text = read_text_file(p.string());
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    BRISK_CHECK(!j.is_discarded() && j.is_object(), p.string(), ": not a JSON object");
    if (!j.contains("chat_template") || j["chat_template"].is_null()) continue;
    return ChatTemplate(variants_from_json(j["chat_template"], p.string()), p.string());
  }
  fail(dir, ": no chat template (looked for chat_template.jinja, chat_template.json and "
            "tokenizer_config.json \"chat_template\")");
}

ChatTemplate ChatTemplate::from_model(const std::string& path) {
  namespace fs = std::filesystem;
  BRISK_CHECK(fs::exists(path), path, ": no such file or directory");
  if (fs::is_directory(path)) return from_hf_dir(path);
  return from_gguf(gguf::File::open(path));
}

std::vector<std::string> ChatTemplate::variant_names() const {
  std::vector<std::string> names;
  for (const auto& [name, src] : variants_) names.push_back(name);
  return names;
}

const std::string& ChatTemplate::select_variant(const ChatRenderInput& input) const {
  if (!input.variant.empty()) {
    auto it = variants_.find(input.variant);
    if (it == variants_.end()) {
      std::string known;
      for (const auto& [name, src] : variants_) known += (known.empty() ? "" : ", ") + name;
      fail(origin_, ": no chat template variant '", input.variant, "' (have: ", known, ")");
    }
    return it->first;
  }
  bool has_tools = !input.tools.is_null();
  if (has_tools && variants_.count("tool_use")) return variants_.find("tool_use")->first;
  if (variants_.count(kDefaultVariant)) return variants_.find(kDefaultVariant)->first;
  if (variants_.size() == 1) return variants_.begin()->first;
  fail(origin_, ": several chat templates and none is named 'default'; choose a variant");
}

const std::string& ChatTemplate::source(const std::string& variant) const {
  auto it = variants_.find(variant);
  BRISK_CHECK(it != variants_.end(), origin_, ": no chat template variant '", variant, "'");
  return it->second;
}

std::string ChatTemplate::render(const ChatRenderInput& input) const {
  const std::string& variant = select_variant(input);
  std::shared_ptr<const jinja::Template> tmpl;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = parsed_.find(variant);
    if (it == parsed_.end()) {
      std::string name = variants_.size() > 1 ? origin_ + "[" + variant + "]" : origin_;
      auto t = std::make_shared<const jinja::Template>(jinja::Template::parse(
          variants_.at(variant), {.trim_blocks = true, .lstrip_blocks = true, .name = name}));
      it = parsed_.emplace(variant, std::move(t)).first;
    }
    tmpl = it->second;
  }
  BRISK_CHECK(input.messages.is_array(), origin_, ": messages must be a list");
  // Globals in the order transformers passes them, converted once (no JSON copy).
  using jinja::Value;
  auto globals = std::make_shared<jinja::Dict>();
  globals->set(Value("messages"), jinja::from_json(input.messages));
  globals->set(Value("tools"), jinja::from_json(input.tools));
  globals->set(Value("documents"), Value::none());
  globals->set(Value("add_generation_prompt"), Value(input.add_generation_prompt));
  if (input.bos_token) globals->set(Value("bos_token"), Value(*input.bos_token));
  if (input.eos_token) globals->set(Value("eos_token"), Value(*input.eos_token));
  BRISK_CHECK(input.kwargs.is_object(), origin_, ": kwargs must be an object");
  for (auto it = input.kwargs.begin(); it != input.kwargs.end(); ++it)
    globals->set(Value(it.key()), jinja::from_json(it.value()));
  std::string text = tmpl->render_values(Value(std::move(globals)));
  if (input.continue_final_message) text = cut_after_final_message(text, input, origin_);
  return text;
}

}  // namespace brisk
