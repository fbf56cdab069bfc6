#include "runtime/chat_session.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace brisk {

using json = nlohmann::ordered_json;

ChatSession::ChatSession(std::shared_ptr<const Model> model, Context& ctx, ChatTemplate chat_template,
                         ChatSessionOptions options)
    : model_(std::move(model)), ctx_(ctx), template_(std::move(chat_template)), options_(std::move(options)) {
  BRISK_CHECK(model_ != nullptr, "chat session: no model");
  BRISK_CHECK(model_->tokenizer() != nullptr, "chat session: the model has no tokenizer files");
  BRISK_CHECK(options_.seq >= 0 && options_.seq < ctx_.options().n_seq_max, "chat session: sequence ",
              options_.seq, " out of range [0, ", ctx_.options().n_seq_max, ")");
  BRISK_CHECK(options_.template_kwargs.is_object(), "chat session: template kwargs must be an object");
  ctx_.seq_truncate(options_.seq, 0);
}

void ChatSession::set_messages(const json& messages, const std::string& where) {
  BRISK_CHECK(messages.is_array(), where, ": \"messages\" must be an array");
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    BRISK_CHECK(m.is_object(), where, ": message ", i, " is not an object");
    BRISK_CHECK(m.contains("role") && m["role"].is_string(), where, ": message ", i, " has no string \"role\"");
    BRISK_CHECK(m.contains("content") && m["content"].is_string(), where, ": message ", i,
                " has no string \"content\"");
  }
  messages_ = messages;
}

void ChatSession::set_system(const std::string& text) {
  const bool has = !messages_.empty() && messages_[0]["role"] == "system";
  if (text.empty()) {
    if (has) messages_.erase(messages_.begin());
  } else if (has) {
    messages_[0]["content"] = text;
  } else {
    messages_.insert(messages_.begin(), json{{"role", "system"}, {"content", text}});
  }
}

void ChatSession::clear() {
  json kept = json::array();
  if (!messages_.empty() && messages_[0]["role"] == "system") kept.push_back(messages_[0]);
  messages_ = std::move(kept);
  ctx_.seq_truncate(options_.seq, 0);
  kv_tokens_.clear();
  kv_text_.clear();
}

int32_t ChatSession::drop_oldest_turn() {
  // The new user message (last) always stays, and so does a leading system message.
  const size_t first = !messages_.empty() && messages_[0]["role"] == "system" ? 1 : 0;
  if (messages_.size() < first + 2) return 0;
  const size_t last = messages_.size() - 1;
  size_t end = first + 1;
  while (end < last && messages_[end]["role"] != "user") ++end;
  messages_.erase(messages_.begin() + std::ptrdiff_t(first), messages_.begin() + std::ptrdiff_t(end));
  return int32_t(end - first);
}

std::string ChatSession::render_prompt(const std::optional<std::string>& next_user) const {
  ChatRenderInput in;
  in.messages = messages_;
  if (next_user.has_value()) in.messages.push_back(json{{"role", "user"}, {"content", *next_user}});
  in.add_generation_prompt = true;
  in.bos_token = model_->bos_text();
  in.eos_token = model_->eos_text();
  in.kwargs = options_.template_kwargs;
  return template_.render(in);
}

