// ChatSession on the tiny qwen3 fixture (greedy): the KV cache is reused across turns (only
// the new turn is prefilled) and reusing it changes nothing: a session that answers turn 2
// after turn 1 gives the same answer as a fresh session given the whole conversation.
#include <gtest/gtest.h>

#include "required_assets.h"

#include <filesystem>

#include "core/error.h"
#include "fake_engine.h"
#include "runtime/chat_session.h"

namespace brisk {
namespace {

using json = nlohmann::ordered_json;

std::string fixture_path() { return std::string(BRISK_SHARED_DATA) + "/models/qwen3/model-f32.gguf"; }

class ChatSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(fixture_path()))
      BRISK_SKIP_MISSING_ASSET() << "shared model fixture " << fixture_path() << " is missing";
    model_ = Model::load({.path = fixture_path(), .n_threads = 1});
  }
  std::unique_ptr<Context> context() const {
    return Context::create(model_, {.n_ctx = 1024, .n_seq_max = 1, .n_threads = 1});
  }
  ChatTemplate tmpl() const { return ChatTemplate(model_->chat_template()); }
  static GenerateParams params(int32_t n) {
    GenerateParams p{.max_tokens = n};
    p.sampling.temperature = 0.0f;
    return p;
  }
  std::shared_ptr<Model> model_;
};

// A conversation edited before what a windowed cache still holds (the fake context keeps only
// the last 4 positions when going back) is computed again from the start: the answer is the one
// of a fresh session given the same conversation.
TEST_F(ChatSessionTest, EditBeforeAWindowedCacheIsComputedAgain) {
  const int32_t n_vocab = model_->info().n_vocab;
  testing::FakeContext ctx({.n_ctx = 1024, .n_seq_max = 1, .n_batch = 512}, n_vocab);
  ctx.set_window(4);
  ChatSession chat(model_, ctx, tmpl());
  chat.reply("Hello there, how are you today?", params(8));
  json edited = chat.messages();
  edited[0]["content"] = "Hello there, how were you yesterday?";
  chat.set_messages(edited, "test");
  const ChatTurn again = chat.reply("And then?", params(8));
  EXPECT_EQ(again.stats.n_prompt_new, again.stats.n_prompt);
  testing::FakeContext ctx2({.n_ctx = 1024, .n_seq_max = 1, .n_batch = 512}, n_vocab);
  ChatSession fresh(model_, ctx2, tmpl());
  fresh.set_messages(edited, "test");
  EXPECT_EQ(fresh.reply("And then?", params(8)).answer, again.answer);
}

TEST_F(ChatSessionTest, SecondTurnPrefillsOnlyItsOwnTokens) {
  auto ctx = context();
  ChatSession chat(model_, *ctx, tmpl());
  const ChatTurn t1 = chat.reply("Hello there", params(12));
  EXPECT_EQ(t1.stats.n_prompt, t1.stats.n_prompt_new);
  EXPECT_EQ(ctx->seq_length(0), t1.stats.n_ctx_used);
  EXPECT_EQ(size_t(ctx->seq_length(0)), chat.cached_tokens().size());
  ASSERT_EQ(chat.messages().size(), 2u);
  EXPECT_EQ(chat.messages()[1]["content"], t1.answer);

  const ChatTurn t2 = chat.reply("And then?", params(12));
  const std::string held = t1.prompt_text + t1.answer;
  ASSERT_EQ(t2.prompt_text.compare(0, held.size(), held), 0);
  const auto glue = model_->tokenizer()->encode(t2.prompt_text.substr(held.size()),
                                                {.add_special = false, .parse_special = true});
  EXPECT_EQ(t2.stats.n_prompt_new, int32_t(glue.size()));
  EXPECT_LT(t2.stats.n_prompt_new, t2.stats.n_prompt);

  // The same conversation from scratch gives the same answer.
  auto ctx2 = context();
  ChatSession fresh(model_, *ctx2, tmpl());
  json first_turn = chat.messages();
  first_turn.erase(first_turn.end() - 2, first_turn.end());
  fresh.set_messages(first_turn, "test");
  const ChatTurn f2 = fresh.reply("And then?", params(12));
  EXPECT_EQ(f2.stats.n_prompt_new, f2.stats.n_prompt);
  EXPECT_EQ(f2.answer, t2.answer);
}

