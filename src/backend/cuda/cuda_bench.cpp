// Decode benchmark of the CUDA backend (see cuda_bench.h). Weight matrices are filled from a
// pool of 256 host-quantized random rows (the values do not matter for timing, the bytes
// do: every layer has its own device copy), so the setup costs seconds, not a GGUF write.
#include "backend/cuda/cuda_bench.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <cmath>
#include <random>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/kv_table.h"
#include "core/error.h"
#include "core/fp16.h"
#include "kernels/cpu/ops.h"

namespace brisk {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

class WeightMaker {
 public:
  WeightMaker(Backend& be, QuantType t) : be_(be), type_(t) {}

  Weight make(int64_t n_out, int64_t n_in) {
    const size_t rb = size_t(quant_row_bytes(type_, uint64_t(n_in)).value());
    std::vector<uint8_t>& pool = pool_for(n_in, rb);
    auto* dev = static_cast<uint8_t*>(be_.alloc(rb * size_t(n_out)));
    for (int64_t r = 0; r < n_out; r += kPoolRows) {
      const int64_t n = std::min<int64_t>(kPoolRows, n_out - r);
      be_.copy(dev + size_t(r) * rb, pool.data(), size_t(n) * rb);
    }
    cuda_mark_constant(be_, dev, rb * size_t(n_out));
    bytes_ += double(rb) * double(n_out);
    return Weight{.type = type_, .n_in = n_in, .n_out = n_out, .row_bytes = rb, .data = dev};
  }
  // n views [n_out, n_in] into one allocation, as a GGUF file stacks a layer's experts.
  std::vector<Weight> make_stacked(int n, int64_t n_out, int64_t n_in) {
    const Weight all = make(int64_t(n) * n_out, n_in);
    std::vector<Weight> v;
    for (int e = 0; e < n; ++e)
      v.push_back(Weight{.type = type_, .n_in = n_in, .n_out = n_out, .row_bytes = all.row_bytes,
                         .data = static_cast<const uint8_t*>(all.data) + all.row_bytes * size_t(n_out) * size_t(e)});
    return v;
  }
  double bytes() const { return bytes_; }