ChatTurn ChatSession::reply(const std::string& user_text, const GenerateParams& params,
                            const GenerateCallbacks& callbacks) {
  const Tokenizer& tok = *model_->tokenizer();
  const int32_t seq = options_.seq;
  const int32_t n_ctx = ctx_.options().n_ctx;
  const EncodeOptions enc{.add_special = false, .parse_special = true};

  messages_.push_back(json{{"role", "user"}, {"content", user_text}});
  ChatTurn turn;
  std::vector<int32_t> tokens;  // the whole rendered conversation
  size_t keep = 0;              // of which the cache already holds the first `keep`
  // Positions left for the answer before the oldest turns are dropped.
  const int64_t room = std::max(1, std::min(params.max_tokens, n_ctx / 4));
  try {
    for (;;) {
      turn.prompt_text = render_prompt();
      const std::string& text = turn.prompt_text;
      keep = 0;
      if (!kv_tokens_.empty() && text.compare(0, kv_text_.size(), kv_text_) == 0) {
        tokens = kv_tokens_;
        const std::vector<int32_t> rest = tok.encode(std::string_view(text).substr(kv_text_.size()), enc);
        tokens.insert(tokens.end(), rest.begin(), rest.end());
        keep = kv_tokens_.size();
      } else {
        tokens = tok.encode(text, enc);
        while (keep < tokens.size() && keep < kv_tokens_.size() && tokens[keep] == kv_tokens_[keep]) ++keep;
      }
      BRISK_CHECK(!tokens.empty(), "chat: the conversation renders to no tokens");
      if (int64_t(tokens.size()) + room <= int64_t(n_ctx)) break;
      const int32_t dropped = drop_oldest_turn();
      turn.n_messages_dropped += dropped;
      if (dropped > 0) continue;
      if (int64_t(tokens.size()) < int64_t(n_ctx)) break;  // fits, with less room for the answer
      throw ChatContextFull(str_cat("chat: the new message", messages_.size() > 1 ? " and the system message take "
                                                                                    : " takes ",
                                    tokens.size(), " tokens; the context holds ", n_ctx));
    }
  } catch (...) {
    messages_.erase(messages_.end() - 1);
    throw;
  }
  // The cache may hold less than we think (another user of the context); at least one token
  // is prefilled so that its logits start the answer.
  keep = std::min({keep, size_t(std::max(0, ctx_.seq_length(seq))), tokens.size() - 1});
  // A model with recurrent state is cut back to its last snapshot at or before that point.
  keep = size_t(ctx_.seq_restorable(seq, int32_t(keep)));
  ctx_.seq_truncate(seq, int32_t(keep));
  keep = size_t(ctx_.seq_length(seq));  // fewer when sliding-window layers released that window
  kv_tokens_.assign(tokens.begin(), tokens.begin() + std::ptrdiff_t(keep));
  kv_text_.clear();  // unknown until the turn completes; the token comparison still applies

  GenerateParams gp = params;
  gp.seq = seq;
  const std::vector<int32_t> prompt(tokens.begin() + std::ptrdiff_t(keep), tokens.end());
  GenerateResult res;
  try {
    res = generate(ctx_, &tok, prompt, gp, callbacks);
  } catch (...) {
    messages_.erase(messages_.end() - 1);
    throw;
  }

  // The answer's ids (an end-of-generation id is template glue, not content).
  std::vector<int32_t> answer_ids = res.tokens;
  if (res.stop == StopReason::end_of_generation && !answer_ids.empty()) answer_ids.pop_back();
  int32_t n_fed = std::min(res.n_decoded, int32_t(answer_ids.size()));
  // An answer cut short leaves its last sampled token outside the cache: run it too, so the
  // cache covers the answer as stored and the next turn prefills only its own text.
  const bool cut = res.stop == StopReason::max_tokens || res.stop == StopReason::callback;
  if (cut && size_t(n_fed) + 1 == answer_ids.size() && ctx_.seq_length(seq) < n_ctx) {
    ctx_.decode({{.token = answer_ids.back(), .pos = ctx_.seq_length(seq), .seq = seq, .want_logits = false}});
    ++n_fed;
  }
  const std::vector<int32_t> fed(answer_ids.begin(), answer_ids.begin() + n_fed);
  kv_tokens_ = std::move(tokens);
  kv_tokens_.insert(kv_tokens_.end(), fed.begin(), fed.end());
  // The text as the conversation will hold it (bytes that are not UTF-8 become U+FFFD there
  // too), so that the next rendering starts with it; the cache keeps the ids as generated.
  kv_text_ = turn.prompt_text + decode_generated(tok, fed, params.skip_special_text);

  turn.answer =
      res.stop == StopReason::stop_string ? res.text : decode_generated(tok, answer_ids, params.skip_special_text);
  messages_.push_back(json{{"role", "assistant"}, {"content", turn.answer}});

  turn.stats = ChatTurnStats{
      .n_prompt = int32_t(kv_tokens_.size() - fed.size()),
      .n_prompt_new = res.n_prompt,
      .prompt_seconds = res.prompt_seconds,
      .n_generated = int32_t(res.tokens.size()),
      .n_decoded = res.n_decoded,
      .decode_seconds = res.decode_seconds,
      .n_ctx_used = ctx_.seq_length(seq),
      .n_ctx = n_ctx,
      .stop = res.stop,
      .spec_steps = res.spec_steps,
      .spec_drafted = res.spec_drafted,
      .spec_accepted = res.spec_accepted,
  };
  return turn;
}

}  // namespace brisk
