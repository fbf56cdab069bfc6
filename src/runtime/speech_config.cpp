#include "runtime/speech_config.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/tokenizer.h"

namespace brisk {

const std::vector<std::pair<const char*, const char*>>& speech_language_table() {
  static const std::vector<std::pair<const char*, const char*>> t = {
      {"en", "english"}, {"zh", "chinese"}, {"de", "german"}, {"es", "spanish"}, {"ru", "russian"},
      {"ko", "korean"}, {"fr", "french"}, {"ja", "japanese"}, {"pt", "portuguese"}, {"tr", "turkish"},
      {"pl", "polish"}, {"ca", "catalan"}, {"nl", "dutch"}, {"ar", "arabic"}, {"sv", "swedish"},
      {"it", "italian"}, {"id", "indonesian"}, {"hi", "hindi"}, {"fi", "finnish"}, {"vi", "vietnamese"},
      {"he", "hebrew"}, {"uk", "ukrainian"}, {"el", "greek"}, {"ms", "malay"}, {"cs", "czech"},
      {"ro", "romanian"}, {"da", "danish"}, {"hu", "hungarian"}, {"ta", "tamil"}, {"no", "norwegian"},
      {"th", "thai"}, {"ur", "urdu"}, {"hr", "croatian"}, {"bg", "bulgarian"}, {"lt", "lithuanian"},
      {"la", "latin"}, {"mi", "maori"}, {"ml", "malayalam"}, {"cy", "welsh"}, {"sk", "slovak"},
      {"te", "telugu"}, {"fa", "persian"}, {"lv", "latvian"}, {"bn", "bengali"}, {"sr", "serbian"},
      {"az", "azerbaijani"}, {"sl", "slovenian"}, {"kn", "kannada"}, {"et", "estonian"}, {"mk", "macedonian"},
      {"br", "breton"}, {"eu", "basque"}, {"is", "icelandic"}, {"hy", "armenian"}, {"ne", "nepali"},
      {"mn", "mongolian"}, {"bs", "bosnian"}, {"kk", "kazakh"}, {"sq", "albanian"}, {"sw", "swahili"},
      {"gl", "galician"}, {"mr", "marathi"}, {"pa", "punjabi"}, {"si", "sinhala"}, {"km", "khmer"},
      {"sn", "shona"}, {"yo", "yoruba"}, {"so", "somali"}, {"af", "afrikaans"}, {"oc", "occitan"},
      {"ka", "georgian"}, {"be", "belarusian"}, {"tg", "tajik"}, {"sd", "sindhi"}, {"gu", "gujarati"},
      {"am", "amharic"}, {"yi", "yiddish"}, {"lo", "lao"}, {"uz", "uzbek"}, {"fo", "faroese"},
      {"ht", "haitian creole"}, {"ps", "pashto"}, {"tk", "turkmen"}, {"nn", "nynorsk"}, {"mt", "maltese"},
      {"sa", "sanskrit"}, {"lb", "luxembourgish"}, {"my", "myanmar"}, {"bo", "tibetan"}, {"tl", "tagalog"},
      {"mg", "malagasy"}, {"as", "assamese"}, {"tt", "tatar"}, {"haw", "hawaiian"}, {"ln", "lingala"},
      {"ha", "hausa"}, {"ba", "bashkir"}, {"jw", "javanese"}, {"su", "sundanese"}, {"yue", "cantonese"},
  };
  return t;
}

namespace {

// Other names transformers accepts for a language.
const std::pair<const char*, const char*> kAliases[] = {
    {"burmese", "my"}, {"valencian", "ca"}, {"flemish", "nl"}, {"haitian", "ht"}, {"letzeburgesch", "lb"},
    {"pushto", "ps"}, {"panjabi", "pa"}, {"moldavian", "ro"}, {"moldovan", "ro"}, {"sinhalese", "si"},
    {"castilian", "es"}, {"mandarin", "zh"},
};

int32_t json_int(const nlohmann::json& j, const char* key, int32_t fallback) {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (it->is_array() && !it->empty() && it->front().is_number_integer()) return it->front().get<int32_t>();
  BRISK_CHECK(it->is_number_integer(), "speech config: '", key, "' must be an integer");
  return it->get<int32_t>();
}

std::vector<int32_t> json_ids(const nlohmann::json& j, const char* key, int32_t n_vocab, bool* present) {
  std::vector<int32_t> out;
  if (!j.is_object()) return out;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return out;
  BRISK_CHECK(it->is_array(), "speech config: '", key, "' must be a list of token ids");
  for (const auto& v : *it) {
    BRISK_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < n_vocab, "speech config: '", key,
                "' holds ", v.dump(), ", not a token id below ", n_vocab);
    out.push_back(v.get<int32_t>());
  }
  if (present) *present = true;
  return out;
}

int32_t checked_id(int32_t id, int32_t n_vocab, const char* key) {
  BRISK_CHECK(id < n_vocab, "speech config: '", key, "' is ", id, ", beyond the vocabulary of ", n_vocab);
  return id < 0 ? -1 : id;
}

}  // namespace

