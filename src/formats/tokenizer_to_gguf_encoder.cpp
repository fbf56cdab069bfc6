#include "formats/tokenizer_to_gguf_encoder.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/base64.h"
#include "core/error.h"
#include "formats/gguf.h"
#include "formats/json_file.h"

namespace brisk {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using namespace gguf_token_type;
constexpr int64_t kMaxTokens = int64_t(1) << 24;
// brisk.tokenizer.added_token_flags bits (text/tokenizer_gguf.cpp reads them).
constexpr int32_t kAddedLstrip = 1, kAddedRstrip = 2, kAddedSingleWord = 4, kAddedNormalized = 8;
const char* const kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// The vocabulary being written: id -> text (as tokenizer.json has it), type, score.
struct Vocab {
  std::string path;  // tokenizer.json, for errors
  int64_t id_limit = kMaxTokens;  // ids below it (tokenizer_id_limit)
  std::vector<std::string> tokens{};
  std::vector<int32_t> types{};  // 0: no entry yet
  std::vector<float> scores{};
  std::map<std::string, int32_t> first_id{};  // text -> lowest id
  std::vector<int32_t> flag_ids{}, flags{};    // added tokens matched other than whole and raw

  void put(int64_t id, const std::string& text, int32_t type, float score, const std::string& field) {
    BRISK_CHECK(id >= 0 && id < id_limit, path, ": ", field, ": id ", id, " is out of range (ids below ", id_limit,
                " for this many tokens)");
    if (size_t(id) >= tokens.size()) {
      tokens.resize(size_t(id) + 1);
      types.resize(size_t(id) + 1, 0);
      scores.resize(size_t(id) + 1, 0.0f);
    }
    tokens[size_t(id)] = text;
    types[size_t(id)] = type;
    scores[size_t(id)] = score;
  }
  int64_t find(const std::string& text) const {
    auto it = first_id.find(text);
    return it == first_id.end() ? -1 : it->second;
  }
  // Pads to n_vocab (and fills gaps) with "[PADi]" entries of type UNUSED, as llama.cpp does.
  void finish(int32_t n_vocab) {
    BRISK_CHECK(n_vocab == 0 || size_t(n_vocab) >= tokens.size(), path, ": ", tokens.size(),
                " tokens do not fit the model's vocabulary of ", n_vocab);
    const size_t n = n_vocab > 0 ? size_t(n_vocab) : tokens.size();
    tokens.resize(n);
    types.resize(n, 0);
    scores.resize(n, 0.0f);
    for (size_t i = 0; i < n; ++i) {
      if (types[i] == 0) {
        tokens[i] = "[PAD" + std::to_string(i) + "]";
        types[i] = kUnused;
        scores[i] = -10000.0f;
      }
      first_id.emplace(tokens[i], int32_t(i));
    }
  }
};

bool get_flag(const json& o, const char* key, bool fallback) {
  return o.contains(key) && o[key].is_boolean() ? o[key].get<bool>() : fallback;
}

// o[key] when o is an object whose key holds a string, else `fallback` (json::value would throw
// its own exception for a value of another type).
std::string tok_json_str(const json& o, const char* key, const std::string& fallback = "") {
  return o.is_object() && o.contains(key) && o[key].is_string() ? o[key].get<std::string>() : fallback;
}

// The entries of added_tokens (0 when it is missing or not a list; put_added_tokens checks it).
int64_t added_count(const json& tj) {
  return tj.contains("added_tokens") && tj["added_tokens"].is_array() ? int64_t(tj["added_tokens"].size()) : 0;
}

// added_tokens: special ones become CONTROL, the others USER_DEFINED (llama.cpp's types).
void put_added_tokens(const json& tj, Vocab& v) {
  if (!tj.contains("added_tokens") || tj["added_tokens"].is_null()) return;
  BRISK_CHECK(tj["added_tokens"].is_array(), v.path, ": added_tokens is not an array");
  const json& list = tj["added_tokens"];
  for (size_t i = 0; i < list.size(); ++i) {
    const json& t = list[i];
    const std::string field = "added_tokens[" + std::to_string(i) + "]";
    BRISK_CHECK(t.is_object() && t.contains("id") && t["id"].is_number_integer() && t.contains("content") &&
                    t["content"].is_string(),
                v.path, ": ", field, " needs an integer \"id\" and a string \"content\"");
    const int64_t id = t["id"].get<int64_t>();
    const float score = id >= 0 && size_t(id) < v.scores.size() ? v.scores[size_t(id)] : 0.0f;
    const bool special = t.contains("special") && t["special"].is_boolean() && t["special"].get<bool>();
    v.put(id, t["content"].get<std::string>(), special ? kControl : kUserDefined, score, field);
    const int32_t flags = (get_flag(t, "lstrip", false) ? kAddedLstrip : 0) | (get_flag(t, "rstrip", false) ? kAddedRstrip : 0) |
                          (get_flag(t, "single_word", false) ? kAddedSingleWord : 0) |
                          (get_flag(t, "normalized", !special) ? kAddedNormalized : 0);
    if (flags != 0) {
      v.flag_ids.push_back(int32_t(id));
      v.flags.push_back(flags);
    }
  }
}

// brisk.tokenizer.added_token_ids / _flags: how the tokenizers library matches those added
// tokens (GGUF token types say only control or user-defined).
void write_added_flags(const Vocab& v, gguf::Writer& w) {
  if (v.flag_ids.empty()) return;
  w.set("brisk.tokenizer.added_token_ids", gguf::Value::from_i32s(v.flag_ids));
  w.set("brisk.tokenizer.added_token_flags", gguf::Value::from_i32s(v.flags));
}

// The normalizer / pre-tokenizer steps of tokenizer.json, a Sequence flattened.
std::vector<const json*> steps_of(const json& tj, const char* key, const char* list_key) {
  std::vector<const json*> out;
  if (!tj.contains(key) || tj[key].is_null()) return out;
  const json& n = tj[key];
  if (n.is_object() && tok_json_str(n, "type") == "Sequence" && n.contains(list_key) && n[list_key].is_array()) {
    for (const json& s : n[list_key]) out.push_back(&s);
  } else {
    out.push_back(&n);
  }
  return out;
}

// The special ids and the tokens the post-processor wraps a single text with. GGUF holds one
// leading (add_bos_token: cls, else bos) and one trailing (add_eos_token: sep, else eos) token.
struct Specials {
  int64_t bos = -1, eos = -1, unk = -1, sep = -1, pad = -1, cls = -1, mask = -1;
  std::vector<int64_t> prefix, suffix;
  bool has_template = false;
  bool cfg_add_bos = false, cfg_add_eos = false;
};

// Sequences nest at most this deep (real files: one level).
constexpr int kMaxPostProcessorDepth = 8;

void read_post_processor(const json& p, const Vocab& v, const std::string& where, Specials& s, int depth = 0) {
  if (!p.is_object()) return;
  const std::string type = tok_json_str(p, "type");
  if (type == "Sequence" && p.contains("processors") && p["processors"].is_array()) {
    BRISK_CHECK(depth < kMaxPostProcessorDepth, v.path, ": ", where, ": Sequences nested deeper than ",
                kMaxPostProcessorDepth);
    for (size_t i = 0; i < p["processors"].size(); ++i)
      read_post_processor(p["processors"][i], v, where + ".processors[" + std::to_string(i) + "]", s, depth + 1);
    return;
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    auto id_of = [&](const char* k) -> int64_t {
      BRISK_CHECK(p.contains(k) && p[k].is_array() && p[k].size() == 2 && p[k][1].is_number_integer(), v.path, ": ",
                  where, ".", k, " must be [token, id]");
      return p[k][1].get<int64_t>();
    };
    s.has_template = true;
    s.prefix.push_back(s.cls = id_of("cls"));
    s.suffix.push_back(s.sep = id_of("sep"));
    return;
  }
  if (type != "TemplateProcessing") return;
  BRISK_CHECK(p.contains("single") && p["single"].is_array(), v.path, ": ", where, ".single is not an array");
  s.has_template = true;
  bool after = false;
  for (const json& item : p["single"]) {
    if (item.is_object() && item.contains("Sequence")) {
      after = true;
      continue;
    }
    BRISK_CHECK(item.is_object() && item.contains("SpecialToken") && item["SpecialToken"].is_object() &&
                    item["SpecialToken"].contains("id") && item["SpecialToken"]["id"].is_string(),
                v.path, ": ", where, ".single has an entry that is neither a Sequence nor a SpecialToken");
    const std::string name = item["SpecialToken"]["id"].get<std::string>();
    std::vector<int64_t> ids;
    if (p.contains("special_tokens") && p["special_tokens"].contains(name) &&
        p["special_tokens"][name].contains("ids") && p["special_tokens"][name]["ids"].is_array()) {
      for (const json& id : p["special_tokens"][name]["ids"]) {
        BRISK_CHECK(id.is_number_integer(), v.path, ": ", where, ".special_tokens.", name, ".ids is not a list of ids");
        ids.push_back(id.get<int64_t>());
      }
    } else {
      ids.push_back(v.find(name));
      BRISK_CHECK(ids.back() >= 0, v.path, ": ", where, ": special token \"", name, "\" is not in the vocabulary");
    }
    for (int64_t id : ids) (after ? s.suffix : s.prefix).push_back(id);
  }
}

// The special ids as llama.cpp's converter finds them: tokenizer_config.json names (bos falls
// back to cls, eos to sep), config.json *_token_id, then the post-processor's tokens.
Specials read_specials(const EncoderTokenizerParams& p, const json& tj, const Vocab& v, int64_t model_unk) {
  Specials s;
  if (tj.contains("post_processor")) read_post_processor(tj["post_processor"], v, "post_processor", s);
  json cfg = json::object(), model_cfg = json::object();
  if (const fs::path c = fs::path(p.folder) / "tokenizer_config.json"; fs::exists(c)) cfg = read_json_file(c.string());
  if (const fs::path c = fs::path(p.folder) / "config.json"; fs::exists(c)) model_cfg = read_json_file(c.string());
  if (!cfg.is_object()) cfg = json::object();
  if (!model_cfg.is_object()) model_cfg = json::object();
  auto id_of = [&](const char* name, int64_t fallback) -> int64_t {
    const std::string key = std::string(name) + "_token";
    if (cfg.contains(key))
      if (const std::string text = hf_token_text(cfg[key]); !text.empty())
        if (const int64_t id = v.find(text); id >= 0) return id;
    if (model_cfg.contains(key + "_id") && model_cfg[key + "_id"].is_number_integer()) {
      const int64_t id = model_cfg[key + "_id"].get<int64_t>();
      if (id >= 0 && size_t(id) < v.tokens.size()) return id;
    }
    return fallback;
  };
  s.cls = id_of("cls", s.cls);
  s.sep = id_of("sep", s.sep);
  s.bos = id_of("bos", s.cls >= 0 ? s.cls : (s.prefix.size() == 1 ? s.prefix[0] : -1));
  s.eos = id_of("eos", s.sep >= 0 ? s.sep : (s.suffix.size() == 1 ? s.suffix[0] : -1));
  s.unk = id_of("unk", model_unk);
  s.pad = id_of("pad", -1);
  s.mask = id_of("mask", -1);
  s.cfg_add_bos = cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean() && cfg["add_bos_token"].get<bool>();
  s.cfg_add_eos = cfg.contains("add_eos_token") && cfg["add_eos_token"].is_boolean() && cfg["add_eos_token"].get<bool>();
  return s;
}

void write_specials(const Specials& s, const Vocab& v, gguf::Writer& w) {
  auto put = [&](const char* key, int64_t id) {
    if (id >= 0 && size_t(id) < v.tokens.size()) w.set(key, gguf::Value::from_u32(uint32_t(id)));
  };
  put("tokenizer.ggml.bos_token_id", s.bos);
  put("tokenizer.ggml.eos_token_id", s.eos);
  put("tokenizer.ggml.unknown_token_id", s.unk);
  put("tokenizer.ggml.seperator_token_id", s.sep);
  put("tokenizer.ggml.padding_token_id", s.pad);
  put("tokenizer.ggml.cls_token_id", s.cls);
  put("tokenizer.ggml.mask_token_id", s.mask);
  // The reader adds cls (else bos) before the text and sep (else eos) after it.
  const int64_t first = s.cls >= 0 ? s.cls : s.bos, last = s.sep >= 0 ? s.sep : s.eos;
  bool add_bos = false, add_eos = false;
  if (s.has_template) {
    BRISK_CHECK(s.prefix.size() <= 1 && s.suffix.size() <= 1, v.path, ": post_processor adds ", s.prefix.size(),
                " tokens before and ", s.suffix.size(), " after a text (GGUF holds at most one of each)");
    BRISK_CHECK(s.prefix.empty() || s.prefix[0] == first, v.path, ": post_processor's leading token ", s.prefix[0],
                " is neither the cls nor the bos token (GGUF adds one of those)");
    BRISK_CHECK(s.suffix.empty() || s.suffix[0] == last, v.path, ": post_processor's trailing token ", s.suffix[0],
                " is neither the sep nor the eos token (GGUF adds one of those)");
    add_bos = !s.prefix.empty();
    add_eos = !s.suffix.empty();
  } else {  // no template: tokenizer_config.json's flags, as the tokenizer.json loader does
    add_bos = s.cfg_add_bos && s.bos >= 0;
    add_eos = s.cfg_add_eos && s.eos >= 0;
    // The reader would add cls / sep in place of bos / eos: only when they are the same token.
    BRISK_CHECK(!add_bos || first == s.bos, v.path, ": add_bos_token with a cls token that is not the bos token");
    BRISK_CHECK(!add_eos || last == s.eos, v.path, ": add_eos_token with a sep token that is not the eos token");
  }
  w.set("tokenizer.ggml.add_bos_token", gguf::Value::from_bool(add_bos));
  w.set("tokenizer.ggml.add_eos_token", gguf::Value::from_bool(add_eos));
}

void write_type_count(const EncoderTokenizerParams& p, gguf::Writer& w) {
  const fs::path c = fs::path(p.folder) / "config.json";
  if (!fs::exists(c)) return;
  const json cfg = read_json_file(c.string());
  if (cfg.is_object() && cfg.contains("type_vocab_size") && cfg["type_vocab_size"].is_number_integer())
    w.set("tokenizer.ggml.token_type_count", gguf::Value::from_u32(uint32_t(cfg["type_vocab_size"].get<int64_t>())));
}

}  // namespace

