// A conversation with a model on one sequence of a Context, keeping the KV cache across turns.
//
// Each turn renders the whole conversation with the chat template (add_generation_prompt on)
// and compares it with what the sequence already holds:
//
//   KV:     [ rendered prompt of turn 1 | answer 1 ]
//   turn 2: [ rendered prompt of turn 1 | answer 1 | <|im_end|>\n<|im_start|>user\n...assistant\n ]
//                                                  ^ only this part is prefilled
//
// When the new text starts with the text held in the KV cache, the cached tokens are kept as
// they are and only the rest is tokenized and prefilled. Otherwise (a template that rewrites
// earlier turns, e.g. dropping their reasoning, or an edited conversation) the whole text is
// tokenized and the sequence is truncated to the longest common token prefix.
//
// When the conversation no longer fits the context (with room left for the answer), the oldest
// turns are dropped (a user message and the answers after it; the system message stays) until
// it does, and the turn says how many messages went.
//
// The assistant's answer is stored in the conversation as the text the model produced (its
// reasoning markers included: templates such as Qwen3's split them off themselves). An answer
// stopped early (max tokens, a callback returning false) is kept as far as it got, and its
// last sampled token is run through the model so the cache covers the whole answer.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/engine_api.h"
#include "runtime/generate.h"
#include "text/chat_template.h"

namespace brisk {

struct ChatSessionOptions {
  int32_t seq = 0;                                   // sequence of the context to use
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();  // e.g. enable_thinking
};

struct ChatTurnStats {
  int32_t n_prompt = 0;        // tokens of the whole rendered conversation
  int32_t n_prompt_new = 0;    // of which prefilled in this turn (the rest came from the cache)
  double prompt_seconds = 0.0;
  int32_t n_generated = 0;     // tokens sampled (an end-of-generation id included)
  int32_t n_decoded = 0;       // forward steps after the prompt (for the decode speed)
  double decode_seconds = 0.0;
  int32_t n_ctx_used = 0;      // positions the sequence holds after the turn
  int32_t n_ctx = 0;
  StopReason stop = StopReason::max_tokens;
  int32_t spec_steps = 0;      // speculative decoding: verify steps, drafted and kept tokens
  int32_t spec_drafted = 0;
  int32_t spec_accepted = 0;
};

struct ChatTurn {
  std::string answer;          // stored as the assistant message's content
  std::string prompt_text;     // the rendered conversation the answer continues
  int32_t n_messages_dropped = 0;  // oldest messages removed so that the conversation fits
  ChatTurnStats stats;
};

// The new message does not fit the context even without the earlier turns.
class ChatContextFull : public Error {
 public:
  using Error::Error;
};

class ChatSession {
 public:
  ChatSession(std::shared_ptr<const Model> model, Context& ctx, ChatTemplate chat_template,
              ChatSessionOptions options = {});

  // [{"role": ..., "content": ...}, ...]
  const nlohmann::ordered_json& messages() const { return messages_; }
  // Replaces the conversation (checked: an array of objects with string role and content).
  // The cache is kept; the next turn reuses what still matches.
  void set_messages(const nlohmann::ordered_json& messages, const std::string& where);
  // Sets the system message (first message); an empty text removes it.
  void set_system(const std::string& text);
  // Empties the conversation except the system message, and the sequence's cache.
  void clear();

  // The conversation rendered with add_generation_prompt (what the next turn continues);
  // with `next_user`, as if that user message had been added.
  std::string render_prompt(const std::optional<std::string>& next_user = std::nullopt) const;

  // Adds the user message, prefills what the cache lacks and generates the answer, which is
  // appended as the assistant message (also when stopped early). The oldest turns are dropped
  // while the conversation leaves less than min(max_tokens, n_ctx / 4) positions for the
  // answer. On an error before generation starts (ChatContextFull when the system message
  // and the new message alone do not fit) the user message is removed again and the error
  // rethrown; dropped turns stay dropped.
  ChatTurn reply(const std::string& user_text, const GenerateParams& params,
                 const GenerateCallbacks& callbacks = {});

  // Tokens the sequence holds (for tests and the server).
  const std::vector<int32_t>& cached_tokens() const { return kv_tokens_; }

 private:
  // Removes the oldest turn (a message and what follows up to the next user message), never
  // the system message nor the last message; returns how many messages went (0: none left).
  int32_t drop_oldest_turn();

  std::shared_ptr<const Model> model_;
  Context& ctx_;
  ChatTemplate template_;
  ChatSessionOptions options_;
  nlohmann::ordered_json messages_ = nlohmann::ordered_json::array();
  std::vector<int32_t> kv_tokens_;  // what the sequence holds, in order
  std::string kv_text_;             // the text those tokens stand for
};

}  // namespace brisk
