// Speculative decoding with the model's multi-token-prediction block (draft_source_mtp) on the
// hybrid fixture that has one (tests/fixtures/models/qwen3_5_moe_text_config_mtp, HF and brisk's
// GGUF conversion with its nextn tensors): greedy ids equal plain decoding over 64 tokens; after
// rejected drafts the block's next draft distribution equals a fresh block's that never saw them
// (its KV cache cut back); hidden states kept for the block leave the target's logits unchanged;
// a block made to copy the target's prediction has nearly every draft kept, one made to echo the
// target's hidden state drafts the pending token (the hidden rows reach the right positions); a
// model without MTP weights is refused with a message.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>

#include "model_harness.h"
#include "core/error.h"
#include "formats/gguf.h"
#include "quantize/hf_to_gguf.h"
#include "runtime/generate.h"
#include "runtime/speculative.h"

namespace brisk::test {
namespace spec_mtp_test {

namespace fs = std::filesystem;

std::string mtp_fixture() { return std::string(BRISK_FIXTURES) + "/models/qwen3_5_moe_text_config_mtp"; }

#define REQUIRE_MTP_FIXTURE()                         \
  if (!fs::exists(mtp_fixture() + "/ref.json"))       \
  GTEST_SKIP() << "model fixture " << mtp_fixture() << " is missing"

ContextOptions mtp_ctx_options() {
  return {.n_ctx = 256, .n_seq_max = 1, .n_batch = 64, .kv_type = QuantType::F32, .n_threads = 2,
          .state_checkpoints = true};
}

// The fixture as brisk's F32 GGUF (MTP block as blk.{n_layer}.nextn.*), once per run.
std::string mtp_gguf() {
  const std::string path = ::testing::TempDir() + "/brisk_spec_mtp-f32.gguf";
  if (!fs::exists(path)) hf_to_gguf_f32(mtp_fixture(), path);
  return path;
}

std::vector<int32_t> prompt_of(const Ref& ref) {
  std::vector<int32_t> p = ref.input_ids;
  p.insert(p.end(), ref.input_ids.begin(), ref.input_ids.end());
  return p;
}

TEST(SpecMtp, GreedyIdsEqualPlainDecoding) {
  REQUIRE_MTP_FIXTURE();
  const Ref ref = load_ref_file(mtp_fixture() + "/ref.json");
  const std::vector<int32_t> prompt = prompt_of(ref);
  for (const std::string& path : {mtp_fixture(), mtp_gguf()}) {
    std::shared_ptr<const Model> model = Model::load({.path = path, .n_threads = 2});
    GenerateParams params{.max_tokens = 64, .sampling = {.temperature = 0.0f}};
    auto plain_ctx = Context::create(model, mtp_ctx_options());
    const GenerateResult plain = generate(*plain_ctx, nullptr, prompt, params);
    ASSERT_EQ(plain.tokens.size(), 64u);
    for (int32_t k : {1, 3, 7}) {
      auto ctx = Context::create(model, mtp_ctx_options());
      GenerateParams sp = params;
      sp.spec = {.source = draft_source_mtp({.model = model, .context = mtp_ctx_options()}), .draft_max = k,
                 .adaptive = false};
      const GenerateResult got = generate(*ctx, nullptr, prompt, sp);
      EXPECT_EQ(got.tokens, plain.tokens) << path << ", draft-max " << k;
      EXPECT_GT(got.spec_steps, 0) << path << ": nothing was verified";
      EXPECT_EQ(ctx->seq_length(0), int32_t(prompt.size() + got.tokens.size() - 1)) << path;
      std::printf("  mtp %s k=%d: %d of %d drafts kept in %d verify steps\n", fs::path(path).filename().c_str(), k,
                  got.spec_accepted, got.spec_drafted, got.spec_steps);
    }
  }
}

// Keeping hidden states for the block changes nothing of the target's logits.
TEST(SpecMtp, KeptHiddenStatesLeaveLogitsAlone) {
  REQUIRE_MTP_FIXTURE();
  const Ref ref = load_ref_file(mtp_fixture() + "/ref.json");
  std::shared_ptr<const Model> model = Model::load({.path = mtp_fixture(), .n_threads = 2});
  auto a = Context::create(model, mtp_ctx_options()), b = Context::create(model, mtp_ctx_options());
  ASSERT_TRUE(b->set_keep_hidden(true));
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < ref.input_ids.size(); ++i)
    batch.push_back({.token = ref.input_ids[i], .pos = int32_t(i), .seq = 0, .want_logits = i + 1 == ref.input_ids.size()});
  a->decode(batch);
  b->decode(batch);
  EXPECT_EQ(a->hidden(0), nullptr);
  ASSERT_NE(b->hidden(int32_t(batch.size()) - 1), nullptr);
  EXPECT_EQ(std::memcmp(a->logits(0), b->logits(0), sizeof(float) * size_t(a->n_vocab())), 0);
}

// Target forwards shown to a draft source, as the scheduler does.
void decode_shown(Context& target, DraftSource& src, const std::vector<BatchToken>& batch) {
  target.decode(batch);
  src.observe(batch, target);
}

std::vector<BatchToken> run_of(const std::vector<int32_t>& ids, int32_t pos0) {
  std::vector<BatchToken> b;
  for (size_t i = 0; i < ids.size(); ++i)
    b.push_back({.token = ids[i], .pos = pos0 + int32_t(i), .seq = 0, .want_logits = true});
  return b;
}

// A verify group whose drafts are rejected (the block chained over its own drafts, the target ran
// them, then went back to its checkpoint and replayed the kept token) leaves the block where a
// fresh one that only saw the kept tokens is: the same first-draft distribution, bit for bit, and
// the same greedy chain.
TEST(SpecMtp, RollbackEqualsNeverSeen) {
  REQUIRE_MTP_FIXTURE();
  const Ref ref = load_ref_file(mtp_fixture() + "/ref.json");
  std::shared_ptr<const Model> model = Model::load({.path = mtp_fixture(), .n_threads = 2});
  const int32_t n_vocab = model->info().n_vocab;
  const std::vector<int32_t>& prompt = ref.input_ids;
  const int32_t n = int32_t(prompt.size());
  const int32_t a = 5, b = 9, r1 = 17, r2 = 23;  // kept, bonus, rejected drafts
  const SamplerParams warm{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 7};
  const SamplerParams greedy{.temperature = 0.0f};

  auto t1 = Context::create(model, mtp_ctx_options());
  ASSERT_TRUE(t1->set_keep_hidden(true));
  auto s1 = draft_source_mtp({.model = model, .context = mtp_ctx_options()});
  decode_shown(*t1, *s1, run_of(prompt, 0));
  std::vector<int32_t> h = prompt;
  h.push_back(a);
  Draft d;
  s1->propose(0, h, 0, 4, greedy, &d);  // the chain writes rows past the verified ones
  ASSERT_EQ(d.tokens.size(), 4u);
  ASSERT_TRUE(t1->seq_checkpoint(0));
  decode_shown(*t1, *s1, run_of({a, r1, r2}, n));
  t1->seq_truncate(0, n);  // r1 rejected: back to the checkpoint, a replayed
  decode_shown(*t1, *s1, run_of({a}, n));
  decode_shown(*t1, *s1, run_of({b}, n + 1));
  h.push_back(b);
  h.push_back(r1);  // b's successor is pending: the block runs rows up to b's position
  Draft got_q, got_chain;
  s1->propose(0, h, 0, 1, warm, &got_q);
  s1->propose(0, h, 0, 4, greedy, &got_chain);

  auto t2 = Context::create(model, mtp_ctx_options());
  ASSERT_TRUE(t2->set_keep_hidden(true));
  auto s2 = draft_source_mtp({.model = model, .context = mtp_ctx_options()});
  decode_shown(*t2, *s2, run_of(prompt, 0));
  Draft first;  // the block's rows in the same forwards as s1's (rows of one forward over more
                // than 8 tokens sum in another order than rows of a smaller one)
  s2->propose(0, std::vector<int32_t>(h.begin(), h.begin() + n + 1), 0, 1, greedy, &first);
  decode_shown(*t2, *s2, run_of({a}, n));
  decode_shown(*t2, *s2, run_of({b}, n + 1));
  Draft want_q, want_chain;
  s2->propose(0, h, 0, 1, warm, &want_q);
  s2->propose(0, h, 0, 4, greedy, &want_chain);

  ASSERT_EQ(got_q.q.size(), 1u);
  ASSERT_EQ(want_q.q.size(), 1u);
  ASSERT_EQ(got_q.q[0].size(), want_q.q[0].size());
  EXPECT_GT(want_q.q[0].size(), size_t(n_vocab / 2));
  for (size_t i = 0; i < want_q.q[0].size(); ++i) {
    EXPECT_EQ(got_q.q[0][i].first, want_q.q[0][i].first);
    EXPECT_EQ(got_q.q[0][i].second, want_q.q[0][i].second) << "token " << want_q.q[0][i].first;
  }
  EXPECT_EQ(got_chain.tokens, want_chain.tokens);
}

// The fixture's F32 GGUF with tensors rewritten: edit(name, values) for each, n_embd and the MTP
// block's prefix ("blk.{n_layer}.") given. Returns the written path.
using TensorEdit = std::function<void(const std::string& name, std::vector<float>& v)>;
std::string rewritten_gguf(const std::string& file, const std::function<TensorEdit(int64_t n_embd, const std::string& mtp,
                                                                                   const float* output_norm)>& make_edit) {
  const gguf::File base = gguf::File::open(mtp_gguf());
  const std::string arch = base.architecture();
  const int64_t n_embd = *base.get_int(arch + ".embedding_length");
  const int32_t n_layer = int32_t(*base.get_int(arch + ".block_count")) - int32_t(*base.get_int(arch + ".nextn_predict_layers"));
  const float* output_norm = nullptr;
  for (const auto& t : base.tensors())
    if (t.name == "output_norm.weight") output_norm = reinterpret_cast<const float*>(t.data);
  BRISK_CHECK(output_norm != nullptr, "no output_norm.weight");
  const TensorEdit edit = make_edit(n_embd, "blk." + std::to_string(n_layer) + ".", output_norm);
  std::vector<std::vector<float>> keep;  // the rewritten tensors' data, alive until written
  gguf::Writer w;
  for (const auto& [key, value] : base.metadata()) w.set(key, value);
  for (const auto& t : base.tensors()) {
    BRISK_CHECK(t.type == QuantType::F32, t.name, " is not F32");
    const float* src = reinterpret_cast<const float*>(t.data);
    std::vector<float>& v = keep.emplace_back(src, src + t.n_elements);
    edit(t.name, v);
    w.add_tensor(t.name, t.type, t.ne, v.data(), v.size() * sizeof(float));
  }
  const std::string path = ::testing::TempDir() + "/" + file;
  w.write(path);
  return path;
}

bool ends_with(const std::string& s, const std::string& e) {
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}

// fc = [I 0] (the embedding half alone) or [0 I] (the hidden half alone), [n_embd, 2 n_embd].
void half_identity(std::vector<float>& v, int64_t n_embd, bool hidden_half) {
  std::fill(v.begin(), v.end(), 0.0f);
  for (int64_t r = 0; r < n_embd; ++r) v[size_t(r * 2 * n_embd + r + (hidden_half ? n_embd : 0))] = 1.0f;
}

// Zeroes the output projections of every block (attention, delta net, MLP, experts).
bool zero_output(const std::string& name, std::vector<float>& v) {
  for (const char* out : {"attn_output.weight", "ssm_out.weight", "ffn_down.weight", "ffn_down_exps.weight",
                          "ffn_down_shexp.weight"})
    if (ends_with(name, out)) {
      std::fill(v.begin(), v.end(), 0.0f);
      return true;
    }
  return false;
}

// A model whose MTP block is made to copy the target's own prediction: every layer's output
// projections zero, so the target's next token is a function of the current one,
// f(x) = argmax output(rms_norm(embed(x)) * output_norm); the MTP block's fc passes the embedding
// half alone, its layer adds nothing and its final norm is the model's, so from the pending token
// x it predicts f(x), the target's next pick. Nearly every draft is kept (rows whose two best
// logits are closer than the norms' rounding may not be).
TEST(SpecMtp, BlockThatCopiesTheTargetIsAccepted) {
  REQUIRE_MTP_FIXTURE();
  const std::string path = rewritten_gguf("brisk_spec_mtp_copy.gguf", [](int64_t n_embd, const std::string& mtp,
                                                                          const float* output_norm) -> TensorEdit {
    return [=](const std::string& name, std::vector<float>& v) {
      zero_output(name, v);
      if (name == mtp + "nextn.eh_proj.weight") half_identity(v, n_embd, false);
      if (name == mtp + "nextn.enorm.weight") std::fill(v.begin(), v.end(), 1.0f);
      if (name == mtp + "nextn.shared_head_norm.weight") std::copy(output_norm, output_norm + n_embd, v.begin());
    };
  });
  std::shared_ptr<const Model> model = Model::load({.path = path, .n_threads = 2});
  const Ref ref = load_ref_file(mtp_fixture() + "/ref.json");
  GenerateParams params{.max_tokens = 64, .sampling = {.temperature = 0.0f}};
  auto plain_ctx = Context::create(model, mtp_ctx_options());
  const GenerateResult plain = generate(*plain_ctx, nullptr, ref.input_ids, params);
  auto ctx = Context::create(model, mtp_ctx_options());
  GenerateParams sp = params;
  sp.spec = {.source = draft_source_mtp({.model = model, .context = mtp_ctx_options()}), .draft_max = 4};
  const GenerateResult got = generate(*ctx, nullptr, ref.input_ids, sp);
  EXPECT_EQ(got.tokens, plain.tokens);
  EXPECT_GE(got.spec_accepted * 10, got.spec_drafted * 9) << got.spec_accepted << " of " << got.spec_drafted;
  EXPECT_LE(got.spec_steps, 16) << "64 tokens in groups of up to 5";
  std::printf("  copying MTP block: %d of %d drafts kept in %d verify steps\n", got.spec_accepted, got.spec_drafted,
              got.spec_steps);
  fs::remove(path);
}

// Records the pending token and the first draft of every proposal of another source.
class FirstDraftProbe final : public DraftSource {
 public:
  explicit FirstDraftProbe(std::unique_ptr<DraftSource> inner) : inner_(std::move(inner)) {}
  const char* name() const override { return inner_->name(); }
  bool wants_hidden() const override { return inner_->wants_hidden(); }
  void observe(const std::vector<BatchToken>& batch, const Context& target) override { inner_->observe(batch, target); }
  void propose(int32_t slot, const std::vector<int32_t>& h, int32_t pos0, int32_t n_max, const SamplerParams& sampling,
               Draft* out) override {
    inner_->propose(slot, h, pos0, n_max, sampling, out);
    if (!out->tokens.empty()) pairs.emplace_back(h.back(), out->tokens.front());
  }
  std::vector<std::pair<int32_t, int32_t>> pairs;  // (pending token, first draft)