 private:
  static constexpr int64_t kPoolRows = 256;
  std::vector<uint8_t>& pool_for(int64_t n_in, size_t rb) {
    auto& pool = pools_[n_in];
    if (!pool.empty()) return pool;
    pool.resize(rb * size_t(kPoolRows));
    std::mt19937 rng(static_cast<uint32_t>(n_in));
    std::normal_distribution<float> d(0.0f, 1.0f / std::sqrt(float(n_in)));
    std::vector<float> row(static_cast<size_t>(n_in));
    for (int64_t r = 0; r < kPoolRows; ++r) {
      for (float& v : row) v = d(rng);
      cpu::row_from_f32(type_, row.data(), pool.data() + size_t(r) * rb, n_in);
    }
    return pool;
  }
  Backend& be_;
  QuantType type_;
  std::map<int64_t, std::vector<uint8_t>> pools_;
  double bytes_ = 0.0;
};

struct Layer {
  Weight wq, wk, wv, wo, gate, up, down;
  Weight router;                            // MoE: [n_expert, n_embd] F32
  std::vector<Weight> e_gate, e_up, e_down; // MoE: n_expert views each
  KvView k, v;
};

// The formats' weight makers: dense matrices, Q6_K (Q4_K_M's mixture), F32 routers, and the
// experts apart, so that bytes per token count only the experts a step touches.
struct Makers {
  WeightMaker wm, wm6, f32, experts, experts6;
  Makers(Backend& be, const CudaBenchParams& p)
      : wm(be, p.q4_k_m ? QuantType::Q4_K : p.type), wm6(be, QuantType::Q6_K), f32(be, QuantType::F32),
        experts(be, p.q4_k_m ? QuantType::Q4_K : p.type), experts6(be, QuantType::Q6_K) {}
  double dense_bytes() const { return wm.bytes() + wm6.bytes() + f32.bytes(); }
  double expert_bytes() const { return experts.bytes() + experts6.bytes(); }
};

// The layers' weights (Q4_K_M: llama.cpp's Q6_K layers for attn_v and ffn_down) and an F16 / BF16
// paged KV cache of `cap` positions for `n_seq` sequences, blocks of kKvDefaultBlockSize, the
// sequences' blocks interleaved through the pool (as a serving cache holds them).
std::vector<Layer> make_layers(Backend& be, const CudaBenchParams& p, Makers& mk, int64_t cap, int32_t n_seq) {
  WeightMaker& wm = mk.wm;
  const int64_t q_w = int64_t(p.n_head) * p.head_dim, kv_w = int64_t(p.n_head_kv) * p.head_dim;
  const int32_t bs = kKvDefaultBlockSize;
  const int64_t per_seq = (cap + bs - 1) / bs;
  const std::vector<int32_t> table = kv_block_table(n_seq, per_seq, true);
  auto* dev_table = static_cast<int32_t*>(be.alloc(sizeof(int32_t) * table.size()));
  be.copy(dev_table, table.data(), sizeof(int32_t) * table.size());
  const size_t pool_rows = size_t(per_seq) * size_t(n_seq) * size_t(bs);
  std::vector<Layer> layers(static_cast<size_t>(p.n_layer));
  for (int i = 0; i < p.n_layer; ++i) {
    Layer& l = layers[size_t(i)];
    const int n = p.n_layer;
    const bool more_bits = i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
    WeightMaker& vd = p.q4_k_m && more_bits ? mk.wm6 : wm;
    l.wq = wm.make(q_w, p.n_embd);
    l.wk = wm.make(kv_w, p.n_embd);
    l.wv = vd.make(kv_w, p.n_embd);
    l.wo = wm.make(p.n_embd, q_w);
    if (p.n_expert > 0) {
      l.router = mk.f32.make(p.n_expert, p.n_embd);
      l.e_gate = mk.experts.make_stacked(p.n_expert, p.n_ff_exp, p.n_embd);
      l.e_up = mk.experts.make_stacked(p.n_expert, p.n_ff_exp, p.n_embd);
      l.e_down = (p.q4_k_m && more_bits ? mk.experts6 : mk.experts).make_stacked(p.n_expert, p.n_embd, p.n_ff_exp);
    } else {
      l.gate = wm.make(p.n_ff, p.n_embd);
      l.up = wm.make(p.n_ff, p.n_embd);
      l.down = vd.make(p.n_embd, p.n_ff);
    }
    const size_t rb = size_t(quant_row_bytes(p.kv_type, uint64_t(kv_w)).value());
    l.k = KvView{.type = p.kv_type, .data = be.alloc(rb * pool_rows), .width = kv_w, .row_bytes = rb,
                 .capacity = cap, .n_seq = n_seq, .block_size = bs, .n_blocks = per_seq * n_seq,
                 .table = nullptr, .device_table = dev_table, .table_stride = per_seq};
    l.v = l.k;
    l.v.data = be.alloc(rb * pool_rows);
  }
  return layers;
}

}  // namespace

