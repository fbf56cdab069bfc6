#include "formats/tokenizer_to_gguf.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/json_file.h"
#include "formats/tokenizer_to_gguf_encoder.h"

namespace brisk {
namespace {

using namespace gguf_token_type;

// The chat template(s) of a Hugging Face folder as GGUF keys, in transformers' order of
// precedence: chat_template.jinja, then chat_template.json, then tokenizer_config.json. A
// list of {name, template} gives tokenizer.chat_template ("default") and
// tokenizer.chat_template.NAME for the others, as llama.cpp's converter writes them.
void chat_template_to_gguf(const std::filesystem::path& folder, gguf::Writer& w) {
  namespace fs = std::filesystem;
  if (fs::exists(folder / "chat_template.jinja")) {
    const std::string path = (folder / "chat_template.jinja").string();
    std::ifstream in(path, std::ios::binary);
    BRISK_CHECK(in.good(), "cannot read ", path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    w.set("tokenizer.chat_template", gguf::Value::from_string(text));
    return;
  }
  for (const char* name : {"chat_template.json", "tokenizer_config.json"}) {
    const fs::path path = folder / name;
    if (!fs::exists(path)) continue;
    const nlohmann::json cfg = read_json_file(path.string());
    if (!cfg.is_object() || !cfg.contains("chat_template") || cfg["chat_template"].is_null()) continue;
    const nlohmann::json& t = cfg["chat_template"];
    if (t.is_string()) {
      w.set("tokenizer.chat_template", gguf::Value::from_string(t.get<std::string>()));
      return;
    }
    BRISK_CHECK(t.is_array(), path.string(), ": \"chat_template\" is neither a string nor a list");
    for (const auto& v : t) {
      BRISK_CHECK(v.is_object() && v.contains("name") && v["name"].is_string() && v.contains("template") &&
                      v["template"].is_string(),
                  path.string(), ": \"chat_template\" entries must be {\"name\": ..., \"template\": ...}");
      const std::string variant = v["name"].get<std::string>();
      w.set(variant == "default" ? std::string("tokenizer.chat_template") : "tokenizer.chat_template." + variant,
            gguf::Value::from_string(v["template"].get<std::string>()));
    }
    return;
  }
}

// Every split pattern of a pre_tokenizer (a Sequence nests them; nesting past 8 levels, which
// no real file has, is not searched).
void split_patterns(const nlohmann::json& p, std::vector<std::string>& out, int depth = 0) {
  if (!p.is_object() || depth > 8) return;
  if (auto it = p.find("pattern"); it != p.end() && it->is_object())
    if (auto re = it->find("Regex"); re != it->end() && re->is_string()) out.push_back(re->get<std::string>());
  if (auto it = p.find("pretokenizers"); it != p.end() && it->is_array())
    for (const auto& q : *it) split_patterns(q, out, depth + 1);
}

}  // namespace

std::string tokenizer_pre_of(const nlohmann::json& tj) {
  std::vector<std::string> patterns;
  if (tj.is_object() && tj.contains("pre_tokenizer")) split_patterns(tj["pre_tokenizer"], patterns);
  for (const std::string& p : patterns) {
    if (p.find("\\p{N}{1,3}") != std::string::npos) return "llama-bpe";
    // Qwen3.5's split keeps combining marks with letters; Qwen2's does not.
    if (p.find("\\p{L}\\p{M}") != std::string::npos) return "qwen35";
  }
  return "qwen2";
}

std::string tokenizer_json_model_type(const std::string& folder) {
  const std::string tj_path = (std::filesystem::path(folder) / "tokenizer.json").string();
  const nlohmann::json tj = read_json_file(tj_path);
  BRISK_CHECK(tj.is_object() && tj.contains("model") && tj["model"].is_object(), tj_path, ": no \"model\" object");
  const auto& model = tj["model"];
  BRISK_CHECK(model.contains("type") && model["type"].is_string(), tj_path, ": model.type is missing or not a string");
  return model["type"].get<std::string>();
}

int32_t tokenizer_to_gguf(const TokenizerToGgufParams& p, gguf::Writer& w) {
  namespace fs = std::filesystem;
  const std::string tj_path = (fs::path(p.folder) / "tokenizer.json").string();
  BRISK_CHECK(p.n_vocab >= 0 && p.n_vocab <= (1 << 24), tj_path, ": the model's vocabulary of ", p.n_vocab,
              " tokens is out of range (0 to 2^24)");
  const nlohmann::json tj = read_json_file(tj_path);
  BRISK_CHECK(tj.is_object() && tj.contains("model") && tj["model"].is_object(), tj_path, ": no \"model\" object");
  const auto& model = tj["model"];
  const std::string type = model.contains("type") && model["type"].is_string() ? model["type"].get<std::string>() : "";
  if (type == "WordPiece") return wordpiece_to_gguf({.folder = p.folder, .n_vocab = p.n_vocab}, tj, w);
  if (type == "Unigram") return unigram_to_gguf({.folder = p.folder, .n_vocab = p.n_vocab}, tj, w);
  BRISK_CHECK(type == "BPE", tj_path, ": model.type \"", type,
              "\" has no GGUF form (BPE, WordPiece and Unigram have: gpt2 / gemma4, bert, t5)");
  BRISK_CHECK(model.contains("vocab") && model["vocab"].is_object(), tj_path, ": model.vocab is not an object");

  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  const int64_t n_added = tj.contains("added_tokens") && tj["added_tokens"].is_array() ? int64_t(tj["added_tokens"].size()) : 0;
  const int64_t id_limit = tokenizer_id_limit(int64_t(model["vocab"].size()) + n_added, p.n_vocab);
  auto put = [&](int64_t id, const std::string& text, int32_t type, const char* what) {
    BRISK_CHECK(id >= 0 && id < id_limit, tj_path, ": ", what, " id ", id, " out of range (ids below ", id_limit,
                " for this many tokens)");
    if (size_t(id) >= tokens.size()) {
      tokens.resize(size_t(id) + 1);
      types.resize(size_t(id) + 1, 0);
    }
    tokens[size_t(id)] = text;
    types[size_t(id)] = type;
  };
  for (const auto& [text, id] : model["vocab"].items()) {
    BRISK_CHECK(id.is_number_integer(), tj_path, ": vocab entry '", text, "' has no integer id");
    put(id.get<int64_t>(), text, kNormal, "vocab");
  }
  if (tj.contains("added_tokens") && tj["added_tokens"].is_array())
    for (const auto& t : tj["added_tokens"]) {
      BRISK_CHECK(t.is_object() && t.contains("id") && t["id"].is_number_integer() && t.contains("content") &&
                      t["content"].is_string(),
                  tj_path, ": malformed added_tokens entry");
      put(t["id"].get<int64_t>(), t["content"].get<std::string>(), t.contains("special") && t["special"].is_boolean() && t["special"].get<bool>() ? kControl : kUserDefined,
          "added token");
    }
  const int32_t n_tok = int32_t(tokens.size());
  BRISK_CHECK(p.n_vocab == 0 || p.n_vocab >= n_tok, tj_path, ": ", n_tok, " tokens do not fit a vocabulary of ",
              p.n_vocab);
  const size_t n = size_t(p.n_vocab > 0 ? p.n_vocab : n_tok);
  tokens.resize(n);
  types.resize(n, 0);
  for (size_t i = 0; i < n; ++i)
    if (types[i] == 0) {
      tokens[i] = "[PAD" + std::to_string(i) + "]";
      types[i] = kUnused;
    }

  std::vector<std::string> merges;
  if (model.contains("merges") && model["merges"].is_array())
    for (const auto& m : model["merges"]) {
      if (m.is_string()) merges.push_back(m.get<std::string>());
      else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
        merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
      else fail(tj_path, ": malformed merge entry");
    }

  BRISK_CHECK(p.model == "gpt2" || p.model == "gemma4", "tokenizer_to_gguf: unknown model '", p.model, "'");
  if (p.model == "gemma4")
    for (size_t i = 0; i < tokens.size(); ++i)
      if (types[i] == kNormal && tokens[i].size() == 6 && tokens[i].compare(0, 3, "<0x") == 0 && tokens[i][5] == '>')
        types[i] = kByte;
  w.set("tokenizer.ggml.model", gguf::Value::from_string(p.model));
  if (p.model == "gpt2")
    w.set("tokenizer.ggml.pre", gguf::Value::from_string(p.pre.empty() ? tokenizer_pre_of(tj) : p.pre));
  w.set("tokenizer.ggml.tokens", gguf::Value::from_strings(tokens));
  w.set("tokenizer.ggml.token_type", gguf::Value::from_i32s(types));
  w.set("tokenizer.ggml.merges", gguf::Value::from_strings(merges));

  const fs::path cfg_path = fs::path(p.folder) / "tokenizer_config.json";
  if (fs::exists(cfg_path)) {
    const nlohmann::json cfg = read_json_file(cfg_path.string());
    auto id_of = [&](const char* key) -> int64_t {
      if (!cfg.contains(key)) return -1;
      const std::string text = hf_token_text(cfg[key]);
      for (size_t i = 0; i < tokens.size() && !text.empty(); ++i)
        if (tokens[i] == text) return int64_t(i);
      return -1;
    };
    if (const int64_t bos = id_of("bos_token"); bos >= 0) w.set("tokenizer.ggml.bos_token_id", gguf::Value::from_u32(uint32_t(bos)));
    if (const int64_t eos = id_of("eos_token"); eos >= 0) w.set("tokenizer.ggml.eos_token_id", gguf::Value::from_u32(uint32_t(eos)));
    if (const int64_t pad = id_of("pad_token"); pad >= 0) w.set("tokenizer.ggml.padding_token_id", gguf::Value::from_u32(uint32_t(pad)));
    if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean())
      w.set("tokenizer.ggml.add_bos_token", gguf::Value::from_bool(cfg["add_bos_token"].get<bool>()));
  }
  chat_template_to_gguf(p.folder, w);
  return n_tok;
}

}  // namespace brisk