std::optional<SpeechLanguage> SpeechConfig::find_language(const std::string& name) const {
  std::string s = name;
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (s.size() > 4 && s.rfind("<|", 0) == 0 && s.compare(s.size() - 2, 2, "|>") == 0) s = s.substr(2, s.size() - 4);
  for (const auto& [alias, code] : kAliases)
    if (s == alias) s = code;
  for (const SpeechLanguage& l : languages)
    if (l.code == s || l.name == s) return l;
  return std::nullopt;
}

SpeechConfig speech_config_from_hf(const nlohmann::json& config, const nlohmann::json& gen, const nlohmann::json& pre,
                                   int32_t n_vocab, const Tokenizer* tok) {
  SpeechConfig c;
  c.n_vocab = n_vocab;
  auto id_of = [&](const char* key, const char* token_text) {
    int32_t v = json_int(gen, key, json_int(config, key, -1));
    if (v < 0 && tok && token_text) v = tok->token_id(token_text);
    return checked_id(v, n_vocab, key);
  };
  c.sot = id_of("decoder_start_token_id", "<|startoftranscript|>");
  c.eot = id_of("eos_token_id", "<|endoftext|>");
  c.pad = id_of("pad_token_id", nullptr);
  c.no_timestamps = id_of("no_timestamps_token_id", "<|notimestamps|>");
  c.prev_sot = id_of("prev_sot_token_id", "<|startofprev|>");
  BRISK_CHECK(c.sot >= 0 && c.eot >= 0, "speech config: the model declares no decoder_start_token_id / eos_token_id");
  if (c.no_timestamps >= 0) {
    c.timestamp_begin = c.no_timestamps + 1 < n_vocab ? c.no_timestamps + 1 : -1;
    c.no_speech = c.no_timestamps - 1;
  }
  if (gen.is_object() && gen.contains("task_to_id") && gen["task_to_id"].is_object()) {
    const auto& t = gen["task_to_id"];
    if (t.contains("transcribe")) c.transcribe = checked_id(t["transcribe"].get<int32_t>(), n_vocab, "task_to_id");
    if (t.contains("translate")) c.translate = checked_id(t["translate"].get<int32_t>(), n_vocab, "task_to_id");
  } else if (tok) {
    c.transcribe = tok->token_id("<|transcribe|>");
    c.translate = tok->token_id("<|translate|>");
  }
  const nlohmann::json* lang = gen.is_object() && gen.contains("lang_to_id") && gen["lang_to_id"].is_object()
                                   ? &gen["lang_to_id"] : nullptr;
  for (const auto& [code, name] : speech_language_table()) {
    const std::string token = std::string("<|") + code + "|>";
    int32_t id = -1;
    if (lang) {
      auto it = lang->find(token);
      if (it != lang->end()) {
        BRISK_CHECK(it->is_number_integer(), "speech config: lang_to_id['", token, "'] is not a token id");
        id = checked_id(it->get<int32_t>(), n_vocab, "lang_to_id");
      }
    } else if (tok) {
      id = tok->token_id(token);
    }
    if (id >= 0) c.languages.push_back({.code = code, .name = name, .token = id});
  }
  c.multilingual = gen.is_object() && gen.contains("is_multilingual") && gen["is_multilingual"].is_boolean()
                       ? gen["is_multilingual"].get<bool>()
                       : c.languages.size() > 1;
  bool have = false;
  c.suppress = json_ids(gen, "suppress_tokens", n_vocab, &have);
  if (!have) c.suppress = json_ids(config, "suppress_tokens", n_vocab, nullptr);
  have = false;
  c.begin_suppress = json_ids(gen, "begin_suppress_tokens", n_vocab, &have);
  if (!have) c.begin_suppress = json_ids(config, "begin_suppress_tokens", n_vocab, nullptr);
  if (gen.is_object() && gen.contains("alignment_heads") && gen["alignment_heads"].is_array()) {
    for (const auto& h : gen["alignment_heads"]) {
      BRISK_CHECK(h.is_array() && h.size() == 2 && h[0].is_number_integer() && h[1].is_number_integer(),
                  "speech config: alignment_heads entries must be [layer, head] pairs");
      c.alignment_heads.emplace_back(h[0].get<int32_t>(), h[1].get<int32_t>());
    }
  }
  const int32_t dec_layers = json_int(config, "decoder_layers", 0), dec_heads = json_int(config, "decoder_attention_heads", 0);
  if (c.alignment_heads.empty()) {
    c.word_timestamps_unavailable = "the model's generation_config.json has no alignment_heads";
  } else if (dec_layers > 0 && dec_heads > 0) {
    for (const auto& [layer, head] : c.alignment_heads)
      if (layer < 0 || layer >= dec_layers || head < 0 || head >= dec_heads) {
        c.word_timestamps_unavailable = "generation_config.json's alignment_heads name (layer " + std::to_string(layer) +
                                        ", head " + std::to_string(head) + "), outside the model's " +
                                        std::to_string(dec_layers) + " decoder layers x " + std::to_string(dec_heads) +
                                        " heads";
        break;
      }
  }
  c.max_initial_timestamp_index = json_int(gen, "max_initial_timestamp_index", -1);
  c.median_filter_width = json_int(config, "median_filter_width", 7);
  BRISK_CHECK(c.median_filter_width >= 1 && c.median_filter_width % 2 == 1 && c.median_filter_width <= 101,
              "speech config: median_filter_width must be odd, got ", c.median_filter_width);
  c.n_text_ctx = json_int(config, "max_target_positions", 448);
  c.max_length = json_int(gen, "max_length", json_int(config, "max_length", -1));
  BRISK_CHECK(c.max_length == -1 || c.max_length >= 1, "speech config: max_length must be positive, got ", c.max_length);
  // Front end: preprocessor_config.json, else the model's mel bins with the usual 16 kHz settings.
  c.mel.n_mels = json_int(pre, "feature_size", json_int(config, "num_mel_bins", 80));
  c.mel.sample_rate = json_int(pre, "sampling_rate", 16000);
  c.mel.n_fft = json_int(pre, "n_fft", 400);
  c.mel.hop = json_int(pre, "hop_length", 160);
  const int32_t chunk = json_int(pre, "chunk_length", 30);
  c.mel.n_samples = json_int(pre, "n_samples", chunk * c.mel.sample_rate);
  BRISK_CHECK(c.mel.n_samples > 0 && c.mel.n_samples <= 3600 * c.mel.sample_rate, "preprocessor config: n_samples ",
              c.mel.n_samples, " out of range");
  return c;
}

}  // namespace brisk
