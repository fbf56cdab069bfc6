#include "runtime/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "core/error.h"

namespace brisk {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Holds back the tail of the text that could still grow into a stop string.
class StopMatcher {
 public:
  explicit StopMatcher(const std::vector<std::string>& stops) : stops_(stops) {}

  // Appends text; returns what can be emitted now. Sets *stopped when a stop string appeared
  // (the text before it is emitted, the rest dropped).
  std::string push(const std::string& text, bool* stopped) {
    pending_ += text;
    size_t cut = std::string::npos;
    for (const std::string& s : stops_) {
      if (s.empty()) continue;
      const size_t p = pending_.find(s);
      if (p != std::string::npos) cut = std::min(cut, p);
    }
    if (cut != std::string::npos) {
      *stopped = true;
      std::string out = pending_.substr(0, cut);
      pending_.clear();
      return out;
    }
    // Keep the longest suffix that is a proper prefix of some stop string.
    size_t keep = 0;
    for (const std::string& s : stops_) {
      for (size_t len = std::min(s.size() - (s.empty() ? 0 : 1), pending_.size()); len > keep; --len) {
        if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
          keep = len;
          break;
        }
      }
    }
    std::string out = pending_.substr(0, pending_.size() - keep);
    pending_.erase(0, pending_.size() - keep);
    return out;
  }

  std::string flush() {
    std::string out;
    out.swap(pending_);
    return out;
  }

 private:
  const std::vector<std::string>& stops_;
  std::string pending_;
};

}  // namespace

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
  const int32_t seq = params.seq;
  const int32_t n_ctx = ctx.options().n_ctx;
  int32_t pos = ctx.seq_length(seq);
  BRISK_CHECK(pos + int32_t(prompt.size()) <= n_ctx, "generate: prompt of ", prompt.size(),
              " tokens does not fit the context (", n_ctx - pos, " positions left)");

  for (size_t i = 0; i < prompt.size(); ++i)
    BRISK_CHECK(prompt[i] >= 0 && prompt[i] < ctx.n_vocab(), "prompt token ", i, ": id ", prompt[i],
                " out of range [0, ", ctx.n_vocab(), ")");
  GenerateResult res;
  res.n_prompt = int32_t(prompt.size());
  // Ids past the tokenizer's vocabulary (padded embedding rows) are never sampled.
  SamplerParams sampling = params.sampling;
  if (tokenizer) sampler_ban_ids_without_token(sampling, tokenizer->vocab_size(), ctx.n_vocab());
  Sampler sampler(sampling, ctx.n_vocab());
  for (int32_t t : prompt) sampler.accept(t);

  std::vector<int32_t> eog;
  if (tokenizer && params.stop_at_end_of_generation) eog = tokenizer->end_of_generation_ids();
  std::unique_ptr<StreamDecoder> stream;
  if (tokenizer) stream = std::make_unique<StreamDecoder>(*tokenizer, params.skip_special_text);
  StopMatcher matcher(params.stop_strings);

  bool stop_now = false;
  auto emit = [&](const std::string& text) {
    if (text.empty()) return;
    res.text += text;
    if (cb.on_text && !cb.on_text(text)) {
      res.stop = StopReason::callback;
      stop_now = true;
    }
  };

  // Prompt: one decode call (the context chunks it by n_batch); logits of the last token only.
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<BatchToken> batch;
  batch.reserve(prompt.size());
  for (size_t i = 0; i < prompt.size(); ++i)
    batch.push_back({.token = prompt[i], .pos = pos + int32_t(i), .seq = seq, .want_logits = i + 1 == prompt.size()});
  // A plain greedy request (no bias, no penalties) picks its tokens on the device when the
  // backend can (only the id is copied back); the prompt's logits stay on the host when a
  // callback wants them.
  const SamplerParams& sp = sampling;
  const bool plain_greedy = (sp.temperature <= 0.0f || !std::isfinite(1.0f / sp.temperature)) &&
                            sp.logit_bias.empty() &&
                            (sp.penalty_last_n == 0 || (sp.repeat_penalty == 1.0f && sp.presence_penalty == 0.0f &&
                                                        sp.frequency_penalty == 0.0f));
  // Other requests run the sampler chain on the device when it can (BRISK_NO_DEVICE_SAMPLING:
  // on the host); the host sampler still draws the uniforms and keeps the penalty history.
  struct DeviceMode {
    Context& ctx;
    bool greedy_on = false, sampler_on = false;
    bool on() const { return greedy_on || sampler_on; }
    ~DeviceMode() {
      if (greedy_on) ctx.set_device_greedy(false);
      if (sampler_on) ctx.set_device_sampler(nullptr);
    }
  } device{.ctx = ctx};
  auto device_on = [&] {
    if (plain_greedy) device.greedy_on = ctx.set_device_greedy(true);
    else device.sampler_on = ctx.set_device_sampler(&sampler);
  };
  if (!cb.on_prompt_logits) device_on();
  ctx.decode(batch);
  pos += int32_t(prompt.size());
  res.prompt_seconds = seconds_since(t0);
  if (cb.on_prompt_logits) {
    cb.on_prompt_logits(ctx.logits(0), ctx.n_vocab());
    device_on();
  }
  // The next token: the device's pick, else the sampler's (which would fail the same way on a
  // row without a finite logit).
  auto next_token = [&]() -> int32_t {
    const int32_t* ids = device.on() ? ctx.device_ids() : nullptr;
    if (!ids) return sampler.sample(ctx.logits(0));
    BRISK_CHECK(ids[0] >= 0 && ids[0] < ctx.n_vocab(),
                "sampler: every token is masked out or banned; nothing can be sampled");
    return ids[0];
  };

  const auto t1 = std::chrono::steady_clock::now();
  res.stop = StopReason::max_tokens;
  for (int32_t i = 0; i < params.max_tokens; ++i) {
    const int32_t tok = next_token();
    sampler.accept(tok);
    res.tokens.push_back(tok);
    if (std::find(eog.begin(), eog.end(), tok) != eog.end()) {
      res.stop = StopReason::end_of_generation;
      break;
    }
    if (stream && tok < tokenizer->vocab_size()) {  // an id without a token has no text
      bool hit = false;
      emit(matcher.push(stream->push(tok), &hit));
      if (hit) {
        res.stop = StopReason::stop_string;
        break;
      }
      if (stop_now) break;
    }
    if (i + 1 == params.max_tokens) break;  // no forward for a token nobody samples from
    if (pos >= n_ctx) {
      res.stop = StopReason::context_full;
      break;
    }
    ctx.decode({{.token = tok, .pos = pos, .seq = seq, .want_logits = true}});
    ++pos;
    ++res.n_decoded;
  }
  if (stream && res.stop != StopReason::stop_string && res.stop != StopReason::callback) {
    bool hit = false;
    emit(matcher.push(stream->flush(), &hit));
    if (hit) res.stop = StopReason::stop_string;
    else emit(matcher.flush());
  }
  res.decode_seconds = seconds_since(t1);
  return res;
}

}  // namespace brisk
