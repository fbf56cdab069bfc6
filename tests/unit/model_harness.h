// The model-reference harness shared by the model tests: a fixture's transformers reference
// (ref.json: prompt ids, float32 last logits, per-position argmax, top-5, greedy continuation),
// the exact check (logits within 1e-4 with an F32 KV cache, identical argmax and 32 greedy ids)
// and the quantized check (top-5 up to near ties, teacher-forced argmax where the float model's
// margin exceeds twice the measured error, in the manner of vLLM's check_logprobs_close).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model_fixtures.h"
#include "backend/kv_table.h"
#include "core/error.h"
#include "core/flags.h"
#include "formats/json_file.h"
#include "runtime/engine_api.h"

namespace brisk::test {

struct Ref {
  std::vector<int32_t> input_ids;
  std::vector<float> last_logits;
  std::vector<int32_t> argmax;
  std::vector<int32_t> top5;
  std::vector<int32_t> greedy;
  std::string prompt;
};

inline Ref load_ref_file(const std::string& path) {
  const nlohmann::json j = read_json_file(path);
  Ref r;
  r.input_ids = j.at("input_ids").get<std::vector<int32_t>>();
  r.last_logits = j.at("last_logits").get<std::vector<float>>();
  r.argmax = j.at("argmax_per_position").get<std::vector<int32_t>>();
  r.top5 = j.at("top5_last").get<std::vector<int32_t>>();
  r.greedy = j.at("greedy_continuation").get<std::vector<int32_t>>();
  r.prompt = j.value("prompt", std::string());
  return r;
}

inline Ref load_ref(const std::string& arch) { return load_ref_file(model_dir(arch) + "/ref.json"); }

// The quantized top-5 agrees with the reference top-5 up to near ties: every reference top-5
// token clearly above the 6th (by more than twice the logit error) is in ours, and each of ours
// is within twice the error of the reference's 5th.

inline int32_t argmax(const float* x, int32_t n) { return int32_t(std::max_element(x, x + n) - x); }

inline std::vector<int32_t> topk(const float* x, int32_t n, int k) {
  std::vector<int32_t> idx(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) idx[size_t(i)] = i;
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) { return x[a] > x[b]; });
  idx.resize(size_t(k));
  return idx;
}

inline void expect_top5_close(const float* got, const std::vector<float>& ref, const std::string& what) {
  const int32_t n = int32_t(ref.size());
  float err = 0.0f;
  for (int32_t i = 0; i < n; ++i) err = std::max(err, std::fabs(got[i] - ref[size_t(i)]));
  const auto r6 = topk(ref.data(), n, 6);
  const auto g5 = topk(got, n, 5);
  for (int k = 0; k < 5; ++k) {
    if (ref[size_t(r6[size_t(k)])] > ref[size_t(r6[5])] + 2.0f * err) {
      EXPECT_NE(std::find(g5.begin(), g5.end(), r6[size_t(k)]), g5.end())
          << what << ": reference top-5 token " << r6[size_t(k)] << " missing (logit error " << err << ")";
    }
    EXPECT_GE(ref[size_t(g5[size_t(k)])], ref[size_t(r6[4])] - 2.0f * err)
        << what << ": token " << g5[size_t(k)] << " is not near the reference top-5";
  }
  EXPECT_LT(err, 0.5f) << what << ": logits far from the reference";
}

inline std::vector<BatchToken> prompt_batch(const std::vector<int32_t>& ids, int32_t seq, int32_t start, bool all_logits) {
  std::vector<BatchToken> b;
  for (size_t i = 0; i < ids.size(); ++i)
    b.push_back({.token = ids[i], .pos = start + int32_t(i), .seq = seq,
                 .want_logits = all_logits || i + 1 == ids.size()});
  return b;
}

inline std::unique_ptr<Context> make_ctx(const std::shared_ptr<Model>& m, QuantType kv = QuantType::F32,
                                         int32_t n_batch = 512, int32_t n_seq = 1,
                                         int32_t kv_block_size = kKvDefaultBlockSize) {
  return Context::create(m, {.n_ctx = 256, .n_seq_max = n_seq, .n_batch = n_batch, .kv_type = kv, .n_threads = 2,
                             .kv_block_size = kv_block_size});
}

