// What speech-to-text decoding needs to know about a model, read from its Hugging Face files
// the way transformers reads them: generation_config.json (decoder_start_token_id,
// eos_token_id, no_timestamps_token_id, lang_to_id, task_to_id, suppress_tokens,
// begin_suppress_tokens, alignment_heads, is_multilingual, max_initial_timestamp_index,
// prev_sot_token_id), config.json (its older copies of the suppress lists, max_target_positions,
// median_filter_width) and preprocessor_config.json (the log-mel front end). Keys a checkpoint
// lacks leave their feature off (-1 / empty): a model without timestamp or language tokens
// still decodes from a forced prefix of token ids.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "media/log_mel.h"

namespace brisk {

class Tokenizer;

struct SpeechLanguage {
  std::string code{}; // "en"
  std::string name{}; // "english"
  int32_t token = -1; // <|en|>
};

struct SpeechConfig {
  int32_t n_vocab = 0;
  int32_t sot = -1;               // <|startoftranscript|> (decoder_start_token_id)
  int32_t eot = -1;               // <|endoftext|> (eos_token_id)
  int32_t transcribe = -1;        // <|transcribe|>
  int32_t translate = -1;         // <|translate|>
  int32_t no_timestamps = -1;     // <|notimestamps|>
  int32_t timestamp_begin = -1;   // <|0.00|> = no_timestamps + 1; every id from it on is a time
  int32_t no_speech = -1;         // <|nospeech|> (no_timestamps - 1, as transformers takes it)
  int32_t prev_sot = -1;          // <|startofprev|>
  int32_t pad = -1;
  bool multilingual = false;
  std::vector<SpeechLanguage> languages{};  // the model's language tokens
  std::vector<int32_t> suppress{};        // never generated
  std::vector<int32_t> begin_suppress{};  // not as the first generated token
  std::vector<std::pair<int32_t, int32_t>> alignment_heads{};  // (decoder layer, head)
  // Why word timestamps are unavailable ("" when alignment_heads can be used): no alignment_heads
  // in generation_config.json, or heads outside the decoder (a distilled model with its
  // teacher's heads).
  std::string word_timestamps_unavailable{};
  int32_t max_initial_timestamp_index = -1;  // -1: no limit on the first timestamp
  int32_t median_filter_width = 7;
  int32_t n_text_ctx = 448;       // max_target_positions
  int32_t max_length = -1;        // generation_config's max_length: decoder tokens per window, prompt
                                  // included, beyond the initial tokens (-1: none, the context bounds it)
  double time_precision = 0.02;   // seconds per timestamp step
  int32_t input_stride = 2;       // mel frames per encoder position
  media::LogMelParams mel{};

  bool has_timestamps() const { return timestamp_begin >= 0 && timestamp_begin < n_vocab; }
  // The language of a code ("en"), a name ("english", "castilian") or a token ("<|en|>");
  // nullopt when the model has none such.
  std::optional<SpeechLanguage> find_language(const std::string& name) const;
};

// Fills the config from the model's files (JSON objects may be null when absent). The
// tokenizer, when given, supplies tokens the JSON files leave out (<|startofprev|>, ...).
SpeechConfig speech_config_from_hf(const nlohmann::json& config, const nlohmann::json& generation,
                                   const nlohmann::json& preprocessor, int32_t n_vocab, const Tokenizer* tokenizer);

// The languages of the <|xx|> language tokens: ISO 639 code and English name, in token order.
const std::vector<std::pair<const char*, const char*>>& speech_language_table();

}  // namespace brisk
