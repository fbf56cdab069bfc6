// Every switch of core/flags.def runs: the list is read from flags.def itself, and each CPU
// switch has a workload that reaches its path (rows longer than 1,024 elements, K-quant and
// other formats, prefill of more than 8 tokens, matmuls large enough for the balanced split,
// an F16 KV cache, a tokenizer with NFC). Each workload's output with the switch set is
// compared with the fast path's: bit-identical where the switch's text says the results are
// the same, within tolerance() of the largest logit otherwise. A switch without a
// workload carries the reason (GPU only, a CPU feature this machine lacks, not a fast path).
// A switch added to flags.def without an entry here fails the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/flags.h"
#include "models/random_model.h"
#include "quant/format.h"
#include "quant/types.h"
#include "required_assets.h"
#include "runtime/engine_api.h"
#include "scoped_env.h"
#include "temp_files.h"
#include "text/tokenizer.h"

namespace brisk {
// A named namespace: the unity batches of the asan preset share anonymous ones between files.
namespace kill_switch_test {

struct FlagDef {
  std::string id, env, desc;
  bool text = false;
};

const std::vector<FlagDef>& all_flags() {
  static const std::vector<FlagDef> flags = {
#define BRISK_FLAG(id, env, desc) {#id, env, desc, false},
#define BRISK_FLAG_TEXT(id, env, desc) {#id, env, desc, true},
#include "core/flags.def"
#undef BRISK_FLAG
#undef BRISK_FLAG_TEXT
  };
  return flags;
}

// The switch's own text promises identical results.
bool promises_same(const std::string& desc) {
  return desc.find("results are the same") != std::string::npos || desc.find("same results") != std::string::npos;
}

// Switches of another summation order (SIMD widths, tile layouts, scalar references): the
// largest difference allowed, as a fraction of the largest |logit| of the workload. Float
// weights: the order of float sums (and BF16 / F16 rounding of activations where a kernel
// converts them), measured at most 2e-3 here. Quantized weights: their activations are
// quantized to 8 bits, so a difference in the last bit of a float upstream can move one
// activation by a whole quantization step (1/127 of its block's largest value) and the next
// layer's sums by that much; measured at most 2e-2 here (BRISK_REF_OPS on Q6_K). A path that
// computes something else (a wrong block, scale or row) is off by the size of the logits.
double tolerance(QuantType t) {
  return t == QuantType::F32 || t == QuantType::F16 || t == QuantType::BF16 ? 5e-3 : 4e-2;
}

// One model workload: a random 1-layer model of a shape and weight type.
struct Shape {
  const char* name;
  int32_t n_embd, n_ff, n_head, n_head_kv, head_dim;
};
// Rows of more than 1,024 elements, gate / up / down of 3.3 M weights (Q8_0: 1.7 MiB per
// thread at two threads, past the balanced split's 1 MiB), head_dim 128 (attention tiles).
constexpr Shape kLong{"long", 1280, 2560, 10, 2, 128};
// Rows of at most 1,024 elements (the short-row GEMV), head_dim 64.
constexpr Shape kShort{"short", 512, 1024, 8, 2, 64};

struct Workload {
  Shape shape;
  QuantType type;
  std::string label() const { return std::string(shape.name) + "-" + std::string(quant_type_info(type).name); }
};

constexpr int32_t kThreads = 2;
// Under ASan / UBSan (the asan preset, about ten times slower) each switch runs its first
// workload only: the sanitizers look for memory errors on each path, the release run compares
// every workload.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
constexpr int32_t kPrompt = 24;  // prefill: more than 8 tokens (GEMM, shared prefill input)
constexpr int32_t kDecode = 3;   // then one-token steps (GEMV, attention over the cache)

std::string model_path(const Workload& w) {
  const std::string p = (testing::process_temp_dir() / ("kill_switch_" + w.label() + ".gguf")).string();
  if (!std::filesystem::exists(p)) {
    RandomModelParams rp;
    rp.arch = "qwen3";
    rp.n_vocab = 512;
    rp.n_embd = w.shape.n_embd;
    rp.n_ff = w.shape.n_ff;
    rp.n_head = w.shape.n_head;
    rp.n_head_kv = w.shape.n_head_kv;
    rp.head_dim = w.shape.head_dim;
    rp.n_layer = 1;
    rp.type = w.type;
    rp.seed = 5;
    rp.n_threads = kThreads;
    random_model_write(rp, p);
  }
  return p;
}

// Logits of the last prompt position and of each decode step (fixed ids, so the same path
// runs whatever the logits): [(1 + kDecode) * n_vocab]. The model loads inside, after the
// switch is set: switches read at load (repack) and at context creation (tiles) count.
std::vector<float> run_model(const Workload& w) {
  const std::string path = model_path(w);
  auto model = Model::load({.path = path, .n_threads = kThreads});
  auto ctx = Context::create(model, {.n_ctx = 64, .n_seq_max = 1, .n_batch = 64, .kv_type = QuantType::F16,
                                     .n_threads = kThreads, .device = "cpu"});
  std::vector<BatchToken> batch;
  for (int32_t i = 0; i < kPrompt; ++i)
    batch.push_back({.token = (i * 37 + 11) % 512, .pos = i, .seq = 0, .want_logits = i == kPrompt - 1});
  ctx->decode(batch);
  const int32_t nv = model->info().n_vocab;
  std::vector<float> out(ctx->logits(0), ctx->logits(0) + nv);
  for (int32_t s = 0; s < kDecode; ++s) {
    ctx->decode({{.token = (s * 101 + 7) % 512, .pos = kPrompt + s, .seq = 0, .want_logits = true}});
    out.insert(out.end(), ctx->logits(0), ctx->logits(0) + nv);
  }
  return out;
}

// The tokenizer workload: ids of the fixture corpus (NFC normalizer, byte-level BPE).
std::string tokenizer_dir() { return std::string(BRISK_SHARED_DATA) + "/models/qwen3/hf"; }

std::vector<float> run_tokenizer() {
  auto tok = Tokenizer::from_hf_dir(tokenizer_dir());
  std::ifstream in(std::string(BRISK_FIXTURES) + "/tokenizer/corpus.json");
  const nlohmann::json corpus = nlohmann::json::parse(in);
  std::vector<float> ids;
  for (int rep = 0; rep < 2; ++rep)  // the second pass meets the piece cache warm
    for (const auto& s : corpus["strings"]) {
      for (int32_t id : tok->encode(s.get<std::string>())) ids.push_back(float(id));
      ids.push_back(-1.0f);
    }
  return ids;
}

struct Plan {
  std::vector<Workload> models{};  // model workloads
  bool tokenizer = false;          // the tokenizer workload
  std::string reason{};            // why nothing runs (when models is empty and !tokenizer)
  const char* base_env = nullptr;  // set for both runs: a switch whose path only runs without another
};

// What reaches each switch's path on this machine.
Plan plan_for(const FlagDef& f) {
  const CpuFeatures hw = cpu_features_detected();
  const std::string& id = f.id;
  const std::vector<QuantType> decode_formats = {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q5_0};
  const std::vector<QuantType> kquants = {QuantType::Q4_K, QuantType::Q5_K, QuantType::Q6_K};
  auto on = [](Shape s, const std::vector<QuantType>& ts) {
    std::vector<Workload> v;
    for (QuantType t : ts) v.push_back({s, t});
    return v;
  };
  auto cat = [](std::vector<Workload> a, const std::vector<Workload>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  const std::vector<Workload> broad = cat(on(kLong, {QuantType::F32, QuantType::F16, QuantType::Q8_0, QuantType::Q4_0,
                                                     QuantType::Q4_1, QuantType::Q5_0, QuantType::Q4_K, QuantType::Q6_K}),
                                          on(kShort, {QuantType::Q8_0}));
  if (f.desc.rfind("CUDA", 0) == 0 || id.find("cuda") != std::string::npos || id == "no_device_sampling")
    return {.reason = "GPU only"};
  if (id == "cpu_mask") return {.reason = "a value, not a switch: each ISA level runs the kernel tests in ctest's isa.level.*"};
  if (id == "hub_offline") return {.reason = "not a fast path: the Hub's network policy (tests/cli/test_hub_pull.py)"};
  if (id == "no_amx") return {.reason = "no kernel uses AMX tiles: the switch only skips the probe (core/cpu_features)"};
  if (id == "no_chunked_delta")
    return {.reason = "its kernels run only in linear-attention (hybrid) models, none of this test's shapes: "
                      "HybridState.StepSizesGiveSameLogits runs prompts in one chunk, chunks of 7 and token by token"};
  if (id == "no_simd_delta" || id == "no_fused_delta_step")
    return {.reason = "its kernels run only in linear-attention (hybrid) models, none of this test's shapes: "
                      "OpsDeltaNet.* compares every build of them, switched off or not, with the references"};
  if (id == "no_spec_device_verify")
    return {.reason = "GPU only: the CPU backend has no device sampling; CudaSpec.GreedyIdsEqualPlainDecoding "
                      "runs greedy speculation with and without it"};
  if (id == "no_spec")
    return {.reason = "not a kernel: speculative decoding compared with plain decoding, the path this switch "
                      "selects, in Spec.GreedyIdsEqualPlainDecoding and tests/cli/speculative.sh"};
  if (id == "no_kv_window")
    return {.reason = "it releases blocks only for sliding-window layers shorter than the sequence, none of this "
                      "test's shapes: Gemma4Ref.WindowedCacheEqualsWholeCache compares the logits of every position "
                      "with and without it"};
  if (id == "no_blocked_attention" || id == "no_fast_gelu")
    return {.reason = "its kernels run only in encoder (speech) models, none of this test's shapes: "
                      "EncoderOps.* compares them, switched off or not, with the references"};
  if (id == "no_fast_softcap")
    return {.reason = "its kernel runs only in models with a final logit softcap (Gemma), none of this test's "
                      "shapes: OpsSoftcap.FastPathWithinToleranceOfReference compares it, switched off or not, "
                      "with the reference"};
  if (id == "no_float_gemm")
    return hw.avx512 ? Plan{.models = cat(on(kLong, {QuantType::F32, QuantType::F16}), on(kShort, {QuantType::F32}))}
                     : Plan{.reason = "no AVX-512 on this CPU (the float GEMM it switches is AVX-512)"};
  if (id == "no_tokenizer_cache" || id == "no_fast_nfc") return {.tokenizer = true};
  if (id == "no_simd" || id == "ref_ops" || id == "no_simd_quantize_act" || id == "profile" || id == "pin_threads" ||
      id == "no_hugepages")
    return {.models = broad};
  if (id == "no_avx2")
    return hw.avx2 ? Plan{.models = broad} : Plan{.reason = "no AVX2 on this CPU"};
  if (id == "no_avx_vnni")  // its kernels run on CPUs without AVX-512: compared with AVX-512 off
    return hw.avx_vnni ? Plan{.models = on(kLong, {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_K}), .base_env = "BRISK_NO_AVX512"} : Plan{.reason = "no AVX-VNNI on this CPU"};
  if (id == "no_avx512")
    return hw.avx512 ? Plan{.models = broad} : Plan{.reason = "no AVX-512 on this CPU"};
  if (id == "no_avx512_vbmi")
    return hw.avx512_vbmi ? Plan{.models = on(kLong, {QuantType::Q4_0, QuantType::Q5_0, QuantType::Q4_K, QuantType::Q6_K})}
                          : Plan{.reason = "no AVX-512 VBMI on this CPU"};
  if (id == "no_avx512_kquant" || id == "no_kquant_gemv")
    return hw.avx512 ? Plan{.models = on(kLong, kquants)} : Plan{.reason = "no AVX-512 on this CPU"};
  if (id == "no_attn_pairs" || id == "no_attn_tiles")
    return hw.avx512 ? Plan{.models = cat(on(kLong, {QuantType::F32}), on(kShort, {QuantType::F32}))}
                     : Plan{.reason = "no AVX-512 on this CPU (the attention kernels it switches are AVX-512)"};
  if (id == "no_repack") return {.models = cat(on(kLong, {QuantType::Q4_0, QuantType::Q5_0}), on(kShort, {QuantType::Q4_0}))};
  if (id == "no_gemv_token_passes")
    return {.reason = "it splits only GEMVs of 7 or 8 tokens over rows of more than 4096 elements, none of this test's "
                      "shapes: QuantRepack.Q8GemvMultiTokenIsBitIdenticalToOneToken compares it, switched off or not, "
                      "with one token at a time"};
  if (id == "no_gemv_short_rows") return {.models = on(kShort, decode_formats)};
  if (id == "no_gemv_long_rows" || id == "no_prepared_reuse") return {.models = on(kLong, decode_formats)};
  if (id == "no_joint_split" || id == "no_balanced_split")
    return {.models = cat(on(kLong, {QuantType::Q8_0, QuantType::Q4_K}), on(kShort, {QuantType::Q8_0}))};
  if (id == "no_gemm" || id == "no_shared_prefill_input")
    return {.models = on(kLong, {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_K, QuantType::F16})};
  if (id.rfind("no_simd_dot_", 0) == 0) {
    std::string name = id.substr(std::string("no_simd_dot_").size());
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return char(std::toupper(c)); });
    const auto t = quant_type_from_name(name);
    if (!t) return {.reason = "no weight format named " + name};
    if (format_traits(*t).quantize_row_ref == nullptr)
      return {.reason = "no reference quantizer writes " + name +
                        " weights, so no model of it is made here; KernelsDot.* compares its SIMD dot products"
                        " with the scalar one that this switch selects"};
    return {.models = on(kLong, {*t})};
  }
  return {};  // no entry: fails below
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}

TEST(KillSwitches, EveryCpuSwitchRunsAndKeepsItsPromise) {
  std::map<std::string, std::vector<float>> base_model;  // fast path's output per workload
  std::vector<float> base_tok;
  int exercised = 0, explained = 0;
  for (const FlagDef& f : all_flags()) {
    Plan plan = plan_for(f);
    if (kSanitized && plan.models.size() > 1) plan.models.resize(1);
    if (plan.models.empty() && !plan.tokenizer) {
      EXPECT_FALSE(plan.reason.empty()) << f.env << " has no workload and no reason in test_kill_switches.cpp";
      std::printf("  %-32s %s\n", f.env.c_str(), plan.reason.c_str());
      ++explained;
      continue;
    }
    const bool same = promises_same(f.desc) || f.id == "profile" || f.id == "pin_threads" || f.id == "no_hugepages" ||
                      f.id == "no_tokenizer_cache" || f.id == "no_fast_nfc";
    double worst = 0;
    std::string where;
    if (plan.tokenizer) {
      if (!std::filesystem::exists(tokenizer_dir() + "/tokenizer.json")) {
        if (test::assets_required()) ADD_FAILURE() << "required test asset missing: " << tokenizer_dir();
        std::printf("  %-32s not exercised: %s is missing (shared data)\n", f.env.c_str(), tokenizer_dir().c_str());
        ++explained;
        continue;
      }
      if (base_tok.empty()) base_tok = run_tokenizer();
      std::vector<float> got;
      {
        ScopedEnv sw(f.env.c_str(), "1");
        got = run_tokenizer();
      }
      EXPECT_EQ(got, base_tok) << f.env << ": other token ids";
      where = "tokenizer";
    }
    for (const Workload& w : plan.models) {
      const std::string key = w.label() + (plan.base_env ? std::string("+") + plan.base_env : "");
      std::optional<ScopedEnv> base_env;
      if (plan.base_env) base_env.emplace(plan.base_env, "1");
      if (!base_model.count(key)) base_model[key] = run_model(w);
      const std::vector<float>& base = base_model[key];
      std::vector<float> got;
      {
        ScopedEnv sw(f.env.c_str(), "1");
        got = run_model(w);
      }
      ASSERT_EQ(got.size(), base.size()) << f.env << " on " << key;
      double diff = 0;
      size_t at = 0;
      for (size_t i = 0; i < got.size(); ++i)
        if (double(std::fabs(got[i] - base[i])) > diff) diff = double(std::fabs(got[i] - base[i])), at = i;
      // Which step: 0 is the prompt's last position (prefill), 1.. the one-token steps.
      const size_t step = at / (got.size() / (1 + kDecode));
      const double rel = diff / std::max(1e-30, max_abs(base));
      worst = std::max(worst, rel);
      if (same)
        EXPECT_EQ(diff, 0.0) << f.env << " on " << key << " promises the same results; max abs diff " << diff
                             << " at step " << step;
      else
        EXPECT_LE(rel, tolerance(w.type)) << f.env << " on " << key << ": max abs diff " << diff << " ("
                                           << rel << " of the largest logit) at step " << step;
      where += (where.empty() ? "" : " ") + key;
    }
    std::printf("  %-32s exercised (%s; %s: %.2g of the largest logit) on %s\n", f.env.c_str(),
                same ? "bit-identical" : "tolerance", same ? "max diff" : "max diff", worst, where.c_str());
    ++exercised;
  }
  std::printf("kill switches: %d exercised, %d not (reasons above), %zu in flags.def\n", exercised, explained,
              all_flags().size());
  EXPECT_EQ(size_t(exercised + explained), all_flags().size());
}

}  // namespace kill_switch_test
}  // namespace brisk