int32_t wordpiece_to_gguf(const EncoderTokenizerParams& p, const json& tj, gguf::Writer& w) {
  Vocab v{.path = (fs::path(p.folder) / "tokenizer.json").string()};
  const json& model = tj["model"];
  BRISK_CHECK(model.contains("vocab") && model["vocab"].is_object(), v.path,
              ": model.vocab must be an object of token -> id for a WordPiece model");
  v.id_limit = tokenizer_id_limit(int64_t(model["vocab"].size()) + added_count(tj), p.n_vocab);
  const std::string prefix = model.contains("continuing_subword_prefix") && model["continuing_subword_prefix"].is_string()
                                 ? model["continuing_subword_prefix"].get<std::string>() : std::string("##");
  BRISK_CHECK(prefix == "##", v.path, ": model.continuing_subword_prefix \"", prefix,
              "\" (the GGUF bert vocabulary has \"##\" continuations only)");
  for (const auto& [text, id] : model["vocab"].items()) {
    BRISK_CHECK(id.is_number_integer(), v.path, ": model.vocab[\"", text, "\"] is not an integer id");
    v.put(id.get<int64_t>(), text, kNormal, 0.0f, "model.vocab[\"" + text + "\"]");
  }
  put_added_tokens(tj, v);
  const int32_t n_tok = int32_t(v.tokens.size());
  v.finish(p.n_vocab);

  // Normalizer: BertNormalizer (or none). Pre-tokenizer: BertPreTokenizer.
  bool lowercase = false, clean_text = false, chinese = false;
  int strip_accents = 0;  // as the reader's NormalizerStep::strip_accents: -1 follow lowercase
  const auto norm = steps_of(tj, "normalizer", "normalizers");
  BRISK_CHECK(norm.size() <= 1, v.path, ": normalizer: a Sequence has no GGUF form for WordPiece (BertNormalizer has)");
  if (!norm.empty()) {
    const json& n = *norm[0];
    BRISK_CHECK(n.is_object() && tok_json_str(n, "type") == "BertNormalizer", v.path, ": normalizer.type \"",
                n.is_object() ? tok_json_str(n, "type") : "", "\" has no GGUF form for WordPiece (BertNormalizer has)");
    lowercase = get_flag(n, "lowercase", true);
    clean_text = get_flag(n, "clean_text", true);
    chinese = get_flag(n, "handle_chinese_chars", true);
    strip_accents = n.contains("strip_accents") && n["strip_accents"].is_boolean()
                        ? (n["strip_accents"].get<bool>() ? 1 : 0) : -1;
  }
  const auto pre = steps_of(tj, "pre_tokenizer", "pretokenizers");
  BRISK_CHECK(pre.size() == 1 && pre[0]->is_object() && tok_json_str(*pre[0], "type") == "BertPreTokenizer", v.path,
              ": pre_tokenizer has no GGUF form for WordPiece (BertPreTokenizer has)");
  bool cleanup = true;
  if (tj.contains("decoder") && tj["decoder"].is_object() && tok_json_str(tj["decoder"], "type") == "WordPiece")
    cleanup = get_flag(tj["decoder"], "cleanup", true);
  int64_t max_chars = 100;
  if (model.contains("max_input_chars_per_word") && model["max_input_chars_per_word"].is_number_integer())
    max_chars = model["max_input_chars_per_word"].get<int64_t>();

  int64_t unk = -1;
  if (model.contains("unk_token") && model["unk_token"].is_string()) unk = v.find(model["unk_token"].get<std::string>());
  const Specials s = read_specials(p, tj, v, unk);

  // llama.cpp's phantom-space form: control tokens unchanged, "##x" -> "x", others "▁x".
  std::vector<std::string> tokens = v.tokens;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (v.types[i] == kControl) continue;
    if (tokens[i].compare(0, 2, "##") == 0) tokens[i].erase(0, 2);
    else tokens[i] = kSpace + tokens[i];
  }
  w.set("tokenizer.ggml.model", gguf::Value::from_string("bert"));
  w.set("tokenizer.ggml.pre", gguf::Value::from_string("default"));
  w.set("tokenizer.ggml.tokens", gguf::Value::from_strings(tokens));
  w.set("tokenizer.ggml.token_type", gguf::Value::from_i32s(v.types));
  write_type_count(p, w);
  write_specials(s, v, w);
  write_added_flags(v, w);
  // What llama.cpp always does (lowercase, accents stripped with it, clean text, CJK split,
  // cleanup on decode) is left unwritten; the rest goes under brisk.tokenizer.*.
  if (!lowercase) w.set("brisk.tokenizer.lowercase", gguf::Value::from_bool(false));
  if (strip_accents >= 0 && (strip_accents == 1) != lowercase)
    w.set("brisk.tokenizer.strip_accents", gguf::Value::from_bool(strip_accents == 1));
  if (!clean_text) w.set("brisk.tokenizer.clean_text", gguf::Value::from_bool(false));
  if (!chinese) w.set("brisk.tokenizer.handle_chinese_chars", gguf::Value::from_bool(false));
  if (!cleanup) w.set("brisk.tokenizer.decoder_cleanup", gguf::Value::from_bool(false));
  if (max_chars != 100)
    w.set("brisk.tokenizer.max_input_chars_per_word", gguf::Value::from_u32(uint32_t(std::max<int64_t>(0, max_chars))));
  return n_tok;
}

