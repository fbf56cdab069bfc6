// Loads a Hugging Face tokenizer folder: tokenizer.json (normalizer, pre_tokenizer, model,
// post_processor, decoder, added_tokens) plus tokenizer_config.json (bos/eos tokens,
// add_bos_token / add_eos_token) and generation_config.json (eos_token_id) when present.
// Every field is checked; errors name the file and the JSON path.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/bpe.h"
#include "text/precompiled.h"
#include "text/spm.h"
#include "text/tokenizer_pipeline.h"
#include "text/unicode.h"
#include "text/wordpiece.h"

namespace brisk {

namespace {

using json = nlohmann::json;
using namespace text;

// Upper bound on ids: rejects files that would make us allocate absurd tables.
constexpr int64_t kMaxTokenId = 1 << 24;

struct Ctx {
  std::string file;
  [[noreturn]] void error(const std::string& where, const std::string& what) const {
    fail(file, ": ", where, ": ", what);
  }
};

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  BRISK_CHECK(in, "cannot open ", path);
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const json::exception& e) {
    fail(path, ": invalid JSON: ", e.what());
  }
}

const json& field(const Ctx& c, const json& obj, const char* key, const std::string& where) {
  if (!obj.is_object() || !obj.contains(key)) c.error(where, str_cat("missing field \"", key, "\""));
  return obj.at(key);
}

std::string get_string(const Ctx& c, const json& obj, const char* key, const std::string& where) {
  const json& v = field(c, obj, key, where);
  if (!v.is_string()) c.error(where + "." + key, "expected a string");
  return v.get<std::string>();
}

std::string opt_string(const json& obj, const char* key, const std::string& dflt = "") {
  if (!obj.is_object() || !obj.contains(key) || !obj.at(key).is_string()) return dflt;
  return obj.at(key).get<std::string>();
}

bool opt_bool(const json& obj, const char* key, bool dflt) {
  if (!obj.is_object() || !obj.contains(key) || !obj.at(key).is_boolean()) return dflt;
  return obj.at(key).get<bool>();
}

int32_t get_id(const Ctx& c, const json& v, const std::string& where) {
  if (!v.is_number_integer()) c.error(where, "expected an integer token id");
  const int64_t id = v.get<int64_t>();
  if (id < 0 || id >= kMaxTokenId) c.error(where, str_cat("token id ", id, " is out of range"));
  return static_cast<int32_t>(id);
}

// A pattern object: {"String": "..."} or {"Regex": "..."}.
void parse_pattern(const Ctx& c, const json& p, const std::string& where, std::string* literal,
                   std::shared_ptr<const Regex>* regex) {
  if (p.is_object() && p.contains("String") && p.at("String").is_string()) {
    *literal = p.at("String").get<std::string>();
  } else if (p.is_object() && p.contains("Regex") && p.at("Regex").is_string()) {
    try {
      *regex = std::make_shared<Regex>(p.at("Regex").get<std::string>());
    } catch (const Error& e) {
      c.error(where, e.what());
    }
  } else {
    c.error(where, "expected {\"String\": ...} or {\"Regex\": ...}");
  }
}

