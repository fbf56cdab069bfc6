// `brisk cuda-bench` (cuda_bench.h): the random model of a shape through Model / Context on a
// CUDA backend, timed next to the device's copy bandwidth (decode) or its BF16 GEMM rate
// (prefill) measured in the same run.
#ifdef BRISK_HAVE_CUDA
#include "cli/cuda_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "core/error.h"
#include "core/fp16.h"
#include "formats/gguf.h"
#include "models/forward.h"
#include "models/random_model.h"
#include "models/registry.h"
#include "quant/recipe.h"
#include "runtime/engine_parts.h"
#include "runtime/loaded_model.h"

namespace brisk {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

const LoadedModel& loaded(const CudaBenchModel& m) { return dynamic_cast<const LoadedModel&>(*m.model); }

// Device-to-device copy bandwidth: 2 GiB, best of 5 (read + write bytes per second).
double copy_gbps(int device) {
  auto be = make_cuda_backend(device, false);
  const size_t bytes = size_t(2) << 30;
  void* a = be->alloc(bytes);
  void* b = be->alloc(bytes);
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    be->copy(b, a, bytes);
    best = std::min(best, seconds_since(t0));
  }
  be->free(a);
  be->free(b);
  return 2.0 * double(bytes) / best / 1e9;
}

// The decode step's matmuls alone on the model's weights, grouped by input (all those reading
// h, then all reading the MLP activations) so that the activations are quantized twice per step
// instead of per matmul: the GEMVs' own time. Issued on the backend directly, as one step.
double gemv_only_tok_per_s(const CudaBenchParams& p, const CudaBenchModel& m) {
  const LoadedModel& lm = loaded(m);
  const ModelConfig& c = lm.config();
  const WeightStore& ws = *lm.weights_;
  auto be = make_cuda_backend(p.device, p.graphs);
  const int32_t nb = p.batch;
  const int64_t q_w = c.q_width(), kv_w = c.kv_width();
  auto buf = [&](int64_t cols) {
    return Mat{.data = static_cast<float*>(be->alloc(sizeof(float) * size_t(cols) * size_t(nb))), .rows = nb, .cols = cols};
  };
  const Mat h = buf(c.n_embd), t = buf(c.n_embd), q = buf(q_w), k = buf(kv_w), v = buf(kv_w), attn = buf(q_w),
            gate = buf(c.n_ff), up = buf(c.n_ff), logits = buf(c.n_vocab);
  struct LayerWeights {
    Weight wq, wk, wv, wo, gate, up, down;
  };
  std::vector<LayerWeights> layers;
  for (int il = 0; il < c.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    layers.push_back({.wq = ws.matrix(b + "attn_q.weight", c.n_embd, q_w),
                      .wk = ws.matrix(b + "attn_k.weight", c.n_embd, kv_w),
                      .wv = ws.matrix(b + "attn_v.weight", c.n_embd, kv_w),
                      .wo = ws.matrix(b + "attn_output.weight", q_w, c.n_embd),
                      .gate = ws.matrix(b + "ffn_gate.weight", c.n_embd, c.n_ff),
                      .up = ws.matrix(b + "ffn_up.weight", c.n_embd, c.n_ff),
                      .down = ws.matrix(b + "ffn_down.weight", c.n_ff, c.n_embd)});
  }
  const Weight output = ws.matrix(ws.has("output.weight") ? "output.weight" : "token_embd.weight", c.n_embd, c.n_vocab);
  std::vector<int32_t> ids(static_cast<size_t>(nb), 1), pos(static_cast<size_t>(nb), 0),
      seq(static_cast<size_t>(nb)), rows(static_cast<size_t>(nb));
  for (int32_t b = 0; b < nb; ++b) seq[size_t(b)] = rows[size_t(b)] = b;
  const Mat& xo = q_w == c.n_embd ? h : attn;
  auto step = [&]() {
    be->begin_step({.n_tok = nb, .ids = ids.data(), .pos = pos.data(), .seq = seq.data(), .n_out = nb,
                    .out_rows = rows.data()});
    for (const LayerWeights& l : layers) {
      be->matmul({.out = q, .x = h, .w = l.wq});
      be->matmul({.out = k, .x = h, .w = l.wk});
      be->matmul({.out = v, .x = h, .w = l.wv});
      be->matmul({.out = t, .x = xo, .w = l.wo});
      be->matmul({.out = gate, .x = h, .w = l.gate});
      be->matmul({.out = up, .x = h, .w = l.up});
    }
    be->matmul({.out = logits, .x = h, .w = output});
    for (const LayerWeights& l : layers) be->matmul({.out = t, .x = up, .w = l.down});
    be->end_step();
  };
  for (int i = 0; i < 3; ++i) step();  // warm-up: weight uploads, graph capture
  be->synchronize();
  const auto t0 = Clock::now();
  for (int i = 0; i < p.steps; ++i) step();
  be->synchronize();
  return double(p.steps) * double(nb) / seconds_since(t0);
}

}  // namespace

