// Speculative decoding (runtime/speculative.h) on every text fixture architecture: a verify
// forward's rows equal decoding the same tokens one at a time (bit for bit); greedy ids with each
// draft source equal plain decoding over 64 tokens; after a rejected draft the next logits equal a
// run that never saw it (KV and recurrent state); speculative sampling keeps the target's
// distribution (chi-square); a draft model with another vocabulary is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "model_harness.h"
#include "runtime/generate.h"
#include "runtime/speculative.h"

namespace brisk::test {
// A named namespace: the unity batches of the asan preset share anonymous ones between files.
namespace spec_test {

struct SpecFixture {
  std::string name;   // test name
  std::string arch;   // shared fixture folder
  std::string file;   // "" : the hf/ folder, else a file of the folder
  std::string draft;  // another fixture with the same vocabulary (a draft that disagrees often)
};

const SpecFixture kFixtures[] = {
    {"llama_q8_0", "llama", "model-q8_0.gguf", "qwen2"},
    {"mistral_q8_0", "mistral", "model-q8_0.gguf", "llama"},
    {"qwen2_q8_0", "qwen2", "model-q8_0.gguf", "llama"},
    {"qwen3_q8_0", "qwen3", "model-q8_0.gguf", "llama"},
    {"qwen3_f32", "qwen3", "", "llama"},
    {"qwen3_moe_q8_0", "qwen3_moe", "model-q8_0.gguf", "llama"},
    {"gemma3_q8_0", "gemma3", "model-q8_0.gguf", "llama"},
    {"qwen3_5", "qwen3_5", "", "llama"},
    {"qwen3_5_moe", "qwen3_5_moe", "", "qwen3_5"},
    {"qwen3_next", "wave2/qwen3_next", "", "wave2/qwen3_5_moe"},
};

std::string fixture_path(const std::string& arch, const std::string& file) {
  return model_dir(arch) + (file.empty() ? "/hf" : "/" + file);
}

std::shared_ptr<Model> load(const std::string& arch, const std::string& file = "") {
  return Model::load({.path = fixture_path(arch, file), .n_threads = 2});
}

ContextOptions spec_ctx_options(int32_t n_seq = 1) {
  return {.n_ctx = 256, .n_seq_max = n_seq, .n_batch = 64, .kv_type = QuantType::F32, .n_threads = 2,
          .state_checkpoints = true};
}

std::vector<float> row(const Context& ctx, int32_t i) {
  const float* l = ctx.logits(i);
  return std::vector<float>(l, l + ctx.n_vocab());
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A prompt whose continuation repeats it, so that n-gram drafts hit: the prompt ids twice.
std::vector<int32_t> repeating_prompt(const Ref& ref) {
  std::vector<int32_t> p = ref.input_ids;
  p.insert(p.end(), ref.input_ids.begin(), ref.input_ids.end());
  return p;
}

class Spec : public ::testing::TestWithParam<SpecFixture> {};

// Rows of one forward over 2, 5 and 8 tokens (the most a verify step runs per forward on the CPU:
// from 9 tokens the prefill GEMM sums in another order) against the same tokens decoded one per
// forward.
TEST_P(Spec, VerifyRowsEqualOneAtATime) {
  const SpecFixture& f = GetParam();
  REQUIRE_MODEL(f.arch);
  const Ref ref = load_ref_file(model_dir(f.arch) + "/ref.json");
  auto model = load(f.arch, f.file);
  const std::vector<int32_t> next(ref.greedy.begin(), ref.greedy.begin() + 8);
  auto one = Context::create(model, spec_ctx_options());
  one->decode(prompt_batch(ref.input_ids, 0, 0, false));
  std::vector<std::vector<float>> alone;
  for (size_t i = 0; i < next.size(); ++i) {
    one->decode({{.token = next[i], .pos = int32_t(ref.input_ids.size() + i), .seq = 0, .want_logits = true}});
    alone.push_back(row(*one, 0));
  }
  for (size_t n : {2, 5, 8}) {
    auto group = Context::create(model, spec_ctx_options());
    group->decode(prompt_batch(ref.input_ids, 0, 0, false));
    group->decode(prompt_batch({next.begin(), next.begin() + long(n)}, 0, int32_t(ref.input_ids.size()), true));
    for (size_t i = 0; i < n; ++i)
      EXPECT_TRUE(same_bits(row(*group, int32_t(i)), alone[i])) << f.name << ": row " << i << " of a " << n << "-token verify";
  }
}

// After a verify whose last two drafts are rejected, the context is cut back (KV truncated,
// recurrent state from the checkpoint and replayed) and the next logits equal a run that only
// ever saw the kept tokens.
TEST_P(Spec, RollbackEqualsNeverSeen) {
  const SpecFixture& f = GetParam();
  REQUIRE_MODEL(f.arch);
  const Ref ref = load_ref_file(model_dir(f.arch) + "/ref.json");
  auto model = load(f.arch, f.file);
  const int32_t L = int32_t(ref.input_ids.size());
  const int32_t a = ref.greedy[0], b = ref.greedy[1], x = ref.greedy[2];
  const int32_t bad1 = (ref.greedy[1] + 7) % model->info().n_vocab, bad2 = (ref.greedy[2] + 3) % model->info().n_vocab;

  auto clean = Context::create(model, spec_ctx_options());
  clean->decode(prompt_batch(ref.input_ids, 0, 0, false));
  clean->decode(prompt_batch({a, b, x}, 0, L, true));
  const std::vector<float> want = row(*clean, 2);

  auto ctx = Context::create(model, spec_ctx_options());
  ctx->decode(prompt_batch(ref.input_ids, 0, 0, false));
  ASSERT_TRUE(ctx->seq_checkpoint(0));
  ctx->decode(prompt_batch({a, b, bad1, bad2}, 0, L, true));  // b kept, bad1 and bad2 rejected
  const int32_t keep = L + 2;
  const int32_t from = ctx->seq_restorable(0, keep);
  ASSERT_GE(from, L);
  ctx->seq_truncate(0, from);
  std::vector<int32_t> replay;
  for (int32_t p = from; p < keep; ++p) replay.push_back(p == L ? a : b);
  if (!replay.empty()) ctx->decode(prompt_batch(replay, 0, from, false));
  ASSERT_EQ(ctx->seq_length(0), keep);
  ctx->decode({{.token = x, .pos = keep, .seq = 0, .want_logits = true}});
  EXPECT_TRUE(same_bits(row(*ctx, 0), want)) << f.name << ": logits after the rollback differ";
}

// The model's own greedy output as the draft with every third token changed: follows the
// verified history (drafting from the position it has reached), so it keeps being half wrong.
class CorruptedOracle final : public DraftSource {
 public:
  CorruptedOracle(size_t n_prompt, std::vector<int32_t> plain, int32_t n_vocab)
      : n_prompt_(n_prompt), plain_(std::move(plain)), n_vocab_(n_vocab) {}
  const char* name() const override { return "corrupted-oracle"; }
  void propose(int32_t, const std::vector<int32_t>& h, int32_t n_max, const SamplerParams&, Draft* out) override {
    out->tokens.clear();
    out->q.clear();
    for (size_t i = h.size() - n_prompt_; i < plain_.size() && int32_t(out->tokens.size()) < n_max; ++i)
      out->tokens.push_back(i % 3 == 2 ? (plain_[i] + 1) % n_vocab_ : plain_[i]);
  }

 private:
  size_t n_prompt_;
  std::vector<int32_t> plain_;
  int32_t n_vocab_;
};

// Draft sources that disagree with the target at every few tokens: the corrupted oracle above,
// prompt lookup on a repeating prompt, and another random model with the same vocabulary.
std::unique_ptr<DraftSource> make_source(const std::string& kind, const SpecFixture& f,
                                         const std::vector<int32_t>& prompt, const std::vector<int32_t>& plain,
                                         const Model& target) {
  if (kind == "ngram") return draft_source_ngram({});
  if (kind == "oracle") return std::make_unique<CorruptedOracle>(prompt.size(), plain, target.info().n_vocab);
  return draft_source_model({.model = load(f.draft),
                             .name = f.draft,
                             .target_name = f.arch,
                             .target_n_vocab = target.info().n_vocab,
                             .target_n_tokens = target.tokenizer() ? target.tokenizer()->vocab_size() : 0,
                             .context = spec_ctx_options()});
}

TEST_P(Spec, GreedyIdsEqualPlainDecoding) {
  const SpecFixture& f = GetParam();
  REQUIRE_MODEL(f.arch);
  REQUIRE_MODEL(f.draft);
  const Ref ref = load_ref_file(model_dir(f.arch) + "/ref.json");
  auto model = load(f.arch, f.file);
  const std::vector<int32_t> prompt = repeating_prompt(ref);
  GenerateParams params{.max_tokens = 64, .sampling = {.temperature = 0.0f}};
  auto plain_ctx = Context::create(model, spec_ctx_options());
  const GenerateResult plain = generate(*plain_ctx, nullptr, prompt, params);
  ASSERT_EQ(plain.tokens.size(), 64u);
  for (const char* kind : {"ngram", "oracle", "draft"}) {
    for (int32_t k : {1, 3, 7}) {
      auto ctx = Context::create(model, spec_ctx_options());
      GenerateParams sp = params;
      sp.spec = {.source = make_source(kind, f, prompt, plain.tokens, *model), .draft_max = k};
      const GenerateResult got = generate(*ctx, nullptr, prompt, sp);
      EXPECT_EQ(got.tokens, plain.tokens) << f.name << ", " << kind << ", draft-max " << k;
      EXPECT_GT(got.spec_steps, 0) << f.name << ", " << kind << ": nothing was verified";
      if (std::string(kind) == "oracle") {  // two of every three drafts are right
        EXPECT_GT(got.spec_accepted, 0) << f.name;
        EXPECT_GT(got.spec_drafted - got.spec_accepted, 4) << f.name;
      }
      EXPECT_EQ(ctx->seq_length(0), int32_t(prompt.size() + got.tokens.size() - 1)) << f.name << ", " << kind;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Spec, ::testing::ValuesIn(kFixtures),
                         [](const auto& info) { return info.param.name; });

// A draft source for the statistical test: token i drawn from a fixed distribution q that puts
// mass on tokens the target's top-k excludes (those drafts must always be rejected).
class FixedQDraft final : public DraftSource {
 public:
  FixedQDraft(TokenDistribution q, uint64_t seed) : q_(std::move(q)), rng_(seed) {}
  const char* name() const override { return "fixed-q"; }
  void propose(int32_t, const std::vector<int32_t>&, int32_t n_max, const SamplerParams&, Draft* out) override {
    out->tokens.clear();
    out->q.clear();
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (int32_t i = 0; i < n_max; ++i) {
      double r = u(rng_), cum = 0.0;
      int32_t tok = q_.back().first;
      for (const auto& [id, p] : q_) {
        cum += p;
        if (r < cum) {
          tok = id;
          break;
        }
      }
      out->tokens.push_back(tok);
      out->q.push_back(q_);
    }
  }

 private:
  TokenDistribution q_;
  std::mt19937_64 rng_;
};

// Upper alpha = 0.001 point of chi-square with `df` degrees of freedom (Wilson-Hilferty).
double chi2_critical_001(int df) {
  const double z = 3.0902, d = double(df);
  const double t = 1.0 - 2.0 / (9.0 * d) + z * std::sqrt(2.0 / (9.0 * d));
  return d * t * t * t;
}

// Temperature 1, top-k 3 and a repetition penalty (over the last prompt token and the output): the joint distribution of the first two
// tokens verify steps produce (the second and third generated; the first comes from the
// prompt; two drafts per step) over 1500 seeded runs, against the exact one computed from the target's logits
// with Sampler::distribution. Chi-square at significance 0.001 per draft source: a correct
// implementation fails with probability 0.1 % for a given source and seed set (the seeds are
// fixed, so the outcome is reproducible).
TEST(SpecSampling, FirstTokensKeepTheTargetDistribution) {
  REQUIRE_MODEL("qwen3");
  const Ref ref = load_ref("qwen3");
  auto model = load("qwen3");
  const SamplerParams sp{.temperature = 1.0f, .top_k = 3, .top_p = 1.0f, .min_p = 0.0f, .repeat_penalty = 1.3f};
  const std::vector<int32_t> prompt = ref.input_ids;
  auto ctx = Context::create(model, spec_ctx_options());
  ctx->decode(prompt_batch({prompt.begin(), prompt.end() - 1}, 0, 0, false));

  // Exact: P(t1) P(t2 | t1) P(t3 | t1, t2) with the sampler's processed distributions (the
  // repetition penalty sees the prompt and the tokens before).
  auto dist_after = [&](const std::vector<int32_t>& gen) {
    const int32_t keep = int32_t(prompt.size()) - 1;
    ctx->seq_truncate(0, keep);
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), gen.begin(), gen.end());
    ctx->decode(prompt_batch({all.begin() + keep, all.end()}, 0, keep, false));
    Sampler s(sp, ctx->n_vocab());
    for (size_t i = prompt.size() - 1; i < all.size(); ++i) s.accept(all[i]);  // as generate() below sees it
    TokenDistribution d;
    s.distribution(ctx->logits(0), nullptr, &d);
    return d;
  };
  std::map<std::pair<int32_t, int32_t>, double> expected;  // (t2, t3) marginal over t1
  const TokenDistribution p1 = dist_after({});
  for (const auto& [t1, q1] : p1) {
    for (const auto& [t2, q2] : dist_after({t1}))
      for (const auto& [t3, q3] : dist_after({t1, t2})) expected[{t2, t3}] += q1 * q2 * q3;
  }
  ASSERT_GT(expected.size(), 4u);

  const int32_t runs = 1500;
  const TokenDistribution& p2 = dist_after({p1.front().first});
  for (int source = 0; source < 2; ++source) {
    std::map<std::pair<int32_t, int32_t>, int> seen;
    // Point mass on the target's second most likely next token / a spread q over top tokens
    // and tokens outside the top-k.
    for (int32_t r = 0; r < runs; ++r) {
      std::shared_ptr<DraftSource> src;
      if (source == 0) {
        src = std::make_shared<FixedQDraft>(TokenDistribution{{p2.back().first, 1.0}}, 7 + uint64_t(r));
      } else {
        int32_t outside = 0;  // a token the top-k never keeps
        while (outside == p2.front().first || outside == p2.back().first || outside == p2[1].first) ++outside;
        TokenDistribution q{{p2.front().first, 0.3}, {p2.back().first, 0.3}, {outside, 0.4}};
        std::sort(q.begin(), q.end());
        src = std::make_shared<FixedQDraft>(q, 1000 + uint64_t(r));
      }
      ctx->seq_truncate(0, int32_t(prompt.size()) - 1);  // the prompt but its last token stays
      SamplerParams rs = sp;
      rs.seed = 0x5EED0000 + uint64_t(r) + uint64_t(source) * 100000;
      GenerateParams gp{.max_tokens = 4, .sampling = rs};
      gp.spec = {.source = src, .draft_max = 2, .adaptive = false};
      const GenerateResult g = generate(*ctx, nullptr, {prompt.back()}, gp);
      ASSERT_EQ(g.tokens.size(), 4u);
      ASSERT_GE(g.spec_steps, 1);
      seen[{g.tokens[1], g.tokens[2]}]++;
    }
    // Cells with an expected count under 5 are pooled.
    double chi2 = 0.0, pooled_e = 0.0, pooled_o = 0.0;
    int cells = 0;
    for (const auto& [key, p] : expected) {
      const double e = p * runs;
      const double o = seen.count(key) ? seen[key] : 0;
      if (e < 5.0) {
        pooled_e += e;
        pooled_o += o;
        continue;
      }
      chi2 += (o - e) * (o - e) / e;
      ++cells;
    }
    if (pooled_e > 0.0) {
      chi2 += (pooled_o - pooled_e) * (pooled_o - pooled_e) / std::max(pooled_e, 1e-9);
      ++cells;
    }
    int outside = 0;
    for (const auto& [key, n] : seen) outside += expected.count(key) ? 0 : n;
    EXPECT_EQ(outside, 0) << "tokens the target cannot produce";
    EXPECT_LT(chi2, chi2_critical_001(cells - 1)) << "source " << source << ": chi-square " << chi2 << " over "
                                                  << cells << " cells";
  }
}

TEST(SpecDraft, NgramProposesTheLongestLatestMatch) {
  auto src = draft_source_ngram({.ngram_min = 1, .ngram_max = 3});
  Draft d;
  // The last 3 tokens (7 8 9) occur at index 1 followed by 4 5; the last 1 (9) later at 6 (then 1).
  src->propose(0, {1, 7, 8, 9, 4, 5, 9, 1, 7, 8, 9}, 3, {}, &d);
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{4, 5, 9}));
  EXPECT_TRUE(d.q.empty());
  src->propose(0, {1, 2, 3}, 3, {}, &d);
  EXPECT_TRUE(d.tokens.empty());
  src->propose(0, {5, 6, 5}, 4, {}, &d);  // a 1-gram match whose continuation reaches the end
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{6, 5}));
}

