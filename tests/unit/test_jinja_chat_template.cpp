// ChatTemplate: loading from a Hugging Face folder (chat_template.jinja, tokenizer_config.json
// string or named list) and from GGUF metadata (default and named variants), transformers'
// variant choice, and the globals a chat template sees.
#include <gtest/gtest.h>

#include "required_assets.h"

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "formats/gguf.h"
#include "text/chat_template.h"

namespace brisk {
namespace {

namespace fs = std::filesystem;

class TemplateTempDir {
 public:
  TemplateTempDir() {
    path_ = fs::temp_directory_path() / ("brisk_chat_template_" + std::to_string(::getpid()) + "_" +
                                         std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TemplateTempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name, std::ios::binary) << text;
  }

 private:
  fs::path path_;
  static inline int counter_ = 0;
};

ChatRenderInput one_user_message() {
  ChatRenderInput in;
  in.messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  return in;
}

TEST(ChatTemplate, GlobalsAreThoseTransformersPasses) {
  ChatTemplate t(
      "{{ bos_token }}|{{ eos_token is defined }}|{{ tools is none }}|{{ documents is none }}|"
      "{{ add_generation_prompt }}|{{ enable_thinking }}|{% for m in messages %}{{ m.role }}:{{ m.content }}{% endfor %}|"
      "{{ strftime_now('%Y')|length }}");
  ChatRenderInput in = one_user_message();
  in.bos_token = "<s>";
  in.add_generation_prompt = true;
  in.kwargs = {{"enable_thinking", false}};
  EXPECT_EQ(t.render(in), "<s>|False|True|True|True|False|user:hi|4");
}

TEST(ChatTemplate, TrimAndLstripBlocksAreOn) {
  ChatTemplate t("{% for m in messages %}\n  {% if true %}\n[{{ m.content }}]\n  {% endif %}\n{% endfor %}\n");
  EXPECT_EQ(t.render(one_user_message()), "[hi]\n");
}

TEST(ChatTemplate, RaiseExceptionFailsWithTheMessage) {
  ChatTemplate t("{{ raise_exception('no system role') }}", "gemma.jinja");
  try {
    t.render(one_user_message());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "gemma.jinja:1:19: no system role");
  }
}

TEST(ChatTemplate, FromHfDirPrefersChatTemplateJinja) {
  TemplateTempDir dir;
  dir.write("tokenizer_config.json", R"({"chat_template": "from config"})");
  EXPECT_EQ(ChatTemplate::from_hf_dir(dir.path().string()).render(one_user_message()), "from config");
  dir.write("chat_template.jinja", "from jinja file\n");
  EXPECT_EQ(ChatTemplate::from_hf_dir(dir.path().string()).render(one_user_message()), "from jinja file");
}

TEST(ChatTemplate, NamedVariantsFollowTransformersChoice) {
  TemplateTempDir dir;
  dir.write("tokenizer_config.json",
            R"({"chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"},
                                  {"name": "rag", "template": "R"}]})");
  ChatTemplate t = ChatTemplate::from_model(dir.path().string());
  EXPECT_EQ(t.variant_names(), (std::vector<std::string>{"default", "rag", "tool_use"}));
  ChatRenderInput in = one_user_message();
  EXPECT_EQ(t.render(in), "D");
  in.tools = nlohmann::ordered_json::array();
  EXPECT_EQ(t.render(in), "T");  // tools given (even empty) -> tool_use
  in.variant = "rag";
  EXPECT_EQ(t.render(in), "R");
  in.variant = "nope";
  EXPECT_THROW(t.render(in), Error);
}

TEST(ChatTemplate, BadConfigsAreErrors) {
  TemplateTempDir dir;
  EXPECT_THROW(ChatTemplate::from_hf_dir(dir.path().string()), Error);
  dir.write("tokenizer_config.json", R"({"chat_template": [{"name": 3}]})");
  EXPECT_THROW(ChatTemplate::from_hf_dir(dir.path().string()), Error);
  dir.write("tokenizer_config.json", R"({"chat_template": )");
  EXPECT_THROW(ChatTemplate::from_hf_dir(dir.path().string()), Error);
  EXPECT_THROW(ChatTemplate("{% if %}").render(one_user_message()), Error);
}

TEST(ChatTemplate, FromGgufReadsDefaultAndNamedTemplates) {
  TemplateTempDir dir;
  std::string path = (dir.path() / "t.gguf").string();
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::from_string("llama"));
  w.set("tokenizer.chat_template", gguf::Value::from_string("default:{{ messages[0].content }}"));
  w.set("tokenizer.chat_template.tool_use", gguf::Value::from_string("tools:{{ tools|length }}"));
  w.write(path);
  ChatTemplate t = ChatTemplate::from_model(path);
  EXPECT_EQ(t.variant_names(), (std::vector<std::string>{"default", "tool_use"}));
  ChatRenderInput in = one_user_message();
  EXPECT_EQ(t.render(in), "default:hi");
  in.tools = nlohmann::ordered_json::parse(R"([{"type": "function"}])");
  EXPECT_EQ(t.render(in), "tools:1");
}

TEST(ChatTemplate, GgufWithoutTemplateIsAnError) {
  TemplateTempDir dir;
  std::string path = (dir.path() / "t.gguf").string();
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::from_string("llama"));
  w.write(path);
  EXPECT_THROW(ChatTemplate::from_model(path), Error);
}

TEST(ChatTemplate, ConversationFileFormat) {
  auto conv = nlohmann::ordered_json::parse(
      R"({"messages": [{"role": "user", "content": "x"}], "tools": [], "add_generation_prompt": true,
          "bos_token": "<s>", "eos_token": "</s>", "kwargs": {"enable_thinking": true}})");
  ChatRenderInput in = chat_render_input_from_json(conv, "conv.json");
  EXPECT_TRUE(in.add_generation_prompt);
  EXPECT_EQ(in.bos_token.value_or(""), "<s>");
  EXPECT_TRUE(in.tools.is_array());
  EXPECT_EQ(in.kwargs["enable_thinking"], true);
  EXPECT_THROW(chat_render_input_from_json(nlohmann::ordered_json::parse(R"({"messages": {}})"), "c"), Error);
  EXPECT_THROW(chat_render_input_from_json(nlohmann::ordered_json::parse(R"({"mesages": []})"), "c"), Error);
}

TEST(ChatTemplate, SharedModelTemplatesFromHfAndGgufAgree) {
  fs::path model = fs::path(BRISK_SHARED_DATA) / "models" / "qwen3";
  if (!fs::exists(model / "hf" / "chat_template.jinja") || !fs::exists(model / "model-f32.gguf"))
    BRISK_SKIP_MISSING_ASSET() << "shared model data not found under " << model;
  ChatTemplate hf = ChatTemplate::from_model((model / "hf").string());
  ChatTemplate gg = ChatTemplate::from_model((model / "model-f32.gguf").string());
  ChatRenderInput in = one_user_message();
  in.add_generation_prompt = true;
  EXPECT_EQ(hf.render(in), gg.render(in));
  EXPECT_NE(hf.render(in).find("hi"), std::string::npos);
}

}  // namespace
}  // namespace brisk