void parse_normalizer(const Ctx& c, const json& n, const std::string& where,
                      std::vector<NormalizerStep>& out) {
  if (n.is_null()) return;
  const std::string type = get_string(c, n, "type", where);
  using K = NormalizerStep::Kind;
  NormalizerStep st;
  if (type == "Sequence") {
    const json& list = field(c, n, "normalizers", where);
    if (!list.is_array()) c.error(where + ".normalizers", "expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      parse_normalizer(c, list[i], str_cat(where, ".normalizers[", i, "]"), out);
    return;
  }
  if (type == "NFC") st.kind = K::nfc;
  else if (type == "NFD") st.kind = K::nfd;
  else if (type == "NFKC") st.kind = K::nfkc;
  else if (type == "NFKD") st.kind = K::nfkd;
  else if (type == "Lowercase") st.kind = K::lowercase;
  else if (type == "StripAccents") st.kind = K::strip_accents;
  else if (type == "ByteLevel") st.kind = K::byte_level;
  else if (type == "Replace") {
    st.kind = K::replace;
    parse_pattern(c, field(c, n, "pattern", where), where + ".pattern", &st.pattern, &st.regex);
    st.content = get_string(c, n, "content", where);
  } else if (type == "Precompiled") {
    // A null or empty charsmap normalizes nothing (tokenizers does the same).
    const json& blob = field(c, n, "precompiled_charsmap", where);
    if (blob.is_null()) return;
    if (!blob.is_string()) c.error(where + ".precompiled_charsmap", "expected a base64 string");
    const std::string bytes = base64_decode(blob.get<std::string>(), c.file + ": " + where + ".precompiled_charsmap");
    if (bytes.empty()) return;
    st.kind = K::precompiled;
    st.charsmap = std::make_shared<PrecompiledCharsMap>(bytes, c.file + ": " + where + ".precompiled_charsmap");
  } else if (type == "Prepend") {
    st.kind = K::prepend;
    st.content = get_string(c, n, "prepend", where);
  } else if (type == "Strip") {
    st.kind = K::strip;
    st.strip_left = opt_bool(n, "strip_left", true);
    st.strip_right = opt_bool(n, "strip_right", true);
  } else if (type == "BertNormalizer") {
    st.kind = K::bert;
    st.clean_text = opt_bool(n, "clean_text", true);
    st.handle_chinese_chars = opt_bool(n, "handle_chinese_chars", true);
    st.lowercase = opt_bool(n, "lowercase", true);
    st.strip_accents = (n.contains("strip_accents") && n.at("strip_accents").is_boolean())
                           ? (n.at("strip_accents").get<bool>() ? 1 : 0)
                           : -1;
  } else {
    c.error(where, str_cat("unsupported normalizer type \"", type, "\""));
  }
  out.push_back(std::move(st));
}

SplitBehavior parse_behavior(const Ctx& c, const json& obj, const std::string& where) {
  const std::string b = opt_string(obj, "behavior", "Isolated");
  if (b == "Removed") return SplitBehavior::removed;
  if (b == "Isolated") return SplitBehavior::isolated;
  if (b == "MergedWithPrevious") return SplitBehavior::merged_with_previous;
  if (b == "MergedWithNext") return SplitBehavior::merged_with_next;
  if (b == "Contiguous") return SplitBehavior::contiguous;
  c.error(where + ".behavior", str_cat("unknown split behavior \"", b, "\""));
}

void parse_pre_tokenizer(const Ctx& c, const json& p, const std::string& where,
                         std::vector<PreTokenizerStep>& out) {
  if (p.is_null()) return;
  const std::string type = get_string(c, p, "type", where);
  using K = PreTokenizerStep::Kind;
  PreTokenizerStep st;
  if (type == "Sequence") {
    const json& list = field(c, p, "pretokenizers", where);
    if (!list.is_array()) c.error(where + ".pretokenizers", "expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      parse_pre_tokenizer(c, list[i], str_cat(where, ".pretokenizers[", i, "]"), out);
    return;
  }
  if (type == "Split") {
    st.kind = K::split;
    parse_pattern(c, field(c, p, "pattern", where), where + ".pattern", &st.literal, &st.regex);
    st.behavior = parse_behavior(c, p, where);
    st.invert = opt_bool(p, "invert", false);
  } else if (type == "ByteLevel") {
    st.kind = K::byte_level;
    st.add_prefix_space = opt_bool(p, "add_prefix_space", true);
    if (opt_bool(p, "use_regex", true)) st.regex = std::make_shared<Regex>(kGpt2Pattern);
  } else if (type == "Digits") {
    st.kind = K::digits;
    st.individual_digits = opt_bool(p, "individual_digits", false);
  } else if (type == "Metaspace") {
    st.kind = K::metaspace;
    st.replacement = opt_string(p, "replacement", "\xE2\x96\x81");
    if (st.replacement.empty()) c.error(where + ".replacement", "empty replacement");
    const std::string scheme = opt_string(p, "prepend_scheme", "");
    if (scheme == "first") st.prepend = PreTokenizerStep::Prepend::first;
    else if (scheme == "never") st.prepend = PreTokenizerStep::Prepend::never;
    else if (scheme == "always") st.prepend = PreTokenizerStep::Prepend::always;
    else st.prepend = opt_bool(p, "add_prefix_space", true) ? PreTokenizerStep::Prepend::always
                                                             : PreTokenizerStep::Prepend::never;
    st.metaspace_split = opt_bool(p, "split", true);
  } else if (type == "Whitespace") {
    st.kind = K::whitespace;
  } else if (type == "WhitespaceSplit") {
    st.kind = K::whitespace_split;
  } else if (type == "BertPreTokenizer") {
    st.kind = K::bert;
  } else if (type == "Punctuation") {
    st.kind = K::punctuation;
    st.behavior = parse_behavior(c, p, where);
  } else if (type == "CharDelimiterSplit") {
    st.kind = K::char_delimiter;
    st.literal = get_string(c, p, "delimiter", where);
  } else {
    c.error(where, str_cat("unsupported pre-tokenizer type \"", type, "\""));
  }
  out.push_back(std::move(st));
}

void parse_decoder(const Ctx& c, const json& d, const std::string& where, std::vector<DecoderStep>& out) {
  if (d.is_null()) return;
  const std::string type = get_string(c, d, "type", where);
  using K = DecoderStep::Kind;
  DecoderStep st;
  if (type == "Sequence") {
    const json& list = field(c, d, "decoders", where);
    if (!list.is_array()) c.error(where + ".decoders", "expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      parse_decoder(c, list[i], str_cat(where, ".decoders[", i, "]"), out);
    return;
  }
  if (type == "ByteLevel") st.kind = K::byte_level;
  else if (type == "ByteFallback") st.kind = K::byte_fallback;
  else if (type == "Fuse") st.kind = K::fuse;
  else if (type == "Replace") {
    st.kind = K::replace;
    std::shared_ptr<const Regex> re;
    parse_pattern(c, field(c, d, "pattern", where), where + ".pattern", &st.pattern, &re);
    if (re) c.error(where + ".pattern", "regex patterns are not supported in the Replace decoder");
    st.content = get_string(c, d, "content", where);
  } else if (type == "Strip") {
    st.kind = K::strip;
    st.content = get_string(c, d, "content", where);
    const json& s = field(c, d, "start", where);
    const json& e = field(c, d, "stop", where);
    if (!s.is_number_unsigned() || !e.is_number_unsigned() || s.get<uint64_t>() > 1024 ||
        e.get<uint64_t>() > 1024)
      c.error(where, "start/stop must be small non-negative integers");
    st.strip_start = static_cast<int>(s.get<uint64_t>());
    st.strip_stop = static_cast<int>(e.get<uint64_t>());
  } else if (type == "Metaspace") {
    st.kind = K::metaspace;
    st.content = opt_string(d, "replacement", "\xE2\x96\x81");
    const std::string scheme = opt_string(d, "prepend_scheme", "");
    st.metaspace_prepend = scheme.empty() ? opt_bool(d, "add_prefix_space", true) : scheme != "never";
  } else if (type == "WordPiece") {
    st.kind = K::wordpiece;
    st.prefix = opt_string(d, "prefix", "##");
    st.cleanup = opt_bool(d, "cleanup", true);
  } else if (type == "BPEDecoder") {
    st.kind = K::bpe_suffix;
    st.suffix = opt_string(d, "suffix", "</w>");
  } else {
    c.error(where, str_cat("unsupported decoder type \"", type, "\""));
  }
  out.push_back(std::move(st));
}

// Grows the id table so that `id` fits.
void ensure_slot(TokenizerSpec& spec, int32_t id) {
  if (static_cast<size_t>(id) >= spec.tokens.size()) {
    spec.tokens.resize(static_cast<size_t>(id) + 1);
    spec.special.resize(static_cast<size_t>(id) + 1, 0);
  }
}

void parse_model(const Ctx& c, const json& m, TokenizerSpec& spec) {
  const std::string where = "model";
  const std::string type = opt_string(m, "type", m.contains("merges") ? "BPE" : "");
  if (type == "BPE") {
    const json& vocab = field(c, m, "vocab", where);
    if (!vocab.is_object()) c.error("model.vocab", "expected an object of token -> id");
    TokenIndex index;
    index.reserve(vocab.size());
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      const int32_t id = get_id(c, it.value(), "model.vocab[\"" + it.key() + "\"]");
      ensure_slot(spec, id);
      spec.tokens[id] = it.key();
      index.emplace(it.key(), id);
    }
    const json& merges = field(c, m, "merges", where);
    if (!merges.is_array()) c.error("model.merges", "expected an array");
    std::vector<BpeMerge> list;
    list.reserve(merges.size());
    std::string joined;
    for (size_t i = 0; i < merges.size(); ++i) {
      const json& e = merges[i];
      std::string a, b;
      if (e.is_string()) {
        const std::string s = e.get<std::string>();
        const size_t sp = s.find(' ', 1);
        if (sp == std::string::npos) c.error(str_cat("model.merges[", i, "]"), "expected \"left right\"");
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
        a = e[0].get<std::string>();
        b = e[1].get<std::string>();
      } else {
        c.error(str_cat("model.merges[", i, "]"), "expected \"left right\" or [left, right]");
      }
      const int32_t ia = token_index_find(index, a), ib = token_index_find(index, b);
      joined = a + b;
      const int32_t ir = token_index_find(index, joined);
      if (ia < 0 || ib < 0 || ir < 0)
        c.error(str_cat("model.merges[", i, "]"),
                str_cat("merge \"", a, "\" + \"", b, "\" uses a token that is not in the vocab"));
      list.push_back({ia, ib, ir, static_cast<int32_t>(i)});
    }
    BpeParams params;
    params.byte_fallback = opt_bool(m, "byte_fallback", false);
    params.fuse_unk = opt_bool(m, "fuse_unk", false);
    params.ignore_merges = opt_bool(m, "ignore_merges", false);
    params.continuing_subword_prefix = opt_string(m, "continuing_subword_prefix");
    params.end_of_word_suffix = opt_string(m, "end_of_word_suffix");
    const std::string unk = opt_string(m, "unk_token");
    if (!unk.empty()) params.unk_id = token_index_find(index, unk);
    spec.model = std::make_unique<BpeModel>(std::move(index), list, std::move(params));
  } else if (type == "WordPiece") {
    const json& vocab = field(c, m, "vocab", where);
    if (!vocab.is_object()) c.error("model.vocab", "expected an object of token -> id");
    TokenIndex index;
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      const int32_t id = get_id(c, it.value(), "model.vocab[\"" + it.key() + "\"]");
      ensure_slot(spec, id);
      spec.tokens[id] = it.key();
      index.emplace(it.key(), id);
    }
    WordPieceParams params;
    params.continuing_prefix = opt_string(m, "continuing_subword_prefix", "##");
    const std::string unk = opt_string(m, "unk_token", "[UNK]");
    params.unk_id = token_index_find(index, unk);
    if (m.contains("max_input_chars_per_word") && m.at("max_input_chars_per_word").is_number_unsigned())
      params.max_input_chars_per_word = m.at("max_input_chars_per_word").get<uint64_t>();
    spec.model = std::make_unique<WordPieceModel>(std::move(index), std::move(params));
  } else if (type == "Unigram") {
    const json& vocab = field(c, m, "vocab", where);
    if (!vocab.is_array()) c.error("model.vocab", "expected an array of [piece, score]");
    std::vector<std::string> pieces;
    std::vector<float> scores;
    pieces.reserve(vocab.size());
    for (size_t i = 0; i < vocab.size(); ++i) {
      const json& e = vocab[i];
      if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number())
        c.error(str_cat("model.vocab[", i, "]"), "expected [piece, score]");
      pieces.push_back(e[0].get<std::string>());
      scores.push_back(e[1].get<float>());
    }
    if (pieces.size() >= static_cast<size_t>(kMaxTokenId)) c.error("model.vocab", "too many pieces");
    UnigramParams params;
    if (m.contains("unk_id") && !m.at("unk_id").is_null()) {
      params.unk_id = get_id(c, m.at("unk_id"), "model.unk_id");
      if (static_cast<size_t>(params.unk_id) >= pieces.size()) c.error("model.unk_id", "out of range");
    }
    params.byte_fallback = opt_bool(m, "byte_fallback", false);
    ensure_slot(spec, static_cast<int32_t>(pieces.size()) - 1);
    for (size_t i = 0; i < pieces.size(); ++i) spec.tokens[i] = pieces[i];
    spec.model = std::make_unique<UnigramModel>(pieces, scores, params);
  } else {
    c.error(where, str_cat("unsupported model type \"", type, "\""));
  }
}