CudaBenchResult cuda_decode_bench(const CudaBenchParams& p) {
  BRISK_CHECK(p.n_head % p.n_head_kv == 0 && p.steps > 0 && p.n_past >= 0 && p.batch >= 1, "cuda bench: bad parameters");
  BRISK_CHECK(!(p.matmul_only && p.n_expert > 0), "cuda bench: matmuls only is for dense shapes");
  auto be = make_cuda_backend(p.device, p.graphs);
  const int32_t nb = p.batch;
  CudaBenchResult res;

  // Copy bandwidth: 2 GiB device to device, best of 5.
  {
    const size_t bytes = size_t(2) << 30;
    void* a = be->alloc(bytes);
    void* b = be->alloc(bytes);
    double best = 1e30;
    for (int i = 0; i < 5; ++i) {
      const auto t0 = Clock::now();
      be->copy(b, a, bytes);
      best = std::min(best, seconds_since(t0));
    }
    res.copy_gbps = 2.0 * double(bytes) / best / 1e9;
    be->free(a);
    be->free(b);
  }

  const int64_t q_w = int64_t(p.n_head) * p.head_dim, kv_w = int64_t(p.n_head_kv) * p.head_dim;
  const int64_t cap = p.n_past + p.steps + 8;
  Makers mk(*be, p);
  const std::vector<Layer> layers = make_layers(*be, p, mk, cap, nb);
  const Weight output = (p.q4_k_m ? mk.wm6 : mk.wm).make(p.n_vocab, p.n_embd);  // also the embedding table (one row read)
  std::vector<float> ones(size_t(std::max<int64_t>(p.n_embd, p.head_dim)), 1.0f);
  RopeTable rope{.n_rot = p.head_dim, .inv_freq = {}};
  for (int i = 0; i < p.head_dim / 2; ++i) rope.inv_freq.push_back(std::pow(500000.0f, -2.0f * float(i) / float(p.head_dim)));

  // [batch, cols] activations; sequence b decodes at position pos[b] = n_past + step.
  auto buf = [&](int64_t cols) {
    return Mat{.data = static_cast<float*>(be->alloc(sizeof(float) * size_t(cols) * size_t(nb))), .rows = nb, .cols = cols};
  };
  const int64_t ff = std::max<int64_t>({p.n_ff, p.n_ff_exp, 1});
  const Mat x = buf(p.n_embd), h = buf(p.n_embd), t = buf(p.n_embd), q = buf(q_w), k = buf(kv_w), v = buf(kv_w),
            attn = buf(q_w), gate = buf(ff), up = buf(ff), logits = buf(p.n_vocab),
            router = buf(std::max<int32_t>(p.n_expert, 1));
  const size_t n_seq = static_cast<size_t>(nb);
  std::vector<int32_t> ids(n_seq, 1), seqs(n_seq), poss(n_seq, 0), out_rows(n_seq);
  for (int32_t b = 0; b < nb; ++b) seqs[size_t(b)] = out_rows[size_t(b)] = b;
  const int32_t* id = ids.data();
  const int32_t* seq = seqs.data();
  const int32_t* pos = poss.data();
  const float scale = 1.0f / std::sqrt(float(p.head_dim));

  // The FFN of layer l on h into t: dense, or the router + the experts.
  auto ffn = [&](const Layer& l, const Mat& hn) {
    if (p.n_expert > 0) {
      be->matmul({.out = router, .x = hn, .w = l.router});
      be->moe({.out = t, .x = hn, .logits = router, .gate = l.e_gate.data(), .up = l.e_up.data(),
               .down = l.e_down.data(), .n_expert = p.n_expert, .n_used = p.n_expert_used});
      return;
    }
    be->matmul({.out = gate, .x = hn, .w = l.gate});
    be->matmul({.out = up, .x = hn, .w = l.up});
    be->gated_act({.out = gate, .gate = gate, .up = up});
    be->matmul({.out = t, .x = gate, .w = l.down});
  };

  // The decode step. With matmul_only: the same matmuls, grouped by input (all those reading
  // h, then all reading the gate activations) so that the activations are quantized twice per
  // step instead of per matmul: the time is the GEMV's own.
  auto step = [&]() {
    be->begin_step({.n_tok = nb, .ids = id, .pos = pos, .seq = seq, .n_out = nb, .out_rows = out_rows.data()});
    if (p.matmul_only) {
      const Mat& xo = q_w == p.n_embd ? h : attn;
      for (const Layer& l : layers) {
        be->matmul({.out = q, .x = h, .w = l.wq});
        be->matmul({.out = k, .x = h, .w = l.wk});
        be->matmul({.out = v, .x = h, .w = l.wv});
        be->matmul({.out = t, .x = xo, .w = l.wo});
        be->matmul({.out = gate, .x = h, .w = l.gate});
        be->matmul({.out = up, .x = h, .w = l.up});
      }
      be->matmul({.out = logits, .x = h, .w = output});
      for (const Layer& l : layers) be->matmul({.out = t, .x = up, .w = l.down});
      be->end_step();
      return;
    }
    be->embedding({.out = x, .table = output, .ids = id});
    for (const Layer& l : layers) {
      be->rms_norm({.out = h, .x = x, .weight = ones.data()});
      be->matmul({.out = q, .x = h, .w = l.wq});
      be->matmul({.out = k, .x = h, .w = l.wk});
      be->matmul({.out = v, .x = h, .w = l.wv});
      be->rope({.x = q, .pos = pos, .n_head = p.n_head, .head_dim = p.head_dim, .table = &rope});
      be->rope({.x = k, .pos = pos, .n_head = p.n_head_kv, .head_dim = p.head_dim, .table = &rope});
      be->kv_store({.k = k, .v = v, .k_cache = l.k, .v_cache = l.v, .seq = seq, .pos = pos});
      be->attention({.out = attn, .q = q, .k_cache = l.k, .v_cache = l.v, .seq = seq, .pos = pos,
                     .n_head = p.n_head, .n_head_kv = p.n_head_kv, .head_dim = p.head_dim, .scale = scale});
      be->matmul({.out = t, .x = attn, .w = l.wo});
      be->add({.out = x, .a = x, .b = t});
      be->rms_norm({.out = h, .x = x, .weight = ones.data()});
      ffn(l, h);
      be->add({.out = x, .a = x, .b = t});
    }
    be->rms_norm({.out = h, .x = x, .weight = ones.data()});
    be->matmul({.out = logits, .x = h, .w = output});
    be->end_step();
  };

  std::fill(poss.begin(), poss.end(), p.n_past);
  for (int i = 0; i < 3; ++i) step();  // warm-up: uploads of the small constants, graph capture
  be->synchronize();
  const auto t0 = Clock::now();
  for (int i = 0; i < p.steps; ++i) {
    std::fill(poss.begin(), poss.end(), p.n_past + i);
    step();
  }
  be->synchronize();
  const double secs = seconds_since(t0);
  res.tok_per_s = double(p.steps) * double(nb) / secs;
  // Bytes per token: the weights once per step shared by the batch, each sequence's KV cache.
  const double kv_row = double(quant_row_bytes(p.kv_type, uint64_t(kv_w)).value());  // bytes of one K or V row
  const double kv_bytes = p.matmul_only ? 0.0 : 2.0 * double(p.n_layer) * double(p.n_past + p.steps / 2) * kv_row;
  // Experts: the expected share a step touches when each sequence picks n_used of n_expert at
  // random, 1 - (1 - n_used / n_expert)^batch.
  const double touched = p.n_expert > 0 ? 1.0 - std::pow(1.0 - double(p.n_expert_used) / p.n_expert, nb) : 0.0;
  res.bytes_per_token = (mk.dense_bytes() + mk.expert_bytes() * touched) / double(nb) + kv_bytes;
  res.achieved_gbps = res.bytes_per_token * res.tok_per_s / 1e9;
  return res;
}

