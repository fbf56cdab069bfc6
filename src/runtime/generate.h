// The generate loop shared by `brisk generate` and chat front ends: feed a prompt (in chunks
// of the context's n_batch), then sample token by token until the end-of-generation ids of the
// tokenizer, a stop string, max_tokens or the context size. It is one request on the server's
// scheduler step (Scheduler::run_one, runtime/scheduler.h), run on the caller's thread. Text is streamed through a
// callback as it becomes complete UTF-8 (StreamDecoder); text that could be the start of a
// stop string is held back until it is known not to be one.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/engine_api.h"
#include "runtime/sampler.h"
#include "runtime/speculative.h"

namespace brisk {

struct GenerateParams {
  int32_t max_tokens = 128;
  SamplerParams sampling{};
  std::vector<std::string> stop_strings{};
  bool stop_at_end_of_generation = true;   // tokenizer->end_of_generation_ids()
  bool skip_special_text = false;          // leave special tokens out of the streamed text
  int32_t seq = 0;                          // sequence of the context to extend
  SpecOptions spec{};                       // speculative decoding (no source: off)
};

enum class StopReason { max_tokens, end_of_generation, stop_string, context_full, callback };

// After generate() the sequence holds the prompt and every generated token except the last
// one (which was sampled but not yet run); a caller continuing the conversation feeds it first.
struct GenerateResult {
  std::vector<int32_t> tokens;     // generated ids (including an end-of-generation id)
  std::string text;                // streamed text (up to a stop string, which is excluded)
  StopReason stop = StopReason::max_tokens;
  int32_t n_prompt = 0;
  double prompt_seconds = 0.0;
  int32_t n_decoded = 0;           // forward steps after the prompt
  double decode_seconds = 0.0;
  int32_t spec_steps = 0;          // speculative decoding: verify steps, drafted and kept tokens
  int32_t spec_drafted = 0;
  int32_t spec_accepted = 0;
};

struct GenerateCallbacks {
  // New text; return false to stop.
  std::function<bool(std::string_view text)> on_text{};
  // Logits [n_vocab] of the last prompt position, before sampling.
  std::function<void(const float* logits, int32_t n_vocab)> on_prompt_logits{};
};

// Runs `prompt` on sequence params.seq (appended after what the sequence holds) and generates.
// `tokenizer` may be nullptr: no text, no end-of-generation ids, no stop strings.
GenerateResult generate(Context& ctx, const Tokenizer* tokenizer, const std::vector<int32_t>& prompt,
                        const GenerateParams& params, const GenerateCallbacks& callbacks = {});

const char* stop_reason_name(StopReason r);

// The text of generated ids. An id without a token (a padded row past the tokenizer's
// vocabulary, which generate() never samples) decodes to nothing.
std::string decode_generated(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, bool skip_special = false);

}  // namespace brisk
