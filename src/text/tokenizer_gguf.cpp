// Builds a tokenizer from GGUF metadata (tokenizer.ggml.*), as the equivalent Hugging Face
// pipeline:
//   "gpt2"  byte-level BPE: the pre-tokenizer split regexes of `tokenizer.ggml.pre` (table
//           below), ByteLevel, merges by rank, ByteLevel decoder;
//   "llama" SentencePiece BPE: prepend "▁" (add_space_prefix), spaces -> "▁", pairs merged
//           by the score of the merged piece, <0xXX> byte fallback;
//   "bert"  WordPiece: BERT normalizer and pre-tokenizer, word-start pieces marked "▁"; decoded
//           as tokenizer.json's WordPiece decoder ("##" continuations, cleanup);
//   "t5"    SentencePiece Unigram (XLM-RoBERTa, T5): tokenizer.ggml.precompiled_charsmap
//           (the Precompiled normalizer), extra whitespace removed, "▁" prepended and for
//           spaces, Viterbi over the scores;
//   brisk.tokenizer.* keys (written by brisk's converter, formats/tokenizer_to_gguf_encoder.h)
//           carry what llama.cpp's keys cannot: BertNormalizer flags, the WordPiece decoder's
//           cleanup, the Unigram tokenizer.json's own pre-tokenizer (ends kept).
//   "gemma4" (llama.cpp's Gemma 4 vocabulary) BPE over raw UTF-8 with SentencePiece
//           conventions: spaces -> "▁" (no prefix), the text split into runs of newlines and
//           runs of anything else, a newline run that is a token taken whole, merges by rank,
//           <0xXX> byte fallback.
// Control / unknown-type tokens are special (matched only with parse_special); user-defined
// tokens are always matched in the text. Every array length and token id is checked.
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "formats/gguf.h"
#include "text/bpe.h"
#include "text/precompiled.h"
#include "text/spm.h"
#include "text/tokenizer_pipeline.h"
#include "text/unicode.h"
#include "text/wordpiece.h"