CudaBenchModel cuda_bench_model(const CudaBenchParams& p) {
  RandomModelParams rp = random_model_preset(p.shape);
  if (p.n_layer > 0) rp.n_layer = p.n_layer;
  // A stored type name puts every matrix in that type; a recipe name (q4_k_m) mixes them as
  // llama.cpp's recipe does.
  if (const auto t = quant_type_from_name(p.type)) {
    rp.type = *t;
  } else {
    BRISK_CHECK(quant_recipe_from_name(p.type).has_value(), "cuda-bench: unknown --type '", p.type,
                "' (a type such as q8_0 or bf16, or a recipe: ", quant_recipe_names(), ")");
    rp.recipe = p.type;
  }
  rp.distinct_rows = 256;
  rp.n_ctx_train = std::max({rp.n_ctx_train, p.n_past + p.steps + 16, p.prefill + 16});
  const auto bytes = random_model_gguf(rp);
  CudaBenchModel m;
  const gguf::File file = gguf::File::parse(bytes);
  bool has_output = false;
  for (const gguf::TensorInfo& t : file.tensors()) has_output = has_output || t.name == "output.weight";
  for (const gguf::TensorInfo& t : file.tensors()) {
    const bool expert = t.name.find("_exps.") != std::string::npos;
    if (expert) m.expert_bytes += double(t.n_bytes);
    // Matrices a token multiplies: every 2-D weight but the embedding table (a lookup, unless it
    // is also the tied output head) and the conv taps; experts apart.
    if (expert && t.ne.size() == 3) m.expert_params += double(t.n_elements);
    const bool embd = t.name == "token_embd.weight";
    if (!expert && t.ne.size() == 2 && t.name.find("ssm_conv1d") == std::string::npos && (!embd || !has_output))
      m.dense_matmul_params += double(t.n_elements);
  }
  m.model = model_load_gguf_bytes(bytes);
  const std::vector<LayerState> states = loaded(m).arch_->layer_states();
  m.kv_layers = states.empty() ? loaded(m).config().n_layer : 0;
  for (const LayerState& l : states) {
    m.kv_layers += l.kv ? 1 : 0;
    for (int64_t f : l.recurrent) m.state_bytes += 4.0 * double(f);
  }
  m.dense_bytes = double(m.model->info().weight_bytes) - m.expert_bytes;
  m.n_embd = rp.n_embd;
  m.n_ff = rp.n_expert > 0 ? rp.n_ff_exp * rp.n_expert_used : rp.n_ff;
  m.expert_share = rp.n_expert > 0 ? double(rp.n_expert_used) / double(rp.n_expert) : 0.0;
  return m;
}