TEST(SpecDraft, LengthFollowsAcceptance) {
  DraftLength len(1, 8, true);
  EXPECT_EQ(len.next(), 8);
  for (int i = 0; i < 10; ++i) len.update(8, 0);
  EXPECT_EQ(len.next(), 1);
  for (int i = 0; i < 30; ++i) len.update(4, 4);
  EXPECT_EQ(len.next(), 8);
  DraftLength fixed(1, 5, false);
  fixed.update(5, 0);
  EXPECT_EQ(fixed.next(), 5);
}

TEST(SpecDraft, VerifyRowKeepsAndReplaces) {
  Sampler s({.temperature = 1.0f}, 8);
  const TokenDistribution p{{1, 0.5}, {2, 0.5}};
  for (int i = 0; i < 50; ++i) {
    const VerifyPick v = spec_verify_row(s, p, 5, nullptr);  // p(5) = 0: always replaced, from p
    EXPECT_FALSE(v.accepted);
    EXPECT_TRUE(v.token == 1 || v.token == 2);
    const VerifyPick w = spec_verify_row(s, p, 1, nullptr);
    EXPECT_TRUE(w.accepted || w.token == 2);  // a rejected 1 is replaced by the residual's only token
  }
}

TEST(SpecDraft, DraftModelWithAnotherVocabularyIsRefused) {
  REQUIRE_MODEL("qwen3");
  REQUIRE_MODEL("wave2/qwen3_5_moe");
  auto target = load("qwen3");
  try {
    draft_source_model({.model = load("wave2/qwen3_5_moe"),
                        .name = "small",
                        .target_name = "big",
                        .target_n_vocab = target->info().n_vocab,
                        .target_n_tokens = target->tokenizer()->vocab_size(),
                        .context = spec_ctx_options()});
    FAIL() << "a draft model with 512 ids was accepted for a 1024-token model";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("512"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(target->tokenizer()->vocab_size())), std::string::npos) << msg;
  }
}

}  // namespace spec_test
}  // namespace brisk::test
