// Speculative decoding on CUDA (runs where a GPU is, skips elsewhere): the rows of a verify
// forward of 2..8 tokens against the same tokens decoded one per forward on the device (the
// bit-exactness the greedy equality rests on), and greedy ids with speculation (n-gram, the MTP
// block of the hybrid fixture, the oracle replaying plain decoding's output: every draft kept)
// equal to plain decoding on the device over 64 tokens, with the verify rows' ids picked on the
// device and, under BRISK_NO_SPEC_DEVICE_VERIFY, on the host. The verify
// step of each group size runs as its own CUDA graph (the backend's graph cache is keyed by the
// step's launches).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <string>

#include "core/error.h"
#include "quant/types.h"
#include "runtime/engine_api.h"
#include "runtime/generate.h"
#include "runtime/speculative.h"
#include "scoped_env.h"
#ifdef BRISK_HAVE_CUDA
#include "backend/cuda/cuda_devices.h"
#include "kernels/cuda/attention_splits.h"
#endif

namespace brisk {
namespace cuda_spec_test {

#ifndef BRISK_HAVE_CUDA
TEST(CudaSpec, GreedyIdsEqualPlainDecoding) { GTEST_SKIP() << "CUDA backend not built"; }
#else

struct CudaSpecModel {
  const char* name;
  std::string path;
};

std::vector<CudaSpecModel> cuda_spec_models() {
  return {{"llama_q8_0", std::string(BRISK_SHARED_DATA) + "/models/llama/model-q8_0.gguf"},
          {"qwen3_5", std::string(BRISK_SHARED_DATA) + "/models/qwen3_5/hf"},
          {"qwen3_5_moe_mtp", std::string(BRISK_FIXTURES) + "/models/qwen3_5_moe_text_config_mtp"}};
}

ContextOptions cuda_spec_ctx(QuantType kv = QuantType::F32) {
  return {.n_ctx = 256, .n_seq_max = 1, .n_batch = 64, .kv_type = kv, .n_threads = 2, .device = "cuda",
          .state_checkpoints = true};
}

std::shared_ptr<const Model> load_for_cuda(const std::string& path, std::string* skip) {
  std::string reason;
  if (cuda::enumerate_devices(&reason).empty()) {
    *skip = "no CUDA device: " + reason;
    return nullptr;
  }
  if (!std::filesystem::exists(path)) {
    *skip = "fixture " + path + " is missing";
    return nullptr;
  }
  return Model::load({.path = path});
}

std::vector<int32_t> cuda_spec_prompt(int32_t n_vocab) {
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < 24; ++i) ids.push_back((i % 12) * 37 % n_vocab);  // repeats: n-gram drafts hit
  return ids;
}

// The attention's KV splits (which decide how each row's sums are cut) of a step of 2..8 tokens
// are those of one token, for the shapes of the fixtures and of published models on devices of
// several sizes; runs without a GPU. (They once followed the step's rows: 5 tokens over 2 KV
// heads took 16 splits where one token took 8.)
TEST(CudaSpec, VerifyStepsSplitAttentionAsOneToken) {
  for (const int64_t sms : {int64_t(78), int64_t(114), int64_t(132)})
    for (const int64_t kv_heads : {int64_t(1), int64_t(2), int64_t(4), int64_t(8)})
      for (const int64_t capacity : {int64_t(256), int64_t(512), int64_t(4096), int64_t(32768)})
        for (const int64_t window : {int64_t(0), int64_t(12), int64_t(1024)}) {
          cuda::AttnSplitShape s{.n_tok = 1, .n_head_kv = kv_heads, .n_hg = 1, .capacity = capacity, .window = window,
                                 .sm_count = sms};
          const int one = cuda::attention_split_count(s);
          for (int64_t n = 2; n <= 8; ++n) {
            s.n_tok = n;
            EXPECT_EQ(cuda::attention_split_count(s), one) << n << " tokens, " << kv_heads << " KV heads, capacity "
                                                           << capacity << ", window " << window << ", " << sms << " SMs";
          }
        }
}

TEST(CudaSpec, VerifyRowsEqualOneAtATime) {
  for (const CudaSpecModel& m : cuda_spec_models()) {
    std::string skip;
    auto model = load_for_cuda(m.path, &skip);
    if (!model) GTEST_SKIP() << skip;
    const std::vector<int32_t> prompt = cuda_spec_prompt(model->info().n_vocab);
    // F16 / BF16 caches: one token takes the cluster attention, whose split the verify rows keep;
    // the verify group's rope and KV store inside it or (the switch) as a launch before it.
    for (const char* rope_off : {"0", "1"})
    for (const QuantType kv : {QuantType::F32, QuantType::F16, QuantType::BF16})
    for (int32_t n : {2, 3, 5, 8}) {
      if (rope_off[0] == '1' && kv == QuantType::F32) continue;
      ScopedEnv sw("BRISK_NO_CUDA_VERIFY_ROPE", rope_off);
      auto group = Context::create(model, cuda_spec_ctx(kv)), single = Context::create(model, cuda_spec_ctx(kv));
      std::vector<BatchToken> head, tail;
      const int32_t n_head = int32_t(prompt.size()) - n;
      for (int32_t i = 0; i < int32_t(prompt.size()); ++i)
        (i < n_head ? head : tail).push_back({.token = prompt[size_t(i)], .pos = i, .seq = 0, .want_logits = true});
      group->decode(head);
      single->decode(head);
      group->decode(tail);
      const int32_t nv = model->info().n_vocab;
      std::vector<float> rows(size_t(n) * size_t(nv));
      for (int32_t i = 0; i < n; ++i) std::memcpy(rows.data() + size_t(i) * nv, group->logits(i), sizeof(float) * size_t(nv));
      for (int32_t i = 0; i < n; ++i) {
        single->decode({tail[size_t(i)]});
        EXPECT_EQ(std::memcmp(rows.data() + size_t(i) * nv, single->logits(0), sizeof(float) * size_t(nv)), 0)
            << m.name << " (" << quant_type_info(kv).name << " KV, verify rope off " << rope_off << "): row " << i
            << " of a " << n << "-token verify differs from decoding it alone";
      }
    }
  }
}

// Two sequences verified in one step, their tokens interleaved (each token's group rows are
// those of its own sequence up to its position): every row equals that sequence's tokens decoded
// one at a time; steps of 3 tokens (2 + 1: the rope inside the attention) and 7 (4 + 3), and
// with the rope as a launch before the attention.
TEST(CudaSpec, TwoSequenceVerifyRowsEqualOneAtATime) {
  std::string skip;
  auto model = load_for_cuda(std::string(BRISK_SHARED_DATA) + "/models/llama/model-q8_0.gguf", &skip);
  if (!model) GTEST_SKIP() << skip;
  const int32_t nv = model->info().n_vocab;
  const std::vector<int32_t> prompt = cuda_spec_prompt(nv);
  for (const char* rope_off : {"0", "1"})
    for (const QuantType kv : {QuantType::F16, QuantType::BF16})
    for (const int32_t per0 : {2, 4}) {
      ScopedEnv sw("BRISK_NO_CUDA_VERIFY_ROPE", rope_off);
      ContextOptions two = cuda_spec_ctx(kv);
      two.n_seq_max = 2;
      auto group = Context::create(model, two);
      // Sequence 1 has a shorter history: its rows sit at other positions than sequence 0's.
      const int32_t n0 = int32_t(prompt.size()) - 4, n1 = n0 - 7;
      std::vector<BatchToken> head;
      for (int32_t i = 0; i < n0; ++i) head.push_back({.token = prompt[size_t(i)], .pos = i, .seq = 0, .want_logits = false});
      for (int32_t i = 0; i < n1; ++i)
        head.push_back({.token = prompt[size_t(i + 3)], .pos = i, .seq = 1, .want_logits = false});
      head.back().want_logits = true;
      group->decode(head);
      // per0 tokens of sequence 0 and per0 - 1 of sequence 1, interleaved.
      std::vector<BatchToken> step;
      for (int32_t i = 0; i < per0; ++i) {
        step.push_back({.token = prompt[size_t(n0 + i)], .pos = n0 + i, .seq = 0, .want_logits = true});
        if (i < per0 - 1) step.push_back({.token = prompt[size_t(i + 1)], .pos = n1 + i, .seq = 1, .want_logits = true});
      }
      group->decode(step);
      std::vector<std::vector<float>> rows;
      for (size_t i = 0; i < step.size(); ++i) rows.emplace_back(group->logits(int32_t(i)), group->logits(int32_t(i)) + nv);
      for (int32_t sq = 0; sq < 2; ++sq) {
        auto single = Context::create(model, cuda_spec_ctx(kv));
        std::vector<BatchToken> h;
        for (const BatchToken& b : head)
          if (b.seq == sq) h.push_back({.token = b.token, .pos = b.pos, .seq = 0, .want_logits = true});
        single->decode(h);
        for (size_t i = 0; i < step.size(); ++i) {
          if (step[i].seq != sq) continue;
          single->decode({{.token = step[i].token, .pos = step[i].pos, .seq = 0, .want_logits = true}});
          EXPECT_EQ(std::memcmp(rows[i].data(), single->logits(0), sizeof(float) * size_t(nv)), 0)
              << "row " << i << " of " << step.size() << " (sequence " << sq << ", position " << step[i].pos << ", "
              << quant_type_info(kv).name << " KV, verify rope off " << rope_off << ")";
        }
      }
    }
}

TEST(CudaSpec, GreedyIdsEqualPlainDecoding) {
  for (const CudaSpecModel& m : cuda_spec_models()) {
    std::string skip;
    auto model = load_for_cuda(m.path, &skip);
    if (!model) GTEST_SKIP() << skip;
    const std::vector<int32_t> prompt = cuda_spec_prompt(model->info().n_vocab);
    GenerateParams params{.max_tokens = 64, .sampling = {.temperature = 0.0f}};
    auto plain_ctx = Context::create(model, cuda_spec_ctx());
    const GenerateResult plain = generate(*plain_ctx, nullptr, prompt, params);
    const bool mtp = std::string(m.name).find("mtp") != std::string::npos;
    std::vector<int32_t> replayed = prompt;  // the oracle's draft: plain decoding's own output
    replayed.insert(replayed.end(), plain.tokens.begin(), plain.tokens.end());
    // Greedy verify rows pick their ids on the device; the switch copies logits to the host.
    for (const bool host_verify : {false, true}) {
      std::optional<ScopedEnv> sw;
      if (host_verify) sw.emplace("BRISK_NO_SPEC_DEVICE_VERIFY", "1");
      for (const char* kind : {"ngram", "mtp", "oracle"}) {
        if (std::string(kind) == "mtp" && !mtp) continue;
        for (int32_t k : {1, 3, 7}) {
          auto ctx = Context::create(model, cuda_spec_ctx());
          GenerateParams sp = params;
          sp.spec.source = std::string(kind) == "ngram"  ? draft_source_ngram({})
                           : std::string(kind) == "mtp" ? draft_source_mtp({.model = model, .context = cuda_spec_ctx()})
                                                        : draft_source_oracle(replayed);
          sp.spec.draft_max = k;
          sp.spec.adaptive = false;
          const GenerateResult got = generate(*ctx, nullptr, prompt, sp);
          const std::string what = str_cat(m.name, ", ", kind, ", draft-max ", k, host_verify ? ", host verify" : "");
          EXPECT_EQ(got.tokens, plain.tokens) << what;
          EXPECT_GT(got.spec_steps, 0) << what;
          if (std::string(kind) == "oracle") {  // every draft is the target's own token: all kept
            EXPECT_GT(got.spec_drafted, 0) << what;
            EXPECT_EQ(got.spec_accepted, got.spec_drafted) << what;
          }
        }
      }
    }
  }
}

#endif

}  // namespace cuda_spec_test
}  // namespace brisk