// {"SpecialToken": {"id": "<bos>"}} / {"Sequence": {"id": "A"}} lists of a TemplateProcessing.
void parse_post_processor(const Ctx& c, const json& p, const std::string& where, TokenizerSpec& spec) {
  if (p.is_null()) return;
  const std::string type = get_string(c, p, "type", where);
  if (type == "Sequence") {
    const json& list = field(c, p, "processors", where);
    if (!list.is_array()) c.error(where + ".processors", "expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      parse_post_processor(c, list[i], str_cat(where, ".processors[", i, "]"), spec);
    return;
  }
  if (type == "ByteLevel") return;  // offsets only
  if (type == "TemplateProcessing") {
    const json& single = field(c, p, "single", where);
    const json& specials = p.contains("special_tokens") ? p.at("special_tokens") : json::object();
    if (!single.is_array()) c.error(where + ".single", "expected an array");
    bool after = false;
    std::vector<int32_t> prefix, suffix;
    for (size_t i = 0; i < single.size(); ++i) {
      const std::string w = str_cat(where, ".single[", i, "]");
      const json& item = single[i];
      if (item.contains("Sequence")) {
        after = true;
        continue;
      }
      if (!item.contains("SpecialToken")) c.error(w, "expected SpecialToken or Sequence");
      const std::string name = get_string(c, item.at("SpecialToken"), "id", w + ".SpecialToken");
      if (!specials.contains(name)) c.error(w, str_cat("special token \"", name, "\" is not declared"));
      const json& ids = field(c, specials.at(name), "ids", str_cat(where, ".special_tokens.", name));
      if (!ids.is_array()) c.error(str_cat(where, ".special_tokens.", name, ".ids"), "expected an array");
      for (const auto& id : ids) (after ? suffix : prefix).push_back(get_id(c, id, w));
    }
    spec.add_prefix.insert(spec.add_prefix.end(), prefix.begin(), prefix.end());
    spec.add_suffix.insert(spec.add_suffix.end(), suffix.begin(), suffix.end());
    return;
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    const json& cls = field(c, p, "cls", where);
    const json& sep = field(c, p, "sep", where);
    if (!cls.is_array() || cls.size() != 2 || !sep.is_array() || sep.size() != 2)
      c.error(where, "cls/sep must be [token, id]");
    spec.add_prefix.push_back(get_id(c, cls[1], where + ".cls"));
    spec.add_suffix.push_back(get_id(c, sep[1], where + ".sep"));
    return;
  }
  c.error(where, str_cat("unsupported post-processor type \"", type, "\""));
}

// "eos_token": "<x>" or {"content": "<x>", ...}
std::string config_token(const json& cfg, const char* key) {
  if (!cfg.is_object() || !cfg.contains(key)) return {};
  const json& v = cfg.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v.at("content").is_string())
    return v.at("content").get<std::string>();
  return {};
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_hf_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string path = (fs::path(dir) / "tokenizer.json").string();
  BRISK_CHECK(fs::exists(path), "no tokenizer.json in ", dir);
  const json root = read_json(path);
  const Ctx c{path};
  if (!root.is_object()) c.error("(root)", "expected an object");
  TokenizerSpec spec;
  parse_model(c, field(c, root, "model", "(root)"), spec);

  if (root.contains("added_tokens") && !root.at("added_tokens").is_null()) {
    const json& added = root.at("added_tokens");
    if (!added.is_array()) c.error("added_tokens", "expected an array");
    for (size_t i = 0; i < added.size(); ++i) {
      const std::string w = str_cat("added_tokens[", i, "]");
      const json& a = added[i];
      AddedToken t;
      t.id = get_id(c, field(c, a, "id", w), w + ".id");
      t.content = get_string(c, a, "content", w);
      if (t.content.empty()) c.error(w + ".content", "empty added token");
      t.special = opt_bool(a, "special", false);
      t.lstrip = opt_bool(a, "lstrip", false);
      t.rstrip = opt_bool(a, "rstrip", false);
      t.normalized = opt_bool(a, "normalized", !t.special);
      t.single_word = opt_bool(a, "single_word", false);
      ensure_slot(spec, t.id);
      if (spec.tokens[t.id].empty()) spec.tokens[t.id] = t.content;
      if (t.special) spec.special[t.id] = 1;
      spec.added.push_back(std::move(t));
    }
  }
  for (size_t id = 0; id < spec.tokens.size(); ++id)
    if (!spec.tokens[id].empty()) spec.index.emplace(spec.tokens[id], static_cast<int32_t>(id));
  for (const auto& t : spec.added) spec.index.emplace(t.content, t.id);

  if (root.contains("normalizer")) parse_normalizer(c, root.at("normalizer"), "normalizer", spec.normalizer);
  if (root.contains("pre_tokenizer"))
    parse_pre_tokenizer(c, root.at("pre_tokenizer"), "pre_tokenizer", spec.pre_tokenizer);
  if (root.contains("decoder")) parse_decoder(c, root.at("decoder"), "decoder", spec.decoder);
  if (root.contains("post_processor"))
    parse_post_processor(c, root.at("post_processor"), "post_processor", spec);
  const int32_t n = static_cast<int32_t>(spec.tokens.size());
  for (int32_t id : spec.add_prefix)
    BRISK_CHECK(id < n, path, ": post_processor token id ", id, " is out of range (vocab size ", n, ")");
  for (int32_t id : spec.add_suffix)
    BRISK_CHECK(id < n, path, ": post_processor token id ", id, " is out of range (vocab size ", n, ")");

  // tokenizer_config.json: bos/eos names, add_bos_token / add_eos_token.
  json cfg = json::object();
  const std::string cfg_path = (fs::path(dir) / "tokenizer_config.json").string();
  if (fs::exists(cfg_path)) cfg = read_json(cfg_path);
  const std::string bos = config_token(cfg, "bos_token"), eos = config_token(cfg, "eos_token");
  if (!bos.empty()) spec.bos = token_index_find(spec.index, bos);
  if (!eos.empty()) spec.eos = token_index_find(spec.index, eos);
  // Without a template in tokenizer.json, the config's add_bos/add_eos flags decide.
  if (spec.add_prefix.empty() && spec.add_suffix.empty()) {
    if (opt_bool(cfg, "add_bos_token", false) && spec.bos >= 0) spec.add_prefix.push_back(spec.bos);
    if (opt_bool(cfg, "add_eos_token", false) && spec.eos >= 0) spec.add_suffix.push_back(spec.eos);
  }

  const std::string gen_path = (fs::path(dir) / "generation_config.json").string();
  if (fs::exists(gen_path)) {
    const json gen = read_json(gen_path);
    if (gen.is_object() && gen.contains("eos_token_id")) {
      const json& e = gen.at("eos_token_id");
      const Ctx gc{gen_path};
      auto add = [&](const json& v) {
        const int32_t id = get_id(gc, v, "eos_token_id");
        if (id < n && std::find(spec.end_of_generation.begin(), spec.end_of_generation.end(), id) ==
                          spec.end_of_generation.end())
          spec.end_of_generation.push_back(id);
      };
      if (e.is_array()) {
        for (const auto& v : e) add(v);
      } else if (!e.is_null()) {
        add(e);
      }
    }
  }
  add_end_of_generation_defaults(spec);
  return make_pipeline_tokenizer(std::move(spec));
}

}  // namespace brisk