CudaPrefillResult cuda_prefill_bench(const CudaBenchParams& p) {
  BRISK_CHECK(p.n_head % p.n_head_kv == 0 && p.steps > 0 && p.prefill > 8, "cuda bench: bad parameters");
  auto be = make_cuda_backend(p.device, false);
  BRISK_CHECK(cuda_has_gemm(*be), "cuda bench: prefill needs the tensor-core GEMM (cuBLAS build, BRISK_NO_CUDA_GEMM unset)");
  CudaPrefillResult res;
  const int64_t n = p.prefill;

  // Tensor-core rate: out [n, n_ff] = x [n, n_embd] . w [n_ff, n_embd]^T, random BF16 operands.
  {
    const int64_t m = n, nn = cuda_bench_gemm_cols(p), k = p.n_embd;
    std::mt19937 rng(7);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<uint16_t> pool(size_t(k) * 256);
    for (uint16_t& v : pool) v = f32_to_bf16(d(rng));
    auto fill = [&](int64_t rows) {
      auto* dev = static_cast<uint16_t*>(be->alloc(sizeof(uint16_t) * size_t(rows * k)));
      for (int64_t r = 0; r < rows; r += 256)
        be->copy(dev + size_t(r * k), pool.data(), sizeof(uint16_t) * size_t(std::min<int64_t>(256, rows - r) * k));
      return dev;
    };
    uint16_t* x = fill(m);
    uint16_t* w = fill(nn);
    auto* out = static_cast<float*>(be->alloc(sizeof(float) * size_t(m * nn)));
    for (int i = 0; i < 3; ++i) cuda_gemm_bf16(*be, x, w, out, m, nn, k);
    be->synchronize();
    const int reps = 50;
    const auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) cuda_gemm_bf16(*be, x, w, out, m, nn, k);
    be->synchronize();
    res.gemm_tflops = 2.0 * double(m) * double(nn) * double(k) * reps / seconds_since(t0) / 1e12;
    be->free(x);
    be->free(w);
    be->free(out);
  }

  const int64_t q_w = int64_t(p.n_head) * p.head_dim, kv_w = int64_t(p.n_head_kv) * p.head_dim;
  const int64_t cap = n + 8;
  Makers mk(*be, p);
  const std::vector<Layer> layers = make_layers(*be, p, mk, cap, 1);
  const Weight output = (p.q4_k_m ? mk.wm6 : mk.wm).make(p.n_vocab, p.n_embd);
  std::vector<float> ones(size_t(std::max<int64_t>(p.n_embd, p.head_dim)), 1.0f);
  RopeTable rope{.n_rot = p.head_dim, .inv_freq = {}};
  for (int i = 0; i < p.head_dim / 2; ++i) rope.inv_freq.push_back(std::pow(500000.0f, -2.0f * float(i) / float(p.head_dim)));

  auto buf = [&](int64_t rows, int64_t cols) {
    return Mat{.data = static_cast<float*>(be->alloc(sizeof(float) * size_t(rows * cols))), .rows = rows, .cols = cols};
  };
  const Mat x = buf(n, p.n_embd), h = buf(n, p.n_embd), t = buf(n, p.n_embd), q = buf(n, q_w), k = buf(n, kv_w),
            v = buf(n, kv_w), attn = buf(n, q_w), gate = buf(n, std::max(p.n_ff, 1)), up = buf(n, std::max(p.n_ff, 1)),
            logits = buf(1, p.n_vocab),
            router = buf(n, std::max<int32_t>(p.n_expert, 1));
  const Mat h_last{.data = h.row(n - 1), .rows = 1, .cols = p.n_embd};
  std::vector<int32_t> ids(static_cast<size_t>(n), 1), seq(static_cast<size_t>(n), 0), pos(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < n; ++i) pos[size_t(i)] = int32_t(i);
  const int32_t out_row = int32_t(n - 1);
  const float scale = 1.0f / std::sqrt(float(p.head_dim));

  auto forward = [&]() {
    be->begin_step({.n_tok = int32_t(n), .ids = ids.data(), .pos = pos.data(), .seq = seq.data(), .n_out = 1,
                    .out_rows = &out_row});
    be->embedding({.out = x, .table = output, .ids = ids.data()});
    for (const Layer& l : layers) {
      be->rms_norm({.out = h, .x = x, .weight = ones.data()});
      be->matmul({.out = q, .x = h, .w = l.wq});
      be->matmul({.out = k, .x = h, .w = l.wk});
      be->matmul({.out = v, .x = h, .w = l.wv});
      be->rope({.x = q, .pos = pos.data(), .n_head = p.n_head, .head_dim = p.head_dim, .table = &rope});
      be->rope({.x = k, .pos = pos.data(), .n_head = p.n_head_kv, .head_dim = p.head_dim, .table = &rope});
      be->kv_store({.k = k, .v = v, .k_cache = l.k, .v_cache = l.v, .seq = seq.data(), .pos = pos.data()});
      be->attention({.out = attn, .q = q, .k_cache = l.k, .v_cache = l.v, .seq = seq.data(), .pos = pos.data(),
                     .n_head = p.n_head, .n_head_kv = p.n_head_kv, .head_dim = p.head_dim, .scale = scale});
      be->matmul({.out = t, .x = attn, .w = l.wo});
      be->add({.out = x, .a = x, .b = t});
      be->rms_norm({.out = h, .x = x, .weight = ones.data()});
      if (p.n_expert > 0) {
        be->matmul({.out = router, .x = h, .w = l.router});
        be->moe({.out = t, .x = h, .logits = router, .gate = l.e_gate.data(), .up = l.e_up.data(),
                 .down = l.e_down.data(), .n_expert = p.n_expert, .n_used = p.n_expert_used});
      } else {
        be->matmul({.out = gate, .x = h, .w = l.gate});
        be->matmul({.out = up, .x = h, .w = l.up});
        be->gated_act({.out = gate, .gate = gate, .up = up});
        be->matmul({.out = t, .x = gate, .w = l.down});
      }
      be->add({.out = x, .a = x, .b = t});
    }
    be->rms_norm({.out = h, .x = x, .weight = ones.data()});
    be->matmul({.out = logits, .x = h_last, .w = output});
    be->end_step();
  };

  forward();  // warm-up: constants, scratch buffers, cuBLAS heuristics
  be->synchronize();
  const auto t0 = Clock::now();
  for (int i = 0; i < p.steps; ++i) forward();
  be->synchronize();
  const double secs = seconds_since(t0);
  res.tok_per_s = double(n) * p.steps / secs;
  const int64_t ffn_rows = p.n_expert > 0 ? 3 * int64_t(p.n_ff_exp) * p.n_expert_used + p.n_expert : 3 * int64_t(p.n_ff);
  const double per_layer = 2.0 * double(p.n_embd) * double(2 * q_w + 2 * kv_w + ffn_rows);
  const double flops = double(n) * per_layer * p.n_layer + 2.0 * double(p.n_embd) * double(p.n_vocab);
  res.matmul_tflops = flops * p.steps / secs / 1e12;
  return res;
}