TEST_F(ChatSessionTest, ClearEmptiesCacheAndKeepsSystem) {
  auto ctx = context();
  ChatSession chat(model_, *ctx, tmpl());
  chat.set_system("Be brief.");
  chat.reply("Hi", params(4));
  chat.clear();
  EXPECT_EQ(ctx->seq_length(0), 0);
  ASSERT_EQ(chat.messages().size(), 1u);
  EXPECT_EQ(chat.messages()[0]["role"], "system");
  const ChatTurn t = chat.reply("Hi", params(4));
  EXPECT_EQ(t.stats.n_prompt, t.stats.n_prompt_new);
  chat.set_system("");
  EXPECT_EQ(chat.messages()[0]["role"], "user");
}

TEST_F(ChatSessionTest, EditedHistoryFallsBackToCommonPrefix) {
  auto ctx = context();
  ChatSession chat(model_, *ctx, tmpl());
  const ChatTurn t1 = chat.reply("Hello", params(6));
  // A system message inserted in front changes the start of the text: the sequence is cut
  // back to the tokens both renderings share (here at most the opening special token).
  chat.set_system("New rules.");
  const ChatTurn t = chat.reply("Again", params(4));
  const EncodeOptions enc{.add_special = false, .parse_special = true};
  const auto before = model_->tokenizer()->encode(t1.prompt_text, enc);
  const auto after = model_->tokenizer()->encode(t.prompt_text, enc);
  size_t common = 0;
  while (common < before.size() && common < after.size() && before[common] == after[common]) ++common;
  EXPECT_LT(common, before.size());
  EXPECT_EQ(t.stats.n_prompt, int32_t(after.size()));
  EXPECT_EQ(t.stats.n_prompt_new, int32_t(after.size() - common));
  EXPECT_EQ(ctx->seq_length(0), t.stats.n_ctx_used);
}

TEST_F(ChatSessionTest, BadInputIsRejectedAndStateKept) {
  auto ctx = context();
  ChatSession chat(model_, *ctx, tmpl());
  EXPECT_THROW(chat.set_messages(json::object(), "x"), Error);
  EXPECT_THROW(chat.set_messages(json::array({{{"role", 1}, {"content", "a"}}}), "x"), Error);
  EXPECT_THROW(chat.set_messages(json::array({{{"role", "user"}}}), "x"), Error);
  EXPECT_TRUE(chat.messages().empty());
  // A message longer than the context is refused and not kept.
  std::string huge;
  for (int i = 0; i < 3000; ++i) huge += "word ";
  EXPECT_THROW(chat.reply(huge, params(4)), Error);
  EXPECT_TRUE(chat.messages().empty());
}

// A conversation that outgrows its context keeps going: the oldest turns are dropped (the
// system message stays) and the turn says how many messages went.
TEST_F(ChatSessionTest, FullContextDropsOldestTurnsKeepingSystem) {
  auto ctx = Context::create(model_, {.n_ctx = 160, .n_seq_max = 1, .n_threads = 1});
  ChatSession chat(model_, *ctx, tmpl());
  chat.set_system("Be brief.");
  int32_t dropped = 0;
  for (int turn = 0; turn < 8; ++turn) {
    const std::string msg = "turn " + std::to_string(turn) + ": tell me about the sea and the sky and the hills";
    const ChatTurn t = chat.reply(msg, params(12));
    dropped += t.n_messages_dropped;
    ASSERT_GE(chat.messages().size(), 3u);
    EXPECT_EQ(chat.messages()[0]["role"], "system");
    EXPECT_EQ(chat.messages()[chat.messages().size() - 2]["content"], msg);
    EXPECT_LE(t.stats.n_ctx_used, 160);
    if (t.n_messages_dropped > 0) {
      EXPECT_EQ(t.n_messages_dropped % 2, 0) << "a turn is a user message and its answer";
      EXPECT_EQ(chat.messages()[1]["role"], "user");
    }
  }
  EXPECT_GT(dropped, 0) << "8 turns of about 40 tokens cannot fit 160 positions";
  // The kept conversation is what the cache holds: a fresh session on it prefills the same.
  EXPECT_LE(int32_t(chat.cached_tokens().size()), 160);
}

}  // namespace
}  // namespace brisk
