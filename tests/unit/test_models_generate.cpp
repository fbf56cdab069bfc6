// The generate loop on a real tiny checkpoint: greedy equals the reference continuation,
// streamed text equals the whole-sequence decode, stop strings / end-of-generation ids /
// max tokens / callback stop, and seeded sampling is reproducible.
#include <gtest/gtest.h>

#include "required_assets.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/json_file.h"
#include "runtime/engine_api.h"
#include "runtime/generate.h"

namespace brisk {
namespace {

const std::string kDir = std::string(BRISK_SHARED_DATA) + "/models/qwen3";

#define REQUIRE_QWEN3()                                   \
  if (!std::filesystem::exists(kDir + "/ref.json"))       \
  BRISK_SKIP_MISSING_ASSET() << "shared model fixture " << kDir << " is missing"

struct Fixture {
  std::shared_ptr<Model> model;
  std::vector<int32_t> ids, greedy;
};

Fixture load() {
  const nlohmann::json ref = read_json_file(kDir + "/ref.json");
  return {Model::load({.path = kDir + "/hf"}), ref.at("input_ids").get<std::vector<int32_t>>(),
          ref.at("greedy_continuation").get<std::vector<int32_t>>()};
}

std::unique_ptr<Context> ctx_for(const Fixture& f) {
  return Context::create(f.model, {.n_ctx = 512, .kv_type = QuantType::F32, .n_threads = 1});
}

SamplerParams greedy() {
  SamplerParams p;
  p.temperature = 0.0f;
  return p;
}

TEST(Generate, GreedyFollowsReferenceAndStreamsTheDecodedText) {
  REQUIRE_QWEN3();
  const Fixture f = load();
  auto ctx = ctx_for(f);
  std::string streamed;
  const GenerateResult r = generate(*ctx, f.model->tokenizer(), f.ids,
                                    {.max_tokens = 32, .sampling = greedy(), .stop_at_end_of_generation = false},
                                    {.on_text = [&](std::string_view t) { streamed += t; return true; }});
  EXPECT_EQ(r.tokens, f.greedy);
  EXPECT_EQ(r.stop, StopReason::max_tokens);
  EXPECT_EQ(streamed, r.text);
  // The first (valid UTF-8) part equals the whole-sequence decode of those tokens.
  EXPECT_EQ(r.text.substr(0, 5), f.model->tokenizer()->decode({r.tokens[0]}));
  EXPECT_EQ(r.n_prompt, int32_t(f.ids.size()));
  EXPECT_EQ(ctx->seq_length(0), int32_t(f.ids.size() + 31));  // the last token is not run
}

TEST(Generate, StopStringEndGenerationMaxTokensCallback) {
  REQUIRE_QWEN3();
  const Fixture f = load();
  const Tokenizer* tok = f.model->tokenizer();
  // A stop string taken from the middle of the greedy text: output is the text before it.
  std::string full;
  {
    auto ctx = ctx_for(f);
    full = generate(*ctx, tok, f.ids, {.max_tokens = 32, .sampling = greedy(), .stop_at_end_of_generation = false}).text;
  }
  ASSERT_GT(full.size(), 8u);
  const std::string stop = full.substr(full.size() / 2, 3);
  {
    auto ctx = ctx_for(f);
    const GenerateResult r = generate(*ctx, tok, f.ids, {.max_tokens = 32, .sampling = greedy(), .stop_strings = {stop},
                                                        .stop_at_end_of_generation = false});
    EXPECT_EQ(r.stop, StopReason::stop_string);
    EXPECT_EQ(r.text, full.substr(0, full.find(stop)));
  }
  // An end-of-generation id forced by a logit bias stops at once.
  const std::vector<int32_t> eog = tok->end_of_generation_ids();
  ASSERT_FALSE(eog.empty());
  {
    auto ctx = ctx_for(f);
    SamplerParams p = greedy();
    p.logit_bias = {{eog[0], 100.0f}};
    const GenerateResult r = generate(*ctx, tok, f.ids, {.max_tokens = 10, .sampling = p});
    EXPECT_EQ(r.stop, StopReason::end_of_generation);
    EXPECT_EQ(r.tokens, std::vector<int32_t>{eog[0]});
  }
  {
    auto ctx = ctx_for(f);
    const GenerateResult r = generate(*ctx, tok, f.ids, {.max_tokens = 5, .sampling = greedy()});
    EXPECT_EQ(r.tokens.size(), 5u);
    EXPECT_EQ(r.n_decoded, 4);
  }
  {
    auto ctx = ctx_for(f);
    int calls = 0;
    const GenerateResult r = generate(*ctx, tok, f.ids, {.max_tokens = 32, .sampling = greedy(), .stop_at_end_of_generation = false},
                                      {.on_text = [&](std::string_view) { return ++calls < 2; }});
    EXPECT_EQ(r.stop, StopReason::callback);
    EXPECT_EQ(calls, 2);
  }
}

TEST(Generate, SeededSamplingIsReproducibleAndPromptIsChecked) {
  REQUIRE_QWEN3();
  const Fixture f = load();
  SamplerParams p;
  p.temperature = 1.0f;
  p.seed = 42;
  std::vector<int32_t> first;
  for (int run = 0; run < 2; ++run) {
    auto ctx = ctx_for(f);
    const GenerateResult r = generate(*ctx, f.model->tokenizer(), f.ids, {.max_tokens = 16, .sampling = p,
                                                                          .stop_at_end_of_generation = false});
    if (run == 0) first = r.tokens;
    else EXPECT_EQ(r.tokens, first);
  }
  auto ctx = ctx_for(f);
  EXPECT_THROW(generate(*ctx, nullptr, {1, 5000}, {}), Error);
  EXPECT_THROW(generate(*ctx, nullptr, {}, {}), Error);
  EXPECT_EQ(ctx->seq_length(0), 0);
}

// The fixture's embedding has 1024 rows for a 1000-token vocabulary (as real Qwen checkpoints
// pad 151,665 tokens to 151,936 rows): near-uniform sampling never picks a padding id, and
// such an id decodes to nothing.
TEST(Generate, PaddedRowsPastTheVocabularyAreNeverSampled) {
  REQUIRE_QWEN3();
  const Fixture f = load();
  const Tokenizer& tok = *f.model->tokenizer();
  ASSERT_LT(tok.vocab_size(), f.model->info().n_vocab) << "the fixture is no longer padded";
  auto ctx = ctx_for(f);
  SamplerParams hot;
  hot.temperature = 8.0f;
  hot.top_k = 0;
  hot.top_p = 1.0f;
  hot.min_p = 0.0f;
  for (uint64_t seed : {1u, 2u}) {
    ctx->seq_truncate(0, 0);
    hot.seed = seed;
    const GenerateResult r =
        generate(*ctx, &tok, f.ids, {.max_tokens = 400, .sampling = hot, .stop_at_end_of_generation = false});
    ASSERT_EQ(r.tokens.size(), 400u);
    for (int32_t id : r.tokens) ASSERT_LT(id, tok.vocab_size()) << "seed " << seed;
  }
  EXPECT_EQ(decode_generated(tok, {f.greedy[0], tok.vocab_size(), f.model->info().n_vocab - 1}),
            tok.decode({f.greedy[0]}));
}

}  // namespace
}  // namespace brisk
