#include "runtime/generate.h"

#include <algorithm>
#include <exception>
#include <memory>

#include "core/error.h"
#include "runtime/engine_sampler.h"
#include "runtime/scheduler.h"
#include "runtime/stop_strings.h"

namespace brisk {

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::max_tokens: return "max_tokens";
    case StopReason::end_of_generation: return "end_of_generation";
    case StopReason::stop_string: return "stop_string";
    case StopReason::context_full: return "context_full";
    case StopReason::callback: return "callback";
  }
  return "?";
}

std::string decode_generated(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, bool skip_special) {
  std::vector<int32_t> known;
  known.reserve(ids.size());
  for (int32_t id : ids)
    if (id < tokenizer.vocab_size()) known.push_back(id);
  return tokenizer.decode(known, skip_special);
}

GenerateResult generate(Context& ctx, const Tokenizer* tokenizer, const std::vector<int32_t>& prompt,
                        const GenerateParams& params, const GenerateCallbacks& cb) {
  BRISK_CHECK(!prompt.empty(), "generate: empty prompt");
  BRISK_CHECK(params.max_tokens >= 0, "generate: negative max_tokens");
  const int32_t n_ctx = ctx.options().n_ctx;
  const int32_t pos = ctx.seq_length(params.seq);
  BRISK_CHECK(pos + int32_t(prompt.size()) <= n_ctx, "generate: prompt of ", prompt.size(),
              " tokens does not fit the context (", n_ctx - pos, " positions left)");
  for (size_t i = 0; i < prompt.size(); ++i)
    BRISK_CHECK(prompt[i] >= 0 && prompt[i] < ctx.n_vocab(), "prompt token ", i, ": id ", prompt[i],
                " out of range [0, ", ctx.n_vocab(), ")");
  GenerateResult res;
  res.n_prompt = int32_t(prompt.size());
  res.stop = StopReason::max_tokens;
  // Ids past the tokenizer's vocabulary (padded embedding rows) are never sampled.
  SamplerParams sampling = params.sampling;
  if (tokenizer) sampler_ban_ids_without_token(sampling, tokenizer->vocab_size(), ctx.n_vocab());

  std::vector<int32_t> eog;
  if (tokenizer && params.stop_at_end_of_generation) eog = tokenizer->end_of_generation_ids();
  std::unique_ptr<StreamDecoder> stream;
  if (tokenizer) stream = std::make_unique<StreamDecoder>(*tokenizer, params.skip_special_text);
  StopMatcher matcher(params.stop_strings);
  std::exception_ptr failure;  // a callback's exception, rethrown as it was
  bool stop_now = false;
  auto emit = [&](const std::string& text) {
    if (text.empty()) return;
    res.text += text;
    if (cb.on_text && !cb.on_text(text)) {
      res.stop = StopReason::callback;
      stop_now = true;
    }
  };

  // One request on the scheduler's step, on the caller's sequence; the prompt is fed in
  // chunks of n_batch, as one decode() of it would be.
  GenerationRequest req;
  req.prompt = prompt;
  req.max_tokens = params.max_tokens;
  req.sampling = sampling;
  if (cb.on_prompt_logits) {
    req.on_prompt_logits = [&](const float* logits, int32_t n_vocab) {
      try {
        cb.on_prompt_logits(logits, n_vocab);
      } catch (...) {
        failure = std::current_exception();
        throw;
      }
    };
  }
  req.on_token = [&](const TokenEvent& ev) -> bool {
    try {
      const int32_t tok = ev.token;
      res.tokens.push_back(tok);
      if (std::find(eog.begin(), eog.end(), tok) != eog.end()) {
        res.stop = StopReason::end_of_generation;
        return false;
      }
      if (stream && tok < tokenizer->vocab_size()) {  // an id without a token has no text
        emit(matcher.push(stream->push(tok)));
        if (matcher.matched()) {
          res.stop = StopReason::stop_string;
          return false;
        }
        if (stop_now) return false;
      }
      return true;
    } catch (...) {
      failure = std::current_exception();
      return false;
    }
  };
  // The sampler's penalty history starts with the prompt.
  SamplerFactory sampler_factory = [&prompt](const SamplerParams& p, int32_t n_vocab) {
    std::unique_ptr<TokenSampler> s = engine_sampler_factory()(p, n_vocab);
    for (int32_t t : prompt) s->accept(t);
    return s;
  };
  const GenerationResult r = Scheduler::run_one(ctx, params.seq, std::move(req), std::move(sampler_factory),
                                                ctx.options().n_batch, params.spec);
  if (failure) std::rethrow_exception(failure);
  if (r.reason == FinishReason::error) throw Error(r.error);
  if (r.reason == FinishReason::length && int32_t(res.tokens.size()) < params.max_tokens)
    res.stop = StopReason::context_full;
  if (stream && res.stop != StopReason::stop_string && res.stop != StopReason::callback) {
    emit(matcher.push(stream->flush()));
    if (matcher.matched()) res.stop = StopReason::stop_string;
    else emit(matcher.flush());
  }
  res.prompt_seconds = r.prefill_ms / 1000.0;
  res.decode_seconds = r.decode_ms / 1000.0;
  res.n_decoded = std::max(0, int32_t(res.tokens.size()) - 1);  // the last token sampled is not run
  res.spec_steps = r.spec_steps;
  res.spec_drafted = r.spec_drafted;
  res.spec_accepted = r.spec_accepted;
  return res;
}

}  // namespace brisk