CudaBenchResult cuda_decode_bench(const CudaBenchParams& p, const CudaBenchModel& m) {
  BRISK_CHECK(p.steps > 0 && p.n_past >= 0 && p.batch >= 1, "cuda bench: bad parameters");
  BRISK_CHECK(!(p.matmul_only && m.expert_share > 0.0), "cuda bench: matmuls only is for dense shapes");
  const ModelConfig& c = loaded(m).config();
  CudaBenchResult res;
  res.copy_gbps = copy_gbps(p.device);
  if (p.matmul_only) {
    res.tok_per_s = gemv_only_tok_per_s(p, m);
    res.bytes_per_token = m.dense_bytes / double(p.batch);
    res.achieved_gbps = res.bytes_per_token * res.tok_per_s / 1e9;
    return res;
  }
  constexpr int32_t kWarmup = 3;  // uploads of the weights and constants, graph capture
  const int32_t nb = p.batch;
  const ContextOptions copt{.n_ctx = p.n_past + kWarmup + p.steps + 1, .n_seq_max = nb, .n_batch = 512,
                            .kv_type = p.kv_type};
  std::unique_ptr<Context> ctx;
  if (p.tp > 0) {
    ContextOptions o = copt;
    o.device = "cuda";
    o.tp = p.tp;
    ctx = Context::create(m.model, o);
  } else {
    ctx = context_create_on(m.model, copt, make_cuda_backend(p.device, p.graphs));
  }
  ctx->set_device_greedy(true);  // ids come back, not logits, as a server's greedy decode
  // Each sequence's first n_past positions, the cache its decode steps attend to.
  for (int32_t s = 0; s < nb; ++s) {
    std::vector<BatchToken> prompt;
    for (int32_t i = 0; i < p.n_past; ++i)
      prompt.push_back({.token = (i * 37 + s + 1) % c.n_vocab, .pos = i, .seq = s, .want_logits = false});
    ctx->decode(prompt);
  }
  std::vector<BatchToken> step(static_cast<size_t>(nb));
  auto run = [&](int32_t pos) {
    for (int32_t s = 0; s < nb; ++s) step[size_t(s)] = {.token = 1, .pos = pos, .seq = s, .want_logits = true};
    ctx->decode(step);
  };
  for (int32_t i = 0; i < kWarmup; ++i) run(p.n_past + i);
  const auto t0 = Clock::now();
  for (int32_t i = 0; i < p.steps; ++i) run(p.n_past + kWarmup + i);
  const double secs = seconds_since(t0);
  res.tok_per_s = double(p.steps) * double(nb) / secs;
  // Bytes per token: the weights once per step shared by the batch, each sequence's KV cache
  // (at the mean position of the timed steps) and recurrent state (read and written once).
  const double kv_row = double(quant_row_bytes(p.kv_type, uint64_t(c.kv_width())).value());
  const double kv_bytes = 2.0 * double(m.kv_layers) * double(p.n_past + kWarmup + p.steps / 2) * kv_row +
                          2.0 * m.state_bytes;
  // Experts: the expected share a step touches when each sequence picks n_used of n_expert at
  // random, 1 - (1 - n_used / n_expert)^batch.
  const double touched = m.expert_share > 0.0 ? 1.0 - std::pow(1.0 - m.expert_share, nb) : 0.0;
  res.bytes_per_token = (m.dense_bytes + m.expert_bytes * touched) / double(nb) + kv_bytes;
  res.achieved_gbps = res.bytes_per_token * res.tok_per_s / 1e9;
  return res;
}

double cuda_step_ms(const CudaBenchParams& p, const CudaBenchModel& m, int32_t n_tok) {
  BRISK_CHECK(p.steps > 0 && p.n_past >= 0 && n_tok >= 1 && n_tok <= 64, "cuda bench: bad parameters");
  if (p.matmul_only) {
    BRISK_CHECK(m.expert_share == 0.0, "cuda bench: matmuls only is for dense shapes");
    CudaBenchParams q = p;
    q.batch = n_tok;
    return 1e3 * double(n_tok) / gemv_only_tok_per_s(q, m);
  }
  constexpr int32_t kWarmup = 3;  // uploads of the weights and constants, graph capture
  const ModelConfig& c = loaded(m).config();
  auto ctx = context_create_on(m.model,
                               {.n_ctx = p.n_past + n_tok + 8, .n_seq_max = 1, .n_batch = 512, .kv_type = p.kv_type,
                                .state_checkpoints = true},
                               make_cuda_backend(p.device, p.graphs));
  ctx->set_device_greedy(true);
  std::vector<BatchToken> prompt;
  for (int32_t i = 0; i < p.n_past; ++i)
    prompt.push_back({.token = (i * 37 + 1) % c.n_vocab, .pos = i, .seq = 0, .want_logits = false});
  if (!prompt.empty()) ctx->decode(prompt);
  std::vector<BatchToken> step;
  for (int32_t i = 0; i < n_tok; ++i)
    step.push_back({.token = (i * 53 + 7) % c.n_vocab, .pos = p.n_past + i, .seq = 0, .want_logits = true});
  auto run = [&] {
    ctx->seq_checkpoint(0);
    ctx->decode(step);
    ctx->seq_truncate(0, p.n_past);
  };
  for (int32_t i = 0; i < kWarmup; ++i) run();
  const auto t0 = Clock::now();
  for (int32_t i = 0; i < p.steps; ++i) run();
  return 1e3 * seconds_since(t0) / double(p.steps);
}