int32_t unigram_to_gguf(const EncoderTokenizerParams& p, const json& tj, gguf::Writer& w) {
  Vocab v{.path = (fs::path(p.folder) / "tokenizer.json").string()};
  const json& model = tj["model"];
  BRISK_CHECK(model.contains("vocab") && model["vocab"].is_array(), v.path,
              ": model.vocab must be a list of [piece, score] for a Unigram model");
  const json& list = model["vocab"];
  v.id_limit = tokenizer_id_limit(int64_t(list.size()) + added_count(tj), p.n_vocab);
  for (size_t i = 0; i < list.size(); ++i) {
    const json& e = list[i];
    BRISK_CHECK(e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_number(), v.path, ": model.vocab[", i,
                "] is not [piece, score]");
    const double score = e[1].get<double>();
    BRISK_CHECK(std::isfinite(score), v.path, ": model.vocab[", i, "] has a score that is not finite");
    v.put(int64_t(i), e[0].get<std::string>(), kNormal, float(score), "model.vocab[" + std::to_string(i) + "]");
  }
  BRISK_CHECK(!list.empty(), v.path, ": model.vocab is empty");
  int64_t unk = -1;
  if (model.contains("unk_id") && !model["unk_id"].is_null()) {
    BRISK_CHECK(model["unk_id"].is_number_integer() && model["unk_id"].get<int64_t>() >= 0 &&
                    model["unk_id"].get<int64_t>() < int64_t(list.size()),
                v.path, ": model.unk_id is not an id of model.vocab");
    unk = model["unk_id"].get<int64_t>();
  }
  const bool byte_fallback = get_flag(model, "byte_fallback", false);
  if (byte_fallback)
    for (size_t i = 0; i < v.tokens.size(); ++i)
      if (v.tokens[i].size() == 6 && v.tokens[i].compare(0, 3, "<0x") == 0 && v.tokens[i][5] == '>') v.types[i] = kByte;
  put_added_tokens(tj, v);
  if (unk >= 0) v.types[size_t(unk)] = kUnknown;
  const int32_t n_tok = int32_t(v.tokens.size());
  v.finish(p.n_vocab);

  // Normalizer: Precompiled and the " {2,}" -> " " rule (what SentencePiece converters write).
  std::string charsmap;
  bool collapse = false;
  for (const json* n : steps_of(tj, "normalizer", "normalizers")) {
    const std::string type = n->is_object() ? tok_json_str(*n, "type") : "";
    if (type == "Precompiled") {
      const json& blob = n->contains("precompiled_charsmap") ? (*n)["precompiled_charsmap"] : json();
      BRISK_CHECK(blob.is_null() || blob.is_string(), v.path, ": normalizer Precompiled.precompiled_charsmap is not a base64 string");
      if (blob.is_string())
        charsmap = base64_decode(blob.get<std::string>(), v.path + ": normalizer Precompiled.precompiled_charsmap");
      continue;
    }
    const bool spaces = type == "Replace" && n->contains("pattern") && (*n)["pattern"].is_object() &&
                        tok_json_str((*n)["pattern"], "Regex") == " {2,}" && tok_json_str(*n, "content") == " ";
    BRISK_CHECK(spaces, v.path, ": normalizer step \"", type,
                "\" has no GGUF form for Unigram (Precompiled and Replace \" {2,}\" -> \" \" have)");
    collapse = true;
  }
  // Pre-tokenizer: Metaspace, optionally after WhitespaceSplit.
  bool whitespace_split = false, metaspace = false, space_prefix = true, split = true;
  std::string scheme = "always";
  for (const json* q : steps_of(tj, "pre_tokenizer", "pretokenizers")) {
    const std::string type = q->is_object() ? tok_json_str(*q, "type") : "";
    if (type == "WhitespaceSplit" && !metaspace) {
      whitespace_split = true;
      continue;
    }
    BRISK_CHECK(type == "Metaspace" && !metaspace, v.path, ": pre_tokenizer step \"", type,
                "\" has no GGUF form for Unigram (Metaspace, optionally after WhitespaceSplit, has)");
    metaspace = true;
    BRISK_CHECK(tok_json_str(*q, "replacement", kSpace) == kSpace, v.path,
                ": pre_tokenizer Metaspace.replacement is not \"\xE2\x96\x81\" (the GGUF t5 vocabulary's space)");
    if (q->contains("prepend_scheme") && (*q)["prepend_scheme"].is_string()) {
      scheme = (*q)["prepend_scheme"].get<std::string>();
      BRISK_CHECK(scheme == "always" || scheme == "first" || scheme == "never", v.path,
                  ": pre_tokenizer Metaspace.prepend_scheme \"", scheme, "\" is not always, first or never");
      space_prefix = scheme != "never";
    } else {
      space_prefix = get_flag(*q, "add_prefix_space", true);
    }
    split = get_flag(*q, "split", true);
  }
  BRISK_CHECK(metaspace, v.path, ": pre_tokenizer has no Metaspace step (the GGUF t5 vocabulary needs one)");
  const Specials s = read_specials(p, tj, v, unk);

  w.set("tokenizer.ggml.model", gguf::Value::from_string("t5"));
  w.set("tokenizer.ggml.pre", gguf::Value::from_string("default"));
  w.set("tokenizer.ggml.tokens", gguf::Value::from_strings(v.tokens));
  w.set("tokenizer.ggml.scores", gguf::Value::from_f32s(v.scores));
  w.set("tokenizer.ggml.token_type", gguf::Value::from_i32s(v.types));
  w.set("tokenizer.ggml.add_space_prefix", gguf::Value::from_bool(space_prefix));
  write_type_count(p, w);
  w.set("tokenizer.ggml.remove_extra_whitespaces", gguf::Value::from_bool(collapse || whitespace_split));
  if (!charsmap.empty()) {
    gguf::Array bytes{.type = gguf::ValueType::UINT8, .items = {}};
    bytes.items.reserve(charsmap.size());
    for (char c : charsmap) bytes.items.push_back({.type = gguf::ValueType::UINT8, .data = uint64_t(uint8_t(c))});
    w.set("tokenizer.ggml.precompiled_charsmap", gguf::Value{.type = gguf::ValueType::ARRAY, .data = std::move(bytes)});
  }
  // The pre-tokenizer as the tokenizers library runs it: without WhitespaceSplit a trailing
  // space stays "▁" and a leading one stands for the prefix (llama.cpp strips both ends); its
  // Unigram also matches control pieces in text that is not parsed for special tokens.
  w.set("brisk.tokenizer.pre_tokenizer",
        gguf::Value::from_string(whitespace_split ? "whitespace_split metaspace" : "metaspace"));
  // "first": no "▁" before a text that follows an added token; split false: one piece.
  if (scheme == "first") w.set("brisk.tokenizer.prepend_scheme", gguf::Value::from_string("first"));
  if (!split) w.set("brisk.tokenizer.metaspace_split", gguf::Value::from_bool(false));
  write_specials(s, v, w);
  write_added_flags(v, w);
  return n_tok;
}

int64_t tokenizer_id_limit(int64_t n_entries, int32_t n_vocab) {
  return std::min(kMaxTokens, std::max<int64_t>(n_vocab, 2 * n_entries + 1024));
}

std::string hf_token_text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

}  // namespace brisk