 private:
  std::unique_ptr<DraftSource> inner_;
};

// The target's hidden states reach the block at the right rows: a block whose fc passes the hidden
// half alone, whose layer adds nothing and whose norms are 1 (the model's final norm too) turns the
// target's final-normed state at the last verified position back into the target's logits there,
// so its first draft is the pending token, every step (the full model runs, layers and all).
TEST(SpecMtp, HiddenStatesReachTheRightRows) {
  REQUIRE_MTP_FIXTURE();
  const std::string path = rewritten_gguf("brisk_spec_mtp_echo.gguf", [](int64_t n_embd, const std::string& mtp,
                                                                          const float*) -> TensorEdit {
    return [=](const std::string& name, std::vector<float>& v) {
      if (name.rfind(mtp, 0) == 0) zero_output(name, v);
      if (name == mtp + "nextn.eh_proj.weight") half_identity(v, n_embd, true);
      for (const std::string& norm : {std::string("output_norm.weight"), mtp + "nextn.hnorm.weight", mtp + "nextn.shared_head_norm.weight"})
        if (name == norm) std::fill(v.begin(), v.end(), 1.0f);
    };
  });
  std::shared_ptr<const Model> model = Model::load({.path = path, .n_threads = 2});
  const Ref ref = load_ref_file(mtp_fixture() + "/ref.json");
  auto ctx = Context::create(model, mtp_ctx_options());
  auto probe = std::make_shared<FirstDraftProbe>(draft_source_mtp({.model = model, .context = mtp_ctx_options()}));
  GenerateParams sp{.max_tokens = 48, .sampling = {.temperature = 0.0f}};
  sp.spec = {.source = probe, .draft_max = 3, .adaptive = false};
  generate(*ctx, nullptr, ref.input_ids, sp);
  ASSERT_GE(probe->pairs.size(), 12u);
  size_t same = 0;
  for (const auto& [pending, first] : probe->pairs) same += pending == first ? 1 : 0;
  EXPECT_GE(same * 10, probe->pairs.size() * 9) << same << " of " << probe->pairs.size() << " first drafts were the pending token";
  fs::remove(path);
}

TEST(SpecMtp, ModelWithoutMtpWeightsIsRefused) {
  REQUIRE_MODEL("llama");
  std::shared_ptr<const Model> model = Model::load({.path = model_dir("llama") + "/model-q8_0.gguf", .n_threads = 2});
  try {
    draft_source_mtp({.model = model, .context = mtp_ctx_options()});
    ADD_FAILURE() << "a model without MTP weights was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no multi-token-prediction layers"), std::string::npos) << e.what();
  }
}

}  // namespace spec_mtp_test
}  // namespace brisk::test