// Full-precision check: logits, per-position argmax, 32 greedy tokens (KV cache blocks of
// kv_block_size positions: small blocks make sliding-window layers release and reuse some).
inline void check_exact_ref(const Ref& ref, const std::string& arch, const std::string& path,
                            int32_t kv_block_size = kKvDefaultBlockSize) {
  auto model = Model::load({.path = path});
  EXPECT_EQ(model->info().n_vocab, int32_t(ref.last_logits.size()));
  auto ctx = make_ctx(model, QuantType::F32, 512, 1, kv_block_size);
  ctx->decode(prompt_batch(ref.input_ids, 0, 0, true));
  const int32_t nv = ctx->n_vocab();
  const int32_t n = int32_t(ref.input_ids.size());
  float max_diff = 0.0f;
  for (int32_t i = 0; i < nv; ++i) max_diff = std::max(max_diff, std::fabs(ctx->logits(n - 1)[i] - ref.last_logits[size_t(i)]));
  EXPECT_LT(max_diff, 1e-4f) << arch << " from " << path;
  for (int32_t p = 0; p < n; ++p) EXPECT_EQ(argmax(ctx->logits(p), nv), ref.argmax[size_t(p)]) << "position " << p;
  std::vector<int32_t> gen;
  int32_t tok = argmax(ctx->logits(n - 1), nv);
  for (size_t i = 0; i < ref.greedy.size(); ++i) {
    gen.push_back(tok);
    if (gen.size() == ref.greedy.size()) break;
    ctx->decode({{.token = tok, .pos = n + int32_t(i), .seq = 0, .want_logits = true}});
    tok = argmax(ctx->logits(0), nv);
  }
  EXPECT_EQ(gen, ref.greedy) << arch << " from " << path;
  if (const Tokenizer* t = model->tokenizer(); t && !ref.prompt.empty()) {
    EXPECT_EQ(t->encode(ref.prompt), ref.input_ids);
  }
}

inline void check_exact(const std::string& arch, const std::string& path) { check_exact_ref(load_ref(arch), arch, path); }

// Quantized check against the float model, teacher-forced on the reference continuation:
// the top-5 at the last prompt position match as a set; at each step the quantized argmax
// must equal the reference token unless the float model's top-2 margin there is within
// twice the measured logit error of that step (a near tie the quantization may flip); more
// than min_checked steps must have been clear.
inline void check_quantized_ref(const Ref& ref, const std::string& arch, const std::string& float_path,
                                const ModelLoadOptions& quant_opts, int32_t min_checked = 16) {
  auto fmodel = Model::load({.path = float_path});
  auto qmodel = Model::load(quant_opts);
  auto fctx = make_ctx(fmodel), qctx = make_ctx(qmodel);
  const int32_t nv = fctx->n_vocab();
  std::vector<int32_t> seq = ref.input_ids;
  fctx->decode(prompt_batch(seq, 0, 0, false));
  qctx->decode(prompt_batch(seq, 0, 0, false));
  expect_top5_close(qctx->logits(0), ref.last_logits, arch + " top-5 at the last prompt position");
  int32_t n_checked = 0;
  for (size_t i = 0; i < ref.greedy.size(); ++i) {
    const float* fl = fctx->logits(0);
    const float* ql = qctx->logits(0);
    float err = 0.0f;
    for (int32_t v = 0; v < nv; ++v) err = std::max(err, std::fabs(fl[v] - ql[v]));
    const auto f2 = topk(fl, nv, 2);
    const float margin = fl[f2[0]] - fl[f2[1]];
    if (margin > 2.0f * err) {
      EXPECT_EQ(argmax(ql, nv), ref.greedy[i]) << arch << " step " << i << " margin " << margin << " err " << err;
      ++n_checked;
    }
    const int32_t pos = int32_t(ref.input_ids.size() + i);
    fctx->decode({{.token = ref.greedy[i], .pos = pos, .seq = 0, .want_logits = true}});
    qctx->decode({{.token = ref.greedy[i], .pos = pos, .seq = 0, .want_logits = true}});
  }
  EXPECT_GT(n_checked, min_checked) << "too few steps had a margin above the quantization error";
}

inline void check_quantized(const std::string& arch, const ModelLoadOptions& quant_opts, int32_t min_checked = 16) {
  check_quantized_ref(load_ref(arch), arch, model_dir(arch) + "/hf", quant_opts, min_checked);
}

// Logits of every position of ids (one sequence from position 0) in a fresh context; with a
// kill switch (e.g. "BRISK_REF_OPS") set while the context is created when env_switch is given.
inline std::vector<float> all_logits(const std::shared_ptr<Model>& m, const std::vector<int32_t>& ids,
                                     const ContextOptions& opt, const char* env_switch = nullptr) {
  if (env_switch) setenv(env_switch, "1", 1);
  flags_reload();
  auto ctx = Context::create(m, opt);
  if (env_switch) unsetenv(env_switch);
  flags_reload();
  ctx->decode(prompt_batch(ids, 0, 0, true));
  std::vector<float> all;
  for (int32_t i = 0; i < int32_t(ids.size()); ++i) all.insert(all.end(), ctx->logits(i), ctx->logits(i) + ctx->n_vocab());
  return all;
}

// Loading `path` fails with an error whose message contains `needle`.
inline void expect_load_error(const std::string& path, const std::string& needle, const std::string& what) {
  try {
    Model::load({.path = path});
    ADD_FAILURE() << "accepted " << what;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace brisk::test