namespace brisk {

namespace {

using namespace text;

constexpr size_t kMaxTokens = 1 << 24;

// tokenizer.ggml.token_type values.
enum TokenType : int64_t {
  kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
};

const char* const kLlama3Split =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kQwen2Split =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kQwen35Split =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?"
    "[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kGpt2Words =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
const char* const kTekkenSplit =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

struct PreFamily {
  std::vector<const char*> names;
  std::vector<const char*> splits;  // applied in order, each an isolating split
  bool nfc = false;                 // the family's tokenizer.json normalizes to NFC
  bool ignore_merges = false;
};

const std::vector<PreFamily>& pre_families() {
  static const std::vector<PreFamily> families = {
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "dbrx", "smaug-bpe"}, {kLlama3Split}, false, true},
      {{"chatglm-bpe", "glm4"}, {kLlama3Split}},
      {{"qwen2", "deepseek-r1-qwen", "megrez"}, {kQwen2Split}, true},
      {{"stablelm2", "hunyuan"}, {kQwen2Split}},
      {{"qwen35"}, {kQwen35Split}, true},
      {{"gpt-2", "gpt2", "mpt", "olmo", "jais", "trillion", "phi-2"}, {kGpt2Pattern}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
       {"\\p{N}", kGpt2Words}},
      {{"falcon"}, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2Words, "[0-9][0-9][0-9]"}},
      {{"deepseek-llm"},
       {"[\r\n]",
        "\\s?[A-Za-z\xC2\xB5\xC3\x80-\xC3\x96\xC3\x98-\xC3\xB6\xC3\xB8-\xC6\xBA\xC6\xBC-\xC6\xBF"
        "\xC7\x84-\xCA\x93\xCA\x95-\xCA\xAF\xCD\xB0-\xCD\xB3\xCD\xB6\xCD\xB7\xCD\xBB-\xCD\xBD\xCD\xBF"
        "\xCE\x86\xCE\x88-\xCE\x8A\xCE\x8C\xCE\x8E-\xCE\xA1\xCE\xA3-\xCF\xB5\xCF\xB7-\xD2\x81"
        "\xD2\x8A-\xD4\xAF\xD4\xB1-\xD5\x96\xE1\x82\xA0-\xE1\x83\x85\xE1\x8E\xA0-\xE1\x8F\xB5"
        "\xE1\x8F\xB8-\xE1\x8F\xBD\xE1\xB2\x90-\xE1\xB2\xBA\xE1\xB2\xBD-\xE1\xB2\xBF"
        "\xE1\xB4\x80-\xE1\xB4\xAB\xE1\xB5\xAB-\xE1\xB5\xB7\xE1\xB5\xB9-\xE1\xB6\x9A"
        "\xE1\xB8\x80-\xE1\xBC\x95\xE1\xBC\x98-\xE1\xBC\x9D\xE1\xBC\xA0-\xE1\xBD\x85"
        "\xE1\xBD\x88-\xE1\xBD\x8D\xE1\xBD\x90-\xE1\xBD\x97\xE1\xBD\x99\xE1\xBD\x9B\xE1\xBD\x9D"
        "\xE1\xBD\x9F-\xE1\xBD\xBD\xE1\xBE\x80-\xE1\xBE\xB4\xE1\xBE\xB6-\xE1\xBE\xBC\xE1\xBE\xBE"
        "\xE1\xBF\x82-\xE1\xBF\x84\xE1\xBF\x86-\xE1\xBF\x8C\xE1\xBF\x90-\xE1\xBF\x93"
        "\xE1\xBF\x96-\xE1\xBF\x9B\xE1\xBF\xA0-\xE1\xBF\xAC\xE1\xBF\xB2-\xE1\xBF\xB4"
        "\xE1\xBF\xB6-\xE1\xBF\xBC\xE2\x84\x82\xE2\x84\x87\xE2\x84\x8A-\xE2\x84\x93\xE2\x84\x95"
        "\xE2\x84\x99-\xE2\x84\x9D\xE2\x84\xA4\xE2\x84\xA6\xE2\x84\xA8\xE2\x84\xAA-\xE2\x84\xAD"
        "\xE2\x84\xAF-\xE2\x84\xB4\xE2\x84\xB9\xE2\x84\xBC-\xE2\x84\xBF\xE2\x85\x85-\xE2\x85\x89"
        "\xE2\x85\x8E\xE2\x86\x83\xE2\x86\x84\xE2\xB0\x80-\xE2\xB1\xBB\xE2\xB1\xBE-\xE2\xB3\xA4"
        "\xE2\xB3\xAB-\xE2\xB3\xAE\xE2\xB3\xB2\xE2\xB3\xB3\xEA\x99\x80-\xEA\x99\xAD"
        "\xEA\x9A\x80-\xEA\x9A\x9B\xEA\x9C\xA2-\xEA\x9D\xAF\xEA\x9D\xB1-\xEA\x9E\x87"
        "\xEA\x9E\x8B-\xEA\x9E\x8E\xEA\xAD\xB0-\xEA\xAE\xBF\xEF\xAC\x80-\xEF\xAC\x86"
        "\xEF\xAC\x93-\xEF\xAC\x97\xEF\xBC\xA1-\xEF\xBC\xBA\xEF\xBD\x81-\xEF\xBD\x9A"
        "\xF0\x90\x90\x80-\xF0\x90\x91\x8F\xF0\x90\x92\xB0-\xF0\x90\x93\x93"
        "\xF0\x90\x93\x98-\xF0\x90\x93\xBB\xF0\x90\xB2\x80-\xF0\x90\xB2\xB2"
        "\xF0\x90\xB3\x80-\xF0\x90\xB3\xB2\xF0\x91\xA2\xA0-\xF0\x91\xA3\x9F"
        "\xF0\x9E\xA4\x80-\xF0\x9E\xA5\x83]+",
        "\\s?[!-/:-~\xEF\xBC\x81-\xEF\xBC\x8F\xEF\xBC\x9A-\xEF\xBD\x9E\xE2\x80\x98-\xE2\x80\x9F"
        "\xE3\x80\x80-\xE3\x80\x82]+",
        "\\s+$",
        "[\xE4\xB8\x80-\xE9\xBE\xA5\xE0\xA0\x80-\xE4\xB8\x80\xEA\xB0\x80-\xED\x9F\xBF]+",
        "\\p{N}+"}},
      {{"deepseek-coder"},
       {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
        "[\xE4\xB8\x80-\xE9\xBE\xA5\xE0\xA0\x80-\xE4\xB8\x80\xEA\xB0\x80-\xED\x9F\xBF]+", "\\p{N}"}},
      {{"deepseek-v3"},
       {"\\p{N}{1,3}", "[\xE4\xB8\x80-\xE9\xBE\xA5\xE3\x81\x80-\xE3\x82\x9F\xE3\x82\xA0-\xE3\x83\xBF]+",
        "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
        " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}},
      {{"tekken"}, {kTekkenSplit}},
      {{"poro-chat", "bloom", "gpt3-finnish"}, {" ?[^(\\s|.,!?\xE2\x80\xA6\xE3\x80\x82\xEF\xBC\x8C\xE3\x80\x81\xE0\xA5\xA4\xDB\x94\xD8\x8C)]+"}},
      {{"viking"}, {" ?[^(\\s|.,!?\xE2\x80\xA6\xE3\x80\x82\xEF\xBC\x8C\xE3\x80\x81\xE0\xA5\xA4\xDB\x94\xD8\x8C)]+", "\\p{N}"}},
      {{"default"}, {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2Words, "\\p{N}+", "[0-9][0-9][0-9]"}},
  };
  return families;
}

const PreFamily& find_pre_family(const std::string& pre) {
  for (const auto& f : pre_families())
    for (const char* n : f.names)
      if (pre == n) return f;
  fail("unsupported tokenizer.ggml.pre \"", pre, "\" (known: llama3, qwen2, qwen35, gpt-2, mpt, "
       "deepseek-llm, deepseek-coder, starcoder, falcon, tekken, default, ...)");
}

struct Meta {
  const gguf::File& f;
  std::string where(const char* key) const { return str_cat(f.path(), ": ", key); }
  int32_t id(const char* key, size_t n_tokens) const {
    const auto v = f.get_int(key);
    if (!v) return -1;
    BRISK_CHECK(*v >= -1 && *v < static_cast<int64_t>(n_tokens), where(key), " = ", *v,
                " is out of range (", n_tokens, " tokens)");
    return static_cast<int32_t>(*v);
  }
};

// tokenizer.ggml.merges ("left right", by rank) as merges of token ids.
std::vector<BpeMerge> merges_by_rank(const Meta& m, const TokenIndex& index) {
  const auto merges = m.f.get_string_array("tokenizer.ggml.merges");
  BRISK_CHECK(!merges.empty(), m.where("tokenizer.ggml.merges"), " is missing for a BPE vocabulary");
  std::vector<BpeMerge> list;
  list.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& s = merges[i];
    const size_t sp = s.find(' ', 1);
    BRISK_CHECK(sp != std::string::npos, m.where("tokenizer.ggml.merges"), "[", i, "] = \"", s,
                "\" is not \"left right\"");
    const std::string_view a = std::string_view(s).substr(0, sp), b = std::string_view(s).substr(sp + 1);
    const int32_t ia = token_index_find(index, a), ib = token_index_find(index, b);
    const int32_t ir = token_index_find(index, std::string(a) + std::string(b));
    BRISK_CHECK(ia >= 0 && ib >= 0 && ir >= 0, m.where("tokenizer.ggml.merges"), "[", i, "] = \"", s,
                "\" uses a token that is not in the vocabulary");
    list.push_back({ia, ib, ir, static_cast<int32_t>(i)});
  }
  return list;
}

