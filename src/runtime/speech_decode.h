// Decoding one window of speech: the decoder runs on a sequence that holds the window's
// encoder output (Context::encode) from a prompt of special tokens, under the logit rules of
// transformers' speech seq2seq generation, applied in its order:
//   1. begin_suppress_tokens are banned as the first generated token;
//   2. suppress_tokens are always banned;
//   3. timestamp rules (with timestamps on): <|notimestamps|> banned; timestamps come in pairs
//      (after one timestamp that follows text, no text; after two, no timestamp); timestamps
//      never decrease (and do not repeat after a pair); the first token is a timestamp no later
//      than max_initial_timestamp_index; when the timestamps together are likelier than the
//      likeliest text token, only a timestamp may follow;
//   then temperature and top-k for sampling.
// Greedy and sampling decode one sequence; beam search keeps num_beams running sequences and
// num_beams finished ones as transformers' beam search does (2 * num_beams candidates per step,
// scores summed log-probabilities of the processed distributions, finished scores divided by the
// generated length, the early-stop heuristic of early_stopping = False).
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "runtime/engine_api.h"
#include "runtime/speech_config.h"

namespace brisk {

struct SpeechRules {
  const SpeechConfig* cfg = nullptr;
  bool timestamps = false;        // the timestamp rules
  bool suppress = true;           // suppress_tokens / begin_suppress_tokens
};

// Applies the rules to one row of scores (logits, or log-probabilities in beam search) given
// the tokens generated so far in this window (after the prompt).
void speech_rules_apply(const SpeechRules& r, float* scores, const std::vector<int32_t>& generated);

// How many tokens a window may generate after a prompt of prompt_len tokens: max_new_tokens
// when given (> 0), else transformers' rule for generation_config's max_length (raised by the
// initial tokens, capped at max_target_positions), else the rest of the decoder context; at
// least 1, never past n_ctx.
int32_t speech_max_new_tokens(const SpeechConfig& cfg, int32_t prompt_len, int32_t max_new_tokens, int32_t n_ctx);

struct WindowDecodeOptions {
  std::vector<int32_t> prompt{};  // decoder input (previous text, start-of-transcript, language, task, ...)
  int32_t sot_index = -1;         // position of the start-of-transcript token: its logits give the
                                  // no-speech probability (-1: none)
  SpeechRules rules{};
  bool apply_rules = true;        // false: plain logits (a forced prefix for checking)
  float temperature = 0.0f;       // 0: greedy or beam search
  int32_t beam_size = 1;
  int32_t top_k = 50;             // sampling only; 0: all tokens
  int32_t max_new_tokens = 0;     // stop after this many; 0: speech_max_new_tokens' rule
  std::mt19937_64* rng = nullptr; // sampling
  bool stop_at_eot = true;
  std::vector<float>* prompt_logits = nullptr;  // when set: the logits at the prompt's last position
};

struct WindowDecodeResult {
  std::vector<int32_t> tokens{};  // generated after the prompt (end-of-text included when produced)
  double sum_logprob = 0.0;       // of the processed distributions (temperature undone), end-of-text included
  double avg_logprob = 0.0;       // sum_logprob / generated tokens (end-of-text included), or the beam score
  float no_speech_prob = 0.0f;
};

// Sequences [0, beam_size * 2) of ctx are used; sequence 0 must hold the window's encoder
// output (the others receive it by seq_copy).
WindowDecodeResult speech_decode_window(Context& ctx, const SpeechConfig& cfg, const WindowDecodeOptions& o);

}  // namespace brisk