int64_t cuda_bench_gemm_cols(const CudaBenchParams& p) {
  return p.n_expert > 0 ? int64_t(p.n_ff_exp) * p.n_expert_used : p.n_ff;
}

bool cuda_bench_shape(const std::string& name, CudaBenchParams& p) {
  p.n_expert = p.n_expert_used = p.n_ff_exp = 0;
  if (name == "llama-3.1-8b") {
    const CudaBenchParams d;
    p.n_layer = d.n_layer; p.n_embd = d.n_embd; p.n_head = d.n_head; p.n_head_kv = d.n_head_kv;
    p.head_dim = d.head_dim; p.n_ff = d.n_ff; p.n_vocab = d.n_vocab;
    return true;
  }
  if (name == "qwen3-8b") {  // random_model_preset's shape
    p.n_layer = 36; p.n_embd = 4096; p.n_head = 32; p.n_head_kv = 8; p.head_dim = 128; p.n_ff = 12288;
    p.n_vocab = 151936;
    return true;
  }
  if (name == "qwen3-30b-a3b") {  // Qwen3-30B-A3B: 128 experts of 768, 8 per token
    p.n_layer = 48; p.n_embd = 2048; p.n_head = 32; p.n_head_kv = 4; p.head_dim = 128; p.n_ff = 0;
    p.n_vocab = 151936; p.n_expert = 128; p.n_expert_used = 8; p.n_ff_exp = 768;
    return true;
  }
  if (name == "qwen2.5-0.5b") {
    p.n_layer = 24; p.n_embd = 896; p.n_head = 14; p.n_head_kv = 2; p.head_dim = 64; p.n_ff = 4864;
    p.n_vocab = 151936;
    return true;
  }
  return false;
}

}  // namespace brisk