// A GGUF bert vocabulary is llama.cpp's phantom-space form of a WordPiece vocabulary: "▁x" a
// word start, "x" a continuation, control tokens as they are (older converters also kept other
// "[...]" tokens bare). Turns spec.tokens back into tokenizer.json's texts ("x", "##x") for
// decoding and token_id(); the model keeps its own index of the phantom texts.
void wordpiece_texts_from_phantom(TokenizerSpec& spec, const std::vector<int64_t>& types) {
  const std::string space = "\xE2\x96\x81";
  for (size_t i = 0; i < spec.tokens.size(); ++i) {
    std::string& t = spec.tokens[i];
    if (t.compare(0, space.size(), space) == 0) t.erase(0, space.size());
    else if (types[i] == kControl || types[i] == kUnknown || (t.size() >= 2 && t.front() == '[' && t.back() == ']'))
      continue;
    else t = "##" + t;
  }
  spec.index.clear();
  for (size_t i = 0; i < spec.tokens.size(); ++i) spec.index.emplace(spec.tokens[i], static_cast<int32_t>(i));
  for (AddedToken& a : spec.added) a.content = spec.tokens[static_cast<size_t>(a.id)];
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& f) {
  const Meta m{f};
  const auto model = f.get_string("tokenizer.ggml.model");
  BRISK_CHECK(model, m.where("tokenizer.ggml.model"), " is missing (the file has no tokenizer)");
  TokenizerSpec spec;
  spec.tokens = f.get_string_array("tokenizer.ggml.tokens");
  const size_t n = spec.tokens.size();
  BRISK_CHECK(n > 0, m.where("tokenizer.ggml.tokens"), " is missing or empty");
  BRISK_CHECK(n < kMaxTokens, m.where("tokenizer.ggml.tokens"), " has too many entries (", n, ")");
  std::vector<int64_t> types = f.get_int_array("tokenizer.ggml.token_type");
  if (types.empty()) types.assign(n, kNormal);
  BRISK_CHECK(types.size() == n, m.where("tokenizer.ggml.token_type"), " has ", types.size(),
              " entries for ", n, " tokens");
  std::vector<float> scores = f.get_float_array("tokenizer.ggml.scores");
  BRISK_CHECK(scores.empty() || scores.size() == n, m.where("tokenizer.ggml.scores"), " has ",
              scores.size(), " entries for ", n, " tokens");

  spec.special.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    spec.index.emplace(spec.tokens[i], static_cast<int32_t>(i));
    const int64_t t = types[i];
    if (t == kControl || t == kUnknown) spec.special[i] = 1;
    if ((t == kControl || t == kUnknown || t == kUserDefined) && !spec.tokens[i].empty()) {
      AddedToken a;
      a.content = spec.tokens[i];
      a.id = static_cast<int32_t>(i);
      a.special = t != kUserDefined;
      spec.added.push_back(std::move(a));
    }
  }
  spec.bos = m.id("tokenizer.ggml.bos_token_id", n);
  spec.eos = m.id("tokenizer.ggml.eos_token_id", n);
  const int32_t unk = m.id("tokenizer.ggml.unknown_token_id", n);
  const int32_t sep = m.id("tokenizer.ggml.seperator_token_id", n);
  const int32_t cls = m.id("tokenizer.ggml.cls_token_id", n);
  const int32_t eot = m.id("tokenizer.ggml.eot_token_id", n);
  const int32_t eom = m.id("tokenizer.ggml.eom_token_id", n);

  if (*model == "gpt2") {
    const std::string pre = f.get_string("tokenizer.ggml.pre").value_or("default");
    const PreFamily& family = find_pre_family(pre);
    if (family.nfc) spec.normalizer.push_back({.kind = NormalizerStep::Kind::nfc});
    for (const char* re : family.splits) {
      PreTokenizerStep st;
      st.kind = PreTokenizerStep::Kind::split;
      st.regex = std::make_shared<Regex>(re);
      spec.pre_tokenizer.push_back(std::move(st));
    }
    spec.pre_tokenizer.push_back({.kind = PreTokenizerStep::Kind::byte_level});
    const std::vector<BpeMerge> list = merges_by_rank(m, spec.index);
    BpeParams params;
    params.ignore_merges = family.ignore_merges;
    spec.model = std::make_unique<BpeModel>(spec.index, list, params);
    spec.decoder.push_back({.kind = DecoderStep::Kind::byte_level});
    if (f.get_bool("tokenizer.ggml.add_bos_token").value_or(false) && spec.bos >= 0)
      spec.add_prefix.push_back(spec.bos);
    if (f.get_bool("tokenizer.ggml.add_eos_token").value_or(false) && spec.eos >= 0)
      spec.add_suffix.push_back(spec.eos);
  } else if (*model == "llama") {
    BRISK_CHECK(scores.size() == n, m.where("tokenizer.ggml.scores"), " is required for a SentencePiece vocabulary");
    const bool space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);
    if (space_prefix)
      spec.normalizer.push_back({.kind = NormalizerStep::Kind::prepend, .content = "\xE2\x96\x81"});
    spec.normalizer.push_back(
        {.kind = NormalizerStep::Kind::replace, .pattern = " ", .content = "\xE2\x96\x81"});
    std::vector<bool> mergeable(n);
    for (size_t i = 0; i < n; ++i) mergeable[i] = types[i] == kNormal || types[i] == kUserDefined;
    const auto merges = bpe_merges_from_scores(spec.tokens, scores, mergeable, spec.index);
    BpeParams params;
    params.byte_fallback = true;
    params.unk_id = unk >= 0 ? unk : token_index_find(spec.index, "<unk>");
    TokenIndex model_index;
    for (size_t i = 0; i < n; ++i)
      if (types[i] != kControl && types[i] != kUnused) model_index.emplace(spec.tokens[i], static_cast<int32_t>(i));
    spec.model = std::make_unique<BpeModel>(std::move(model_index), merges, params);
    spec.decoder.push_back({.kind = DecoderStep::Kind::replace, .pattern = "\xE2\x96\x81", .content = " "});
    spec.decoder.push_back({.kind = DecoderStep::Kind::byte_fallback});
    spec.decoder.push_back({.kind = DecoderStep::Kind::fuse});
    if (space_prefix)
      spec.decoder.push_back({.kind = DecoderStep::Kind::strip, .content = " ", .strip_start = 1});
    if (f.get_bool("tokenizer.ggml.add_bos_token").value_or(true) && spec.bos >= 0)
      spec.add_prefix.push_back(spec.bos);
    if (f.get_bool("tokenizer.ggml.add_eos_token").value_or(false) && spec.eos >= 0)
      spec.add_suffix.push_back(spec.eos);
  } else if (*model == "gemma4") {
    spec.normalizer.push_back(
        {.kind = NormalizerStep::Kind::replace, .pattern = " ", .content = "\xE2\x96\x81"});
    PreTokenizerStep st;
    st.kind = PreTokenizerStep::Kind::split;
    st.regex = std::make_shared<Regex>("[^\\n]+|[\\n]+");
    spec.pre_tokenizer.push_back(std::move(st));
    BpeParams params;
    params.byte_fallback = true;
    params.whole_newline_runs = true;
    params.unk_id = unk;
    spec.model = std::make_unique<BpeModel>(spec.index, merges_by_rank(m, spec.index), params);
    spec.decoder.push_back({.kind = DecoderStep::Kind::replace, .pattern = "\xE2\x96\x81", .content = " "});
    spec.decoder.push_back({.kind = DecoderStep::Kind::byte_fallback});
    spec.decoder.push_back({.kind = DecoderStep::Kind::fuse});
    // llama.cpp always adds BOS for this vocabulary.
    if (spec.bos >= 0) spec.add_prefix.push_back(spec.bos);
  } else if (*model == "bert") {
    // llama.cpp applies the default BertNormalizer; brisk's converter records other settings.
    NormalizerStep norm{.kind = NormalizerStep::Kind::bert};
    norm.lowercase = f.get_bool("brisk.tokenizer.lowercase").value_or(true);
    norm.clean_text = f.get_bool("brisk.tokenizer.clean_text").value_or(true);
    norm.handle_chinese_chars = f.get_bool("brisk.tokenizer.handle_chinese_chars").value_or(true);
    if (const auto strip = f.get_bool("brisk.tokenizer.strip_accents")) norm.strip_accents = *strip ? 1 : 0;
    spec.normalizer.push_back(std::move(norm));
    spec.pre_tokenizer.push_back({.kind = PreTokenizerStep::Kind::bert});
    WordPieceParams params;
    params.word_prefix = "\xE2\x96\x81";
    params.continuing_prefix = "";
    params.unk_id = unk >= 0 ? unk : token_index_find(spec.index, "[UNK]");
    if (const auto max_chars = f.get_int("brisk.tokenizer.max_input_chars_per_word")) {
      BRISK_CHECK(*max_chars >= 0, m.where("brisk.tokenizer.max_input_chars_per_word"), " is negative");
      params.max_input_chars_per_word = size_t(*max_chars);
    }
    spec.model = std::make_unique<WordPieceModel>(spec.index, params);
    // Decoding sees the tokens as tokenizer.json has them ("x" for a word start, "##x" for a
    // continuation) and runs its WordPiece decoder.
    wordpiece_texts_from_phantom(spec, types);
    spec.decoder.push_back({.kind = DecoderStep::Kind::wordpiece,
                            .cleanup = f.get_bool("brisk.tokenizer.decoder_cleanup").value_or(true)});
    const int32_t first = cls >= 0 ? cls : spec.bos;
    const int32_t last = sep >= 0 ? sep : spec.eos;
    if (f.get_bool("tokenizer.ggml.add_bos_token").value_or(true) && first >= 0)
      spec.add_prefix.push_back(first);
    if (f.get_bool("tokenizer.ggml.add_eos_token").value_or(true) && last >= 0)
      spec.add_suffix.push_back(last);
  } else if (*model == "t5") {
    // SentencePiece Unigram (XLM-RoBERTa: bge-m3, multilingual-e5; T5): the precompiled charsmap,
    // extra spaces removed, "▁" for spaces (and before the text with add_space_prefix),
    // Viterbi over the scores, unknown runs fused into one <unk>.
    BRISK_CHECK(scores.size() == n, m.where("tokenizer.ggml.scores"), " is required for a Unigram vocabulary");
    if (const gguf::Value* v = f.find("tokenizer.ggml.precompiled_charsmap")) {
      const std::string where = m.where("tokenizer.ggml.precompiled_charsmap");
      BRISK_CHECK(v->as_array(), where, " must be an array of bytes");
      const std::vector<int64_t> blob = f.get_int_array("tokenizer.ggml.precompiled_charsmap");
      std::string bytes(blob.size(), '\0');
      for (size_t i = 0; i < blob.size(); ++i) {
        BRISK_CHECK(blob[i] >= -128 && blob[i] <= 255, where, "[", i, "] = ", blob[i], " is not a byte");
        bytes[i] = char(uint8_t(blob[i]));
      }
      if (!bytes.empty())
        spec.normalizer.push_back({.kind = NormalizerStep::Kind::precompiled,
                                   .charsmap = std::make_shared<PrecompiledCharsMap>(bytes, where)});
    }
    const bool collapse = f.get_bool("tokenizer.ggml.remove_extra_whitespaces").value_or(true);
    const bool space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);
    const auto pre = f.get_string("brisk.tokenizer.pre_tokenizer");
    if (pre) {
      // brisk's converter: the tokenizer.json pre-tokenizer itself (a trailing space stays "▁").
      BRISK_CHECK(*pre == "metaspace" || *pre == "whitespace_split metaspace", m.where("brisk.tokenizer.pre_tokenizer"),
                  " = \"", *pre, "\" (known: \"metaspace\", \"whitespace_split metaspace\")");
      if (collapse)
        spec.normalizer.push_back(
            {.kind = NormalizerStep::Kind::replace, .regex = std::make_shared<Regex>(" {2,}"), .content = " "});
      if (*pre != "metaspace") spec.pre_tokenizer.push_back({.kind = PreTokenizerStep::Kind::whitespace_split});
      PreTokenizerStep ms{.kind = PreTokenizerStep::Kind::metaspace};
      ms.prepend = space_prefix ? PreTokenizerStep::Prepend::always : PreTokenizerStep::Prepend::never;
      const std::string scheme = f.get_string("brisk.tokenizer.prepend_scheme").value_or("always");
      BRISK_CHECK(scheme == "always" || scheme == "first", m.where("brisk.tokenizer.prepend_scheme"), " = \"",
                  scheme, "\" (known: always, first)");
      if (space_prefix && scheme == "first") ms.prepend = PreTokenizerStep::Prepend::first;
      ms.metaspace_split = f.get_bool("brisk.tokenizer.metaspace_split").value_or(true);
      spec.pre_tokenizer.push_back(std::move(ms));
    } else {  // llama.cpp: both ends stripped, runs collapsed, "▁" prepended
      if (collapse) {
        spec.normalizer.push_back({.kind = NormalizerStep::Kind::strip, .strip_left = true, .strip_right = true});
        spec.normalizer.push_back(
            {.kind = NormalizerStep::Kind::replace, .regex = std::make_shared<Regex>(" {2,}"), .content = " "});
      }
      if (space_prefix)
        spec.normalizer.push_back({.kind = NormalizerStep::Kind::prepend, .content = "\xE2\x96\x81"});
      spec.normalizer.push_back({.kind = NormalizerStep::Kind::replace, .pattern = " ", .content = "\xE2\x96\x81"});
    }
    std::vector<std::string> pieces = spec.tokens;
    // Unused pieces are never produced from text; control pieces neither in llama.cpp (the
    // tokenizers library's Unigram, which brisk's converter records, matches them).
    for (size_t i = 0; i < n; ++i)
      if (types[i] == kUnused || (types[i] == kControl && !pre)) pieces[i].clear();
    UnigramParams params;
    params.unk_id = unk >= 0 ? unk : token_index_find(spec.index, "<unk>");
    BRISK_CHECK(params.unk_id >= 0, m.where("tokenizer.ggml.unknown_token_id"),
                " is missing and the vocabulary has no <unk> (a Unigram vocabulary needs one)");
    params.byte_fallback = std::find(types.begin(), types.end(), int64_t(kByte)) != types.end();
    spec.model = std::make_unique<UnigramModel>(pieces, scores, params);
    spec.decoder.push_back(
        {.kind = DecoderStep::Kind::metaspace, .content = "\xE2\x96\x81", .metaspace_prepend = space_prefix});
    // XLM-RoBERTa adds <s> ... </s>; T5 only </s> (llama.cpp's defaults for this vocabulary).
    const int32_t first = cls >= 0 ? cls : spec.bos;
    const int32_t last = sep >= 0 ? sep : spec.eos;
    if (f.get_bool("tokenizer.ggml.add_bos_token").value_or(false) && first >= 0) spec.add_prefix.push_back(first);
    if (f.get_bool("tokenizer.ggml.add_eos_token").value_or(true) && last >= 0) spec.add_suffix.push_back(last);
  } else {
    fail(m.where("tokenizer.ggml.model"), " = \"", *model,
         "\" is not supported (supported: gpt2, llama, bert, gemma4, t5)");
  }

  // brisk's converter: how tokenizer.json matches these added tokens (bits: 1 lstrip, 2 rstrip,
  // 4 single_word, 8 normalized).
  const auto flag_ids = f.get_int_array("brisk.tokenizer.added_token_ids");
  const auto flags = f.get_int_array("brisk.tokenizer.added_token_flags");
  BRISK_CHECK(flag_ids.size() == flags.size(), m.where("brisk.tokenizer.added_token_flags"), " has ", flags.size(),
              " entries for ", flag_ids.size(), " ids");
  for (size_t i = 0; i < flag_ids.size(); ++i) {
    auto it = std::find_if(spec.added.begin(), spec.added.end(),
                           [&](const AddedToken& a) { return a.id == flag_ids[i]; });
    BRISK_CHECK(it != spec.added.end(), m.where("brisk.tokenizer.added_token_ids"), "[", i, "] = ", flag_ids[i],
                " is not a control or user-defined token");
    it->lstrip = (flags[i] & 1) != 0;
    it->rstrip = (flags[i] & 2) != 0;
    it->single_word = (flags[i] & 4) != 0;
    it->normalized = (flags[i] & 8) != 0;
  }

  add_end_of_generation_defaults(spec);
  for (int32_t id : {eot, eom})
    if (id >= 0 && std::find(spec.end_of_generation.begin(), spec.end_of_generation.end(), id) ==
                       spec.end_of_generation.end())
      spec.end_of_generation.push_back(id);
  return make_pipeline_tokenizer(std::move(spec));
}

}  // namespace brisk