CudaPrefillResult cuda_prefill_bench(const CudaBenchParams& p, const CudaBenchModel& m) {
  BRISK_CHECK(p.steps > 0 && p.prefill > 8, "cuda bench: bad parameters");
  const ModelConfig& c = loaded(m).config();
  CudaPrefillResult res;
  const int64_t n = p.prefill;
  // Tensor-core rate: out [n, n_ff] = x [n, n_embd] . w [n_ff, n_embd]^T, random BF16 operands.
  {
    auto be = make_cuda_backend(p.device, false);
    BRISK_CHECK(cuda_has_gemm(*be), "cuda bench: prefill needs the tensor-core GEMM (cuBLAS build, BRISK_NO_CUDA_GEMM unset)");
    const int64_t rows = n, cols = m.n_ff, k = m.n_embd;
    std::mt19937 rng(7);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<uint16_t> pool(size_t(k) * 256);
    for (uint16_t& v : pool) v = f32_to_bf16(d(rng));
    auto fill = [&](int64_t r) {
      auto* dev = static_cast<uint16_t*>(be->alloc(sizeof(uint16_t) * size_t(r * k)));
      for (int64_t i = 0; i < r; i += 256)
        be->copy(dev + size_t(i * k), pool.data(), sizeof(uint16_t) * size_t(std::min<int64_t>(256, r - i) * k));
      return dev;
    };
    uint16_t* x = fill(rows);
    uint16_t* w = fill(cols);
    auto* out = static_cast<float*>(be->alloc(sizeof(float) * size_t(rows * cols)));
    for (int i = 0; i < 3; ++i) cuda_gemm_bf16(*be, x, w, out, rows, cols, k);
    be->synchronize();
    const int reps = 50;
    const auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) cuda_gemm_bf16(*be, x, w, out, rows, cols, k);
    be->synchronize();
    res.gemm_tflops = 2.0 * double(rows) * double(cols) * double(k) * reps / seconds_since(t0) / 1e12;
  }
  auto ctx = context_create_on(m.model,
                               {.n_ctx = int32_t(n) + 8, .n_seq_max = 1, .n_batch = int32_t(n), .kv_type = p.kv_type},
                               make_cuda_backend(p.device, false));
  ctx->set_device_greedy(true);
  std::vector<BatchToken> prompt;
  for (int64_t i = 0; i < n; ++i)
    prompt.push_back({.token = int32_t((i * 37 + 1) % c.n_vocab), .pos = int32_t(i), .seq = 0, .want_logits = i == n - 1});
  auto forward = [&]() {
    ctx->decode(prompt);
    ctx->seq_truncate(0, 0);
  };
  forward();  // warm-up: weight uploads, scratch buffers, cuBLAS heuristics
  const auto t0 = Clock::now();
  for (int i = 0; i < p.steps; ++i) forward();
  const double secs = seconds_since(t0);
  res.tok_per_s = double(n) * p.steps / secs;
  // Matmul FLOPs: every token through the dense matrices and its share of the experts; the lm
  // head for the one output row only.
  const double head = 2.0 * double(c.n_embd) * double(c.n_vocab);
  const double flops = double(n) * (2.0 * (m.dense_matmul_params + m.expert_params * m.expert_share) - head) + head;
  res.matmul_tflops = flops * p.steps / secs / 1e12;
  return res;
}

}  // namespace brisk

#endif  // BRISK_HAVE_CUDA
