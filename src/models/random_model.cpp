#include "models/random_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "formats/mapped_file.h"
#include "formats/tokenizer_to_gguf.h"
#include "quant/format.h"
#include "models/gemma_decoder.h"
#include "models/registry.h"
#include "quant/recipe.h"

namespace brisk {

namespace {

struct Rng {  // xorshift64*: fast and reproducible
  uint64_t s;
  float uniform() {  // [-1, 1)
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return float(int64_t((s * 0x2545F4914F6CDD1DULL) >> 11) - (int64_t(1) << 52)) / float(int64_t(1) << 52);
  }
};

uint64_t mix(uint64_t a, uint64_t b) {  // splitmix64 of a combination: independent row streams
  uint64_t z = a * 0x9E3779B97F4A7C15ULL + b + 0x632BE59BD9B4E019ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return (z ^ (z >> 31)) | 1;
}

struct Planned {
  std::string name;
  std::vector<uint64_t> ne;  // [n_in], [n_in, n_out] or [n_in, n_out, n_expert]
  float base = 0, spread = 0;  // vectors: base + spread * U(-1, 1)
  bool keep_f32 = false;       // a matrix stored in F32 whatever the type (routers, conv kernels)
};

class Builder {
 public:
  std::vector<float> rope_freqs;  // rope_freqs.weight's data (Gemma 4), referenced by the writer

  Builder(uint64_t seed, int n_threads, int32_t distinct_rows)
      : seed_(seed), distinct_rows_(distinct_rows), pool_(n_threads) {}

  // Writes every planned tensor; matrices take their type from `type_of`.
  template <class TypeOf>
  void emit(gguf::Writer& w, const std::vector<Planned>& plan, TypeOf type_of) {
    for (size_t k = 0; k < plan.size(); ++k) {
      const Planned& t = plan[k];
      if (t.ne.size() == 1) vector(w, t, k);
      else matrix(w, t, k, t.keep_f32 ? QuantType::F32 : type_of(t));
    }
  }

 private:
  void matrix(gguf::Writer& w, const Planned& t, size_t k, QuantType type) {
    const int64_t n_in = int64_t(t.ne[0]);
    int64_t n_out = 1;  // rows of every dimension after the first (expert stacks are 3-D)
    for (size_t d = 1; d < t.ne.size(); ++d) n_out *= int64_t(t.ne[d]);
    auto rb = quant_row_bytes(type, uint64_t(n_in));
    if (!rb) {  // rows that are not whole blocks stay F32
      type = QuantType::F32;
      rb = uint64_t(n_in) * 4;
    }
    const auto quantize = format_traits(type).quantize_row_ref;
    BRISK_CHECK(quantize != nullptr, "random model: no reference quantizer for ", quant_type_info(type).name);
    auto& data = store(size_t(*rb) * size_t(n_out));
    const float a = std::sqrt(3.0f / float(n_in));
    const int64_t drawn = distinct_rows_ > 0 ? std::min<int64_t>(n_out, distinct_rows_) : n_out;
    pool_.parallel_for(drawn, [&](int64_t r0, int64_t r1) {
      std::vector<float> row(static_cast<size_t>(n_in));
      for (int64_t r = r0; r < r1; ++r) {
        Rng rng{mix(mix(seed_, k), uint64_t(r))};
        for (float& x : row) x = a * rng.uniform();
        quantize(row.data(), data.data() + size_t(r) * size_t(*rb), n_in);
      }
    });
    for (int64_t r = drawn; r < n_out; r += drawn)  // the first rows again, in the bytes of the rest
      std::memcpy(data.data() + size_t(r) * size_t(*rb), data.data(), size_t(std::min(drawn, n_out - r)) * size_t(*rb));
    w.add_tensor(t.name, type, t.ne, data.data(), data.size());
  }

  void vector(gguf::Writer& w, const Planned& t, size_t k) {
    const size_t n = size_t(t.ne[0]);
    auto& data = store(n * 4);
    auto* f = reinterpret_cast<float*>(data.data());
    Rng rng{mix(seed_, k)};
    for (size_t i = 0; i < n; ++i) f[i] = t.base + t.spread * rng.uniform();
    w.add_tensor(t.name, QuantType::F32, t.ne, data.data(), data.size());
  }

  std::vector<uint8_t>& store(size_t n) {
    buffers_.push_back(std::make_unique<std::vector<uint8_t>>(n));
    return *buffers_.back();
  }
  uint64_t seed_;
  int32_t distinct_rows_;
  ThreadPool pool_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> buffers_;
};

bool is_hybrid(const std::string& arch) { return arch == "qwen35" || arch == "qwen35moe"; }

// The Qwen3.5 layout as llama.cpp's converter writes it (GGUF norms store 1 + w): Gated DeltaNet
// layers (attn_qkv, attn_gate, ssm_*) and every full_attention_interval-th layer gated attention
// (attn_q holds each head's query and gate rows), dense or MoE (shared expert) MLPs.
template <class Mat, class Vec>
std::vector<Planned>& plan_hybrid(const RandomModelParams& p, Mat mat, Vec vec, std::vector<Planned>& v) {
  const int64_t q_width = int64_t(p.n_head) * p.head_dim, kv_width = int64_t(p.n_head_kv) * p.head_dim;
  const int64_t key_dim = int64_t(p.linear_n_k_head) * p.linear_k_head_dim;
  const int64_t value_dim = int64_t(p.linear_n_v_head) * p.linear_v_head_dim;
  const int64_t conv_dim = 2 * key_dim + value_dim;
  mat("token_embd.weight", p.n_embd, p.n_vocab);
  vec("output_norm.weight", p.n_embd, 1.0f, 0.0f);
  if (!p.tie_embeddings) mat("output.weight", p.n_embd, p.n_vocab);
  for (int32_t il = 0; il < p.n_layer; ++il) {
    const std::string blk = "blk." + std::to_string(il) + ".";
    vec(blk + "attn_norm.weight", p.n_embd, 1.0f, 0.0f);
    if ((il + 1) % p.full_attention_interval != 0) {
      mat(blk + "attn_qkv.weight", p.n_embd, conv_dim);
      mat(blk + "attn_gate.weight", p.n_embd, value_dim);
      mat(blk + "ssm_beta.weight", p.n_embd, p.linear_n_v_head);
      mat(blk + "ssm_alpha.weight", p.n_embd, p.linear_n_v_head);
      v.push_back({.name = blk + "ssm_conv1d.weight", .ne = {uint64_t(p.linear_conv_kernel), uint64_t(conv_dim)},
                   .keep_f32 = true});
      vec(blk + "ssm_dt.bias", p.linear_n_v_head, 1.0f, 0.5f);
      vec(blk + "ssm_a", p.linear_n_v_head, -1.0f, 0.5f);  // -exp(A_log): negative
      vec(blk + "ssm_norm.weight", p.linear_v_head_dim, 1.0f, 0.0f);
      mat(blk + "ssm_out.weight", value_dim, p.n_embd);
    } else {
      mat(blk + "attn_q.weight", p.n_embd, 2 * q_width);
      mat(blk + "attn_k.weight", p.n_embd, kv_width);
      mat(blk + "attn_v.weight", p.n_embd, kv_width);
      vec(blk + "attn_q_norm.weight", p.head_dim, 1.0f, 0.0f);
      vec(blk + "attn_k_norm.weight", p.head_dim, 1.0f, 0.0f);
      mat(blk + "attn_output.weight", q_width, p.n_embd);
    }
    vec(blk + "post_attention_norm.weight", p.n_embd, 1.0f, 0.0f);
    if (p.n_expert > 0) {
      v.push_back({.name = blk + "ffn_gate_inp.weight", .ne = {uint64_t(p.n_embd), uint64_t(p.n_expert)},
                   .keep_f32 = true});
      const uint64_t e = uint64_t(p.n_expert);
      v.push_back({.name = blk + "ffn_gate_exps.weight", .ne = {uint64_t(p.n_embd), uint64_t(p.n_ff_exp), e}});
      v.push_back({.name = blk + "ffn_up_exps.weight", .ne = {uint64_t(p.n_embd), uint64_t(p.n_ff_exp), e}});
      v.push_back({.name = blk + "ffn_down_exps.weight", .ne = {uint64_t(p.n_ff_exp), uint64_t(p.n_embd), e}});
      vec(blk + "ffn_gate_inp_shexp.weight", p.n_embd, 0.0f, 0.1f);
      mat(blk + "ffn_gate_shexp.weight", p.n_embd, p.n_ff_shexp);
      mat(blk + "ffn_up_shexp.weight", p.n_embd, p.n_ff_shexp);
      mat(blk + "ffn_down_shexp.weight", p.n_ff_shexp, p.n_embd);
    } else {
      mat(blk + "ffn_gate.weight", p.n_embd, p.n_ff);
      mat(blk + "ffn_up.weight", p.n_embd, p.n_ff);
      mat(blk + "ffn_down.weight", p.n_ff, p.n_embd);
    }
  }
  return v;
}

std::vector<Planned> plan_tensors(const RandomModelParams& p) {
  std::vector<Planned> v;
  auto mat = [&](std::string name, int64_t n_in, int64_t n_out) {
    v.push_back({.name = std::move(name), .ne = {uint64_t(n_in), uint64_t(n_out)}});
  };
  auto stack = [&](std::string name, int64_t n_in, int64_t n_out, int64_t n) {
    v.push_back({.name = std::move(name), .ne = {uint64_t(n_in), uint64_t(n_out), uint64_t(n)}});
  };
  auto vec = [&](std::string name, int64_t n, float base, float spread) {
    v.push_back({.name = std::move(name), .ne = {uint64_t(n)}, .base = base, .spread = spread});
  };
  if (is_hybrid(p.arch)) return plan_hybrid(p, mat, vec, v);
  const int64_t q_width = int64_t(p.n_head) * p.head_dim, kv_width = int64_t(p.n_head_kv) * p.head_dim;
  mat("token_embd.weight", p.n_embd, p.n_vocab);
  vec("output_norm.weight", p.n_embd, 1.0f, 0.0f);
  if (!p.tie_embeddings) mat("output.weight", p.n_embd, p.n_vocab);
  for (int32_t il = 0; il < p.n_layer; ++il) {
    const std::string blk = "blk." + std::to_string(il) + ".";
    vec(blk + "attn_norm.weight", p.n_embd, 1.0f, 0.0f);
    mat(blk + "attn_q.weight", p.n_embd, q_width);
    mat(blk + "attn_k.weight", p.n_embd, kv_width);
    mat(blk + "attn_v.weight", p.n_embd, kv_width);
    if (p.arch == "qwen2") {
      vec(blk + "attn_q.bias", q_width, 0.0f, 0.1f);
      vec(blk + "attn_k.bias", kv_width, 0.0f, 0.1f);
      vec(blk + "attn_v.bias", kv_width, 0.0f, 0.1f);
    }
    if (p.arch == "qwen3" || p.arch == "qwen3moe") {
      vec(blk + "attn_q_norm.weight", p.head_dim, 1.0f, 0.0f);
      vec(blk + "attn_k_norm.weight", p.head_dim, 1.0f, 0.0f);
    }
    mat(blk + "attn_output.weight", q_width, p.n_embd);
    vec(blk + "ffn_norm.weight", p.n_embd, 1.0f, 0.0f);
    if (p.n_expert > 0) {  // a router and the experts stacked, as GGUF files hold them
      mat(blk + "ffn_gate_inp.weight", p.n_embd, p.n_expert);
      stack(blk + "ffn_gate_exps.weight", p.n_embd, p.n_ff_exp, p.n_expert);
      stack(blk + "ffn_up_exps.weight", p.n_embd, p.n_ff_exp, p.n_expert);
      stack(blk + "ffn_down_exps.weight", p.n_ff_exp, p.n_embd, p.n_expert);
    } else {
      mat(blk + "ffn_gate.weight", p.n_embd, p.n_ff);
      mat(blk + "ffn_up.weight", p.n_embd, p.n_ff);
      mat(blk + "ffn_down.weight", p.n_ff, p.n_embd);
    }
  }
  return v;
}

// llama.cpp's `bert` layout: token, type and position tables with an embedding LayerNorm,
// post-norm layers with biases everywhere (LayerNorm weights 1 + noise, biases small).
std::vector<Planned> plan_bert(const RandomModelParams& p) {
  std::vector<Planned> v;
  auto mat = [&](std::string name, int64_t n_in, int64_t n_out) {
    v.push_back({.name = std::move(name), .ne = {uint64_t(n_in), uint64_t(n_out)}});
  };
  auto vec = [&](std::string name, int64_t n, float base, float spread) {
    v.push_back({.name = std::move(name), .ne = {uint64_t(n)}, .base = base, .spread = spread});
  };
  const int64_t d = p.n_embd;
  mat("token_embd.weight", d, p.n_vocab);
  mat("token_types.weight", d, 2);
  mat("position_embd.weight", d, p.n_ctx_train);
  vec("token_embd_norm.weight", d, 1.0f, 0.1f);
  vec("token_embd_norm.bias", d, 0.0f, 0.1f);
  for (int32_t il = 0; il < p.n_layer; ++il) {
    const std::string blk = "blk." + std::to_string(il) + ".";
    for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_output"}) {
      mat(blk + m + ".weight", d, d);
      vec(blk + m + ".bias", d, 0.0f, 0.1f);
    }
    vec(blk + "attn_output_norm.weight", d, 1.0f, 0.1f);
    vec(blk + "attn_output_norm.bias", d, 0.0f, 0.1f);
    mat(blk + "ffn_up.weight", d, p.n_ff);
    vec(blk + "ffn_up.bias", p.n_ff, 0.0f, 0.1f);
    mat(blk + "ffn_down.weight", p.n_ff, d);
    vec(blk + "ffn_down.bias", d, 0.0f, 0.1f);
    vec(blk + "layer_output_norm.weight", d, 1.0f, 0.1f);
    vec(blk + "layer_output_norm.bias", d, 0.0f, 0.1f);
  }
  if (p.n_cls_out > 0) {
    mat("cls.weight", d, d);
    vec("cls.bias", d, 0.0f, 0.1f);
    mat("cls.output.weight", d, p.n_cls_out);
    vec("cls.output.bias", p.n_cls_out, 0.0f, 0.1f);
  }
  return v;
}

// nomic-bert (rotary, fused qkv, SwiGLU, post-norm) and modern-bert (rotary, fused qkv, GeGLU
// with fused Wi, pre-norm without biases, layer 0 without attn_norm) in llama.cpp's names.
std::vector<Planned> plan_rotary_encoder(const RandomModelParams& p) {
  std::vector<Planned> v;
  auto mat = [&](std::string name, int64_t n_in, int64_t n_out) {
    v.push_back({.name = std::move(name), .ne = {uint64_t(n_in), uint64_t(n_out)}});
  };
  auto vec = [&](std::string name, int64_t n, float base, float spread) {
    v.push_back({.name = std::move(name), .ne = {uint64_t(n)}, .base = base, .spread = spread});
  };
  const bool nomic = p.arch == "nomic-bert";
  const int64_t d = p.n_embd;
  mat("token_embd.weight", d, p.n_vocab);
  vec("token_embd_norm.weight", d, 1.0f, 0.1f);
  if (nomic) {
    mat("token_types.weight", d, 2);
    vec("token_embd_norm.bias", d, 0.0f, 0.1f);
  } else {
    vec("output_norm.weight", d, 1.0f, 0.1f);
  }
  for (int32_t il = 0; il < p.n_layer; ++il) {
    const std::string blk = "blk." + std::to_string(il) + ".";
    if (!nomic && il > 0) vec(blk + "attn_norm.weight", d, 1.0f, 0.1f);
    mat(blk + "attn_qkv.weight", d, 3 * d);
    mat(blk + "attn_output.weight", d, d);
    if (nomic) {
      vec(blk + "attn_output_norm.weight", d, 1.0f, 0.1f);
      vec(blk + "attn_output_norm.bias", d, 0.0f, 0.1f);
      mat(blk + "ffn_up.weight", d, p.n_ff);
      mat(blk + "ffn_gate.weight", d, p.n_ff);
      vec(blk + "layer_output_norm.weight", d, 1.0f, 0.1f);
      vec(blk + "layer_output_norm.bias", d, 0.0f, 0.1f);
    } else {
      vec(blk + "ffn_norm.weight", d, 1.0f, 0.1f);
      mat(blk + "ffn_up.weight", d, 2 * int64_t(p.n_ff));
    }
    mat(blk + "ffn_down.weight", p.n_ff, d);
  }
  return v;
}

// The Gemma 4 config of a shape, read the way a Hugging Face config of it would be (the
// published form: sliding layers with every full_every-th full, proportional rope on a quarter
// of the full layers' heads) and finalized by the gemma4 entry.
ModelConfig gemma4_config(const RandomModelParams& p) {
  ModelConfig c;
  c.arch = "gemma4";
  c.n_vocab = p.n_vocab;
  c.n_embd = p.n_embd;
  c.n_layer = p.n_layer;
  c.n_head = p.n_head;
  c.n_head_kv = p.n_head_kv;
  c.head_dim = p.head_dim;
  c.n_ff = p.n_ff;
  c.n_ctx_train = p.n_ctx_train;
  c.rope_theta = p.rope_theta;
  c.rope_theta_swa = 10000.0f;
  c.rope_scaling.type = "proportional";
  c.partial_rotary_full = 0.25f;
  c.hidden_act = "gelu_pytorch_tanh";
  c.sliding_window = p.sliding_window;
  for (int32_t il = 0; il < p.n_layer; ++il)
    c.layer_types.push_back(p.full_every <= 0 || (il + 1) % p.full_every == 0 ? "full_attention" : "sliding_attention");
  c.head_dim_full = p.head_dim_full;
  c.attention_k_eq_v = p.n_head_kv_full > 0;
  c.n_head_kv_full = p.n_head_kv_full;
  c.n_kv_shared_layers = p.n_kv_shared_layers;
  c.n_embd_per_layer = p.n_embd_per_layer;
  c.double_wide_mlp = p.double_wide_mlp;
  c.n_expert = p.n_expert;
  c.n_expert_used = p.n_expert_used;
  c.n_ff_exp = p.n_ff_exp;
  c.final_softcap = p.final_softcap;
  c.tie_embeddings = p.tie_embeddings;
  arch_gemma4().sanitize(c);
  c.finalize();
  return c;
}

// Gemma 4's tensors (llama.cpp names) for a finalized config: each layer's own head size and KV
// heads, no attn_v where values are the keys, no K / V in KV-shared layers, per-layer
// embeddings, an MoE block, output scales.
std::vector<Planned> plan_gemma4(const ModelConfig& c) {
  std::vector<Planned> v;
  auto mat = [&](std::string name, std::vector<uint64_t> ne) { v.push_back({.name = std::move(name), .ne = std::move(ne)}); };
  auto vec = [&](std::string name, int64_t n, float base, float spread) {
    v.push_back({.name = std::move(name), .ne = {uint64_t(n)}, .base = base, .spread = spread});
  };
  const uint64_t e = uint64_t(c.n_embd), L = uint64_t(c.n_layer), ple = uint64_t(c.n_embd_per_layer);
  mat("token_embd.weight", {e, uint64_t(c.n_vocab)});
  vec("output_norm.weight", c.n_embd, 1.0f, 0.0f);
  if (!c.tie_embeddings) mat("output.weight", {e, uint64_t(c.n_vocab)});
  if (ple > 0) {
    mat("per_layer_token_embd.weight", {L * ple, uint64_t(c.n_vocab)});
    mat("per_layer_model_proj.weight", {e, L * ple});
    vec("per_layer_proj_norm.weight", int64_t(ple), 1.0f, 0.0f);
  }
  for (int32_t il = 0; il < c.n_layer; ++il) {
    const std::string blk = "blk." + std::to_string(il) + ".";
    const uint64_t hd = uint64_t(c.head_dim_of(il)), kv = uint64_t(c.kv_width_of(il)), q = uint64_t(c.q_width_of(il));
    const uint64_t n_ff = uint64_t(c.n_ff_of(il));
    vec(blk + "attn_norm.weight", c.n_embd, 1.0f, 0.0f);
    mat(blk + "attn_q.weight", {e, q});
    vec(blk + "attn_q_norm.weight", int64_t(hd), 1.0f, 0.0f);
    if (gemma_kv_source(c, il) == il) {
      mat(blk + "attn_k.weight", {e, kv});
      vec(blk + "attn_k_norm.weight", int64_t(hd), 1.0f, 0.0f);
      if (c.sliding(il) || !c.attention_k_eq_v) mat(blk + "attn_v.weight", {e, kv});
    }
    mat(blk + "attn_output.weight", {q, e});
    vec(blk + "post_attention_norm.weight", c.n_embd, 1.0f, 0.0f);
    vec(blk + "ffn_norm.weight", c.n_embd, 1.0f, 0.0f);
    mat(blk + "ffn_gate.weight", {e, n_ff});
    mat(blk + "ffn_up.weight", {e, n_ff});
    mat(blk + "ffn_down.weight", {n_ff, e});
    vec(blk + "post_ffw_norm.weight", c.n_embd, 1.0f, 0.0f);
    if (c.n_expert > 0) {
      const uint64_t n_exp = uint64_t(c.n_expert), ff = uint64_t(c.n_ff_exp);
      mat(blk + "ffn_gate_inp.weight", {e, n_exp});
      vec(blk + "ffn_gate_inp.scale", c.n_embd, 1.0f, 0.0f);
      mat(blk + "ffn_gate_up_exps.weight", {e, 2 * ff, n_exp});
      mat(blk + "ffn_down_exps.weight", {ff, e, n_exp});
      vec(blk + "ffn_down_exps.scale", c.n_expert, 1.0f, 0.1f);
      vec(blk + "pre_ffw_norm_2.weight", c.n_embd, 1.0f, 0.0f);
      vec(blk + "post_ffw_norm_1.weight", c.n_embd, 1.0f, 0.0f);
      vec(blk + "post_ffw_norm_2.weight", c.n_embd, 1.0f, 0.0f);
    }
    if (ple > 0) {
      mat(blk + "inp_gate.weight", {e, ple});
      mat(blk + "proj.weight", {ple, e});
      vec(blk + "post_norm.weight", c.n_embd, 1.0f, 0.0f);
    }
    vec(blk + "layer_output_scale.weight", 1, 0.75f, 0.25f);
  }
  return v;
}

// Whisper as brisk quantize writes a Hugging Face checkpoint: the encoder under enc.*, the
// decoder under GGUF-style names with cross_attn_* beside attn_*, convolution kernels flattened
// to [d_model, in_channels * 3] rows, the sizes under whisper.* keys.
std::vector<Planned> plan_whisper(const RandomModelParams& p) {
  std::vector<Planned> v;
  auto mat = [&](std::string name, int64_t n_in, int64_t n_out) {
    v.push_back({.name = std::move(name), .ne = {uint64_t(n_in), uint64_t(n_out)}});
  };
  auto vec = [&](std::string name, int64_t n, float base, float spread) {
    v.push_back({.name = std::move(name), .ne = {uint64_t(n)}, .base = base, .spread = spread});
  };
  const int64_t d = p.n_embd;
  auto norm = [&](const std::string& prefix) {
    vec(prefix + "weight", d, 1.0f, 0.1f);
    vec(prefix + "bias", d, 0.0f, 0.05f);
  };
  auto linear = [&](const std::string& prefix, int64_t n_in, int64_t n_out, bool bias) {
    mat(prefix + "weight", n_in, n_out);
    if (bias) vec(prefix + "bias", n_out, 0.0f, 0.05f);
  };
  auto attention = [&](const std::string& prefix) {
    linear(prefix + "q.", d, d, true);
    linear(prefix + "k.", d, d, false);
    linear(prefix + "v.", d, d, true);
    linear(prefix + "output.", d, d, true);
  };
  auto mlp = [&](const std::string& prefix, int64_t n_ff) {
    linear(prefix + "up.", d, n_ff, true);
    linear(prefix + "down.", n_ff, d, true);
  };
  linear("enc.conv1.", int64_t(p.n_mels) * 3, d, true);
  linear("enc.conv2.", d * 3, d, true);
  mat("enc.position_embd.weight", d, p.n_enc_ctx);
  for (int32_t il = 0; il < p.n_enc_layer; ++il) {
    const std::string blk = "enc.blk." + std::to_string(il) + ".";
    norm(blk + "attn_norm.");
    attention(blk + "attn_");
    norm(blk + "ffn_norm.");
    mlp(blk + "ffn_", p.n_enc_ff);
  }
  norm("enc.output_norm.");
  mat("token_embd.weight", d, p.n_vocab);
  mat("position_embd.weight", d, p.n_ctx_train);
  for (int32_t il = 0; il < p.n_layer; ++il) {
    const std::string blk = "blk." + std::to_string(il) + ".";
    norm(blk + "attn_norm.");
    attention(blk + "attn_");
    norm(blk + "cross_attn_norm.");
    attention(blk + "cross_attn_");
    norm(blk + "ffn_norm.");
    mlp(blk + "ffn_", p.n_ff);
  }
  norm("output_norm.");
  return v;
}

void whisper_metadata(const RandomModelParams& p, gguf::Writer& w) {
  BRISK_CHECK(p.n_embd > 0 && p.n_layer > 0 && p.n_head > 0 && p.n_embd % p.n_head == 0 && p.n_enc_layer > 0 &&
                  p.n_enc_head > 0 && p.n_embd % p.n_enc_head == 0 && p.n_enc_ff > 0 && p.n_ff > 0 &&
                  p.n_enc_ctx > 0 && p.n_mels > 0,
              "random model: incomplete whisper shape");
  const std::string a = "whisper";
  auto u32 = [](int32_t v) { return gguf::Value::from_u32(uint32_t(v)); };
  w.set("general.architecture", gguf::Value::from_string(a));
  w.set("general.name", gguf::Value::from_string("random whisper"));
  w.set(a + ".embedding_length", u32(p.n_embd));
  w.set(a + ".block_count", u32(p.n_layer));
  w.set(a + ".attention.head_count", u32(p.n_head));
  w.set(a + ".feed_forward_length", u32(p.n_ff));
  w.set(a + ".context_length", u32(p.n_ctx_train));
  w.set(a + ".encoder.block_count", u32(p.n_enc_layer));
  w.set(a + ".encoder.attention.head_count", u32(p.n_enc_head));
  w.set(a + ".encoder.feed_forward_length", u32(p.n_enc_ff));
  w.set(a + ".encoder.context_length", u32(p.n_enc_ctx));
  w.set(a + ".encoder.mel_bins", u32(p.n_mels));
  w.set(a + ".scale_embedding", gguf::Value::from_bool(false));
  w.set(a + ".activation_function", gguf::Value::from_string("gelu"));
  w.set(a + ".vocab_size", u32(p.n_vocab));
}

// The shapes of published models (their config.json), by name.
struct ModelShape {
  const char* name;
  RandomModelParams params;
};

const std::vector<ModelShape>& shape_table() {
  static const std::vector<ModelShape> table = {
      {"tiny", {}},
      // Encoders (GGUF `bert`, mean pooling): a toy one for tests, BAAI/bge-small-en-v1.5, and
      // BAAI/bge-m3 (XLM-RoBERTa large; 8194 positions less the 2 padding rows llama.cpp drops).
      {"bert-tiny", {.arch = "bert", .n_vocab = 1000, .n_embd = 64, .n_layer = 2, .n_head = 4, .n_head_kv = 4,
                     .head_dim = 16, .n_ff = 128, .n_ctx_train = 512}},
      {"bert-tiny-rerank", {.arch = "bert", .n_vocab = 1000, .n_embd = 64, .n_layer = 2, .n_head = 4, .n_head_kv = 4,
                            .head_dim = 16, .n_ff = 128, .n_ctx_train = 512, .n_cls_out = 1}},
      {"bge-small", {.arch = "bert", .n_vocab = 30522, .n_embd = 384, .n_layer = 12, .n_head = 12, .n_head_kv = 12,
                     .head_dim = 32, .n_ff = 1536, .n_ctx_train = 512}},
      // nomic-ai/nomic-embed-text-v1.5 (llama.cpp's 2048 positions) and a toy ModernBERT
      // (every 2nd layer global, a window of 16: +-8).
      {"nomic-tiny", {.arch = "nomic-bert", .n_vocab = 1000, .n_embd = 64, .n_layer = 2, .n_head = 4, .n_head_kv = 4,
                      .head_dim = 16, .n_ff = 128, .n_ctx_train = 512, .rope_theta = 1000.0f}},
      {"nomic-embed-v1.5", {.arch = "nomic-bert", .n_vocab = 30528, .n_embd = 768, .n_layer = 12, .n_head = 12,
                            .n_head_kv = 12, .head_dim = 64, .n_ff = 3072, .n_ctx_train = 2048, .rope_theta = 1000.0f}},
      {"modernbert-tiny", {.arch = "modern-bert", .n_vocab = 1000, .n_embd = 64, .n_layer = 3, .n_head = 4,
                           .n_head_kv = 4, .head_dim = 16, .n_ff = 96, .n_ctx_train = 512, .rope_theta = 160000.0f,
                           .sliding_window = 16, .full_every = 2}},
      {"bge-m3", {.arch = "bert", .n_vocab = 250002, .n_embd = 1024, .n_layer = 24, .n_head = 16, .n_head_kv = 16,
                  .head_dim = 64, .n_ff = 4096, .n_ctx_train = 8192}},
      {"qwen2.5-0.5b", {.arch = "qwen2", .n_vocab = 151936, .n_embd = 896, .n_layer = 24, .n_head = 14,
                        .n_head_kv = 2, .head_dim = 64, .n_ff = 4864, .n_ctx_train = 32768,
                        .rope_theta = 1000000.0f, .tie_embeddings = true}},
      {"qwen3-0.6b", {.arch = "qwen3", .n_vocab = 151936, .n_embd = 1024, .n_layer = 28, .n_head = 16,
                      .n_head_kv = 8, .head_dim = 128, .n_ff = 3072, .n_ctx_train = 40960,
                      .rope_theta = 1000000.0f, .tie_embeddings = true}},
      {"qwen3-1.7b", {.arch = "qwen3", .n_vocab = 151936, .n_embd = 2048, .n_layer = 28, .n_head = 16,
                      .n_head_kv = 8, .head_dim = 128, .n_ff = 6144, .n_ctx_train = 40960,
                      .rope_theta = 1000000.0f, .tie_embeddings = true}},
      {"qwen3-8b", {.arch = "qwen3", .n_vocab = 151936, .n_embd = 4096, .n_layer = 36, .n_head = 32,
                    .n_head_kv = 8, .head_dim = 128, .n_ff = 12288, .n_ctx_train = 40960,
                    .rope_theta = 1000000.0f, .tie_embeddings = false}},
      {"llama-3.2-1b", {.arch = "llama", .n_vocab = 128256, .n_embd = 2048, .n_layer = 16, .n_head = 32,
                        .n_head_kv = 8, .head_dim = 64, .n_ff = 8192, .n_ctx_train = 131072,
                        .rope_theta = 500000.0f, .tie_embeddings = true}},
      {"llama-3.1-8b", {.arch = "llama", .n_vocab = 128256, .n_embd = 4096, .n_layer = 32, .n_head = 32,
                        .n_head_kv = 8, .head_dim = 128, .n_ff = 14336, .n_ctx_train = 131072,
                        .rope_theta = 500000.0f, .tie_embeddings = false}},
      // Llama 3.1 70B: larger than one GPU in BF16; the tensor-parallel benchmark's shape.
      {"llama-3.1-70b", {.arch = "llama", .n_vocab = 128256, .n_embd = 8192, .n_layer = 80, .n_head = 64,
                         .n_head_kv = 8, .head_dim = 128, .n_ff = 28672, .n_ctx_train = 131072,
                         .rope_theta = 500000.0f, .tie_embeddings = false}},
      // 128 experts of 768, 8 per token; intermediate_size 6144 is the dense MLP it has none of.
      {"qwen3-30b-a3b", {.arch = "qwen3moe", .n_vocab = 151936, .n_embd = 2048, .n_layer = 48, .n_head = 32,
                         .n_head_kv = 4, .head_dim = 128, .n_ff = 6144, .n_expert = 128, .n_expert_used = 8,
                         .n_ff_exp = 768, .n_ctx_train = 40960, .rope_theta = 1000000.0f,
                         .tie_embeddings = false}},
      // Gemma 4 (google/gemma-4-*): sliding layers of head size 256 with rope base 1e4, full
      // layers of 512 with proportional rope (base 1e6, a quarter rotated), logit soft-cap 30.
      {"gemma4-e2b", {.arch = "gemma4", .n_vocab = 262144, .n_embd = 1536, .n_layer = 35, .n_head = 8,
                      .n_head_kv = 1, .head_dim = 256, .n_ff = 6144, .n_ctx_train = 131072,
                      .rope_theta = 1000000.0f, .tie_embeddings = true, .sliding_window = 512, .full_every = 5,
                      .head_dim_full = 512, .n_kv_shared_layers = 20, .n_embd_per_layer = 256,
                      .double_wide_mlp = true, .final_softcap = 30.0f}},
      {"gemma4-e4b", {.arch = "gemma4", .n_vocab = 262144, .n_embd = 2560, .n_layer = 42, .n_head = 8,
                      .n_head_kv = 2, .head_dim = 256, .n_ff = 10240, .n_ctx_train = 131072,
                      .rope_theta = 1000000.0f, .tie_embeddings = true, .sliding_window = 512, .full_every = 6,
                      .head_dim_full = 512, .n_kv_shared_layers = 18, .n_embd_per_layer = 256,
                      .final_softcap = 30.0f}},
      {"gemma4-31b", {.arch = "gemma4", .n_vocab = 262144, .n_embd = 5376, .n_layer = 60, .n_head = 32,
                      .n_head_kv = 16, .head_dim = 256, .n_ff = 21504, .n_ctx_train = 262144,
                      .rope_theta = 1000000.0f, .tie_embeddings = true, .sliding_window = 1024, .full_every = 6,
                      .head_dim_full = 512, .n_head_kv_full = 4, .final_softcap = 30.0f}},
      {"gemma4-26b-a4b", {.arch = "gemma4", .n_vocab = 262144, .n_embd = 2816, .n_layer = 30, .n_head = 16,
                          .n_head_kv = 8, .head_dim = 256, .n_ff = 2112, .n_expert = 128, .n_expert_used = 8,
                          .n_ff_exp = 704, .n_ctx_train = 262144, .rope_theta = 1000000.0f,
                          .tie_embeddings = true, .sliding_window = 1024, .full_every = 6, .head_dim_full = 512,
                          .n_head_kv_full = 2, .final_softcap = 30.0f}},
      // Whisper's published configs (openai/whisper-*): vocabulary 51865 (large-v3: 51866 and 128
      // mel bins), 448 decoder positions, 1500 encoder positions; large-v3-turbo keeps 4 of the
      // 32 decoder layers.
      {"whisper-toy", {.arch = "whisper", .n_vocab = 1024, .n_embd = 64, .n_layer = 2, .n_head = 4, .n_head_kv = 4,
                       .head_dim = 16, .n_ff = 128, .n_ctx_train = 448, .n_enc_layer = 2, .n_enc_head = 4,
                       .n_enc_ff = 128}},
      {"whisper-tiny", {.arch = "whisper", .n_vocab = 51865, .n_embd = 384, .n_layer = 4, .n_head = 6, .n_head_kv = 6,
                        .head_dim = 64, .n_ff = 1536, .n_ctx_train = 448, .n_enc_layer = 4, .n_enc_head = 6,
                        .n_enc_ff = 1536}},
      {"whisper-base", {.arch = "whisper", .n_vocab = 51865, .n_embd = 512, .n_layer = 6, .n_head = 8, .n_head_kv = 8,
                        .head_dim = 64, .n_ff = 2048, .n_ctx_train = 448, .n_enc_layer = 6, .n_enc_head = 8,
                        .n_enc_ff = 2048}},
      {"whisper-small", {.arch = "whisper", .n_vocab = 51865, .n_embd = 768, .n_layer = 12, .n_head = 12,
                         .n_head_kv = 12, .head_dim = 64, .n_ff = 3072, .n_ctx_train = 448, .n_enc_layer = 12,
                         .n_enc_head = 12, .n_enc_ff = 3072}},
      {"whisper-large-v3", {.arch = "whisper", .n_vocab = 51866, .n_embd = 1280, .n_layer = 32, .n_head = 20,
                            .n_head_kv = 20, .head_dim = 64, .n_ff = 5120, .n_ctx_train = 448, .n_enc_layer = 32,
                            .n_enc_head = 20, .n_enc_ff = 5120, .n_mels = 128}},
      {"whisper-large-v3-turbo", {.arch = "whisper", .n_vocab = 51866, .n_embd = 1280, .n_layer = 4, .n_head = 20,
                                  .n_head_kv = 20, .head_dim = 64, .n_ff = 5120, .n_ctx_train = 448,
                                  .n_enc_layer = 32, .n_enc_head = 20, .n_enc_ff = 5120, .n_mels = 128}},
      {"gemma4-tiny", {.arch = "gemma4", .n_vocab = 512, .n_embd = 64, .n_layer = 6, .n_head = 4, .n_head_kv = 2,
                       .head_dim = 32, .n_ff = 96, .n_expert = 4, .n_expert_used = 2, .n_ff_exp = 32,
                       .tie_embeddings = true, .sliding_window = 8, .full_every = 3, .head_dim_full = 64,
                       .n_head_kv_full = 1, .n_kv_shared_layers = 2, .n_embd_per_layer = 8,
                       .double_wide_mlp = true, .final_softcap = 30.0f}},
      // The Qwen3.5 / Qwen3.6 hybrids' published text configs: three Gated DeltaNet layers to one
      // gated attention layer (head_dim 256, a quarter rotated), rope_theta 1e7, vocabulary
      // 248320, 16 key heads of 128 in the linear layers; the 0.8B and 2B tie their embeddings.
      // Checked against the Hub configs as other projects restate them: Qwen3.5-27B / Qwen3.6-27B
      // text_config (hidden 5120, 64 layers, 24 / 4 heads, intermediate 17408, 48 value heads,
      // full_attention_interval 4); Qwen3.5-35B-A3B, whose topology Qwen3.6-35B-A3B keeps (hidden
      // 2048, 40 layers, 16 / 2 heads, 256 experts of 512, 8 used, a shared expert of 512, 32
      // value heads, conv kernel 4); Qwen3.5-0.8B (hidden 1024, 24 layers, 8 / 2 heads,
      // intermediate 3584).
      {"tiny-hybrid", {.arch = "qwen35", .n_vocab = 1024, .n_embd = 64, .n_layer = 4, .n_head = 4, .n_head_kv = 2,
                       .head_dim = 32, .n_ff = 128, .linear_n_k_head = 2, .linear_n_v_head = 4,
                       .linear_k_head_dim = 16, .linear_v_head_dim = 16, .partial_rotary = 0.25f}},
      {"qwen3.5-0.8b", {.arch = "qwen35", .n_vocab = 248320, .n_embd = 1024, .n_layer = 24, .n_head = 8,
                        .n_head_kv = 2, .head_dim = 256, .n_ff = 3584, .n_ctx_train = 262144,
                        .rope_theta = 10000000.0f, .tie_embeddings = true, .linear_n_k_head = 16,
                        .linear_n_v_head = 16, .linear_k_head_dim = 128, .linear_v_head_dim = 128,
                        .partial_rotary = 0.25f}},
      {"qwen3.5-2b", {.arch = "qwen35", .n_vocab = 248320, .n_embd = 2048, .n_layer = 24, .n_head = 8,
                      .n_head_kv = 2, .head_dim = 256, .n_ff = 6144, .n_ctx_train = 262144,
                      .rope_theta = 10000000.0f, .tie_embeddings = true, .linear_n_k_head = 16,
                      .linear_n_v_head = 16, .linear_k_head_dim = 128, .linear_v_head_dim = 128,
                      .partial_rotary = 0.25f}},
      {"qwen3.5-27b", {.arch = "qwen35", .n_vocab = 248320, .n_embd = 5120, .n_layer = 64, .n_head = 24,
                       .n_head_kv = 4, .head_dim = 256, .n_ff = 17408, .n_ctx_train = 262144,
                       .rope_theta = 10000000.0f, .tie_embeddings = false, .linear_n_k_head = 16,
                       .linear_n_v_head = 48, .linear_k_head_dim = 128, .linear_v_head_dim = 128,
                       .partial_rotary = 0.25f}},
      {"qwen3.6-35b-a3b", {.arch = "qwen35moe", .n_vocab = 248320, .n_embd = 2048, .n_layer = 40, .n_head = 16,
                           .n_head_kv = 2, .head_dim = 256, .n_ff = 0, .n_expert = 256, .n_expert_used = 8,
                           .n_ff_exp = 512, .n_ctx_train = 262144, .rope_theta = 10000000.0f,
                           .tie_embeddings = false, .n_ff_shexp = 512, .linear_n_k_head = 16,
                           .linear_n_v_head = 32, .linear_k_head_dim = 128, .linear_v_head_dim = 128,
                           .partial_rotary = 0.25f}},
  };
  return table;
}

}  // namespace

std::vector<std::string> random_model_shapes() {
  std::vector<std::string> names;
  for (const ModelShape& s : shape_table()) names.push_back(s.name);
  return names;
}

RandomModelParams random_model_preset(const std::string& name) {
  std::string known;
  for (const ModelShape& s : shape_table()) {
    if (name == s.name) return s.params;
    known += (known.empty() ? "" : ", ") + std::string(s.name);
  }
  fail("unknown model shape '", name, "' (known: ", known, ")");
}

namespace {

// The GGUF of p in `w`; the tensor bytes stay in `b` until w is written.
void random_model_fill(const RandomModelParams& p, gguf::Writer& w, Builder& b) {
  if (p.arch == "whisper") {
    whisper_metadata(p, w);
    b.emit(w, plan_whisper(p), [&](const Planned&) { return p.type; });
    return;
  }
  BRISK_CHECK(p.arch == "llama" || p.arch == "qwen2" || p.arch == "qwen3" || p.arch == "qwen3moe" ||
                  p.arch == "gemma4" || p.arch == "bert" || p.arch == "nomic-bert" || p.arch == "modern-bert" ||
                  is_hybrid(p.arch),
              "random model: unsupported arch '", p.arch, "'");
  BRISK_CHECK(p.n_layer > 0 && p.n_kv_shared_layers >= 0 && p.n_kv_shared_layers < p.n_layer,
              "random model: ", p.n_kv_shared_layers, " KV-shared layers of ", p.n_layer);
  if (is_hybrid(p.arch))
    BRISK_CHECK(p.full_attention_interval > 0 && p.linear_n_k_head > 0 && p.linear_n_v_head % p.linear_n_k_head == 0 &&
                    p.linear_k_head_dim > 0 && p.linear_v_head_dim > 0 && p.linear_conv_kernel >= 2 &&
                    (p.arch == "qwen35moe") == (p.n_ff_shexp > 0),
                "random model: incomplete hybrid shape");
  BRISK_CHECK((p.arch == "qwen3moe" || p.arch == "qwen35moe" || p.arch == "gemma4" || p.n_expert == 0) &&
                  ((p.arch != "qwen3moe" && p.arch != "qwen35moe") || p.n_expert > 0) &&
                  (p.n_expert == 0 || (p.n_expert_used > 0 && p.n_expert_used <= p.n_expert && p.n_ff_exp > 0)),
              "random model: experts (", p.n_expert, ", ", p.n_expert_used, " per token, MLP ", p.n_ff_exp,
              ") do not fit arch '", p.arch, "'");
  const std::string a = p.arch;
  w.set("general.architecture", gguf::Value::from_string(a));
  w.set("general.name", gguf::Value::from_string("random " + a));
  w.set(a + ".block_count", gguf::Value::from_u32(uint32_t(p.n_layer)));
  w.set(a + ".context_length", gguf::Value::from_u32(uint32_t(p.n_ctx_train)));
  w.set(a + ".embedding_length", gguf::Value::from_u32(uint32_t(p.n_embd)));
  w.set(a + ".feed_forward_length", gguf::Value::from_u32(uint32_t(p.n_ff)));
  w.set(a + ".attention.head_count", gguf::Value::from_u32(uint32_t(p.n_head)));
  w.set(a + ".attention.head_count_kv", gguf::Value::from_u32(uint32_t(p.n_head_kv)));
  w.set(a + ".attention.key_length", gguf::Value::from_u32(uint32_t(p.head_dim)));
  w.set(a + ".attention.value_length", gguf::Value::from_u32(uint32_t(p.head_dim)));
  w.set(a + ".rope.freq_base", gguf::Value::from_f32(p.rope_theta));
  w.set(a + ".attention.layer_norm_rms_epsilon", gguf::Value::from_f32(1e-6f));
  w.set(a + ".vocab_size", gguf::Value::from_u32(uint32_t(p.n_vocab)));
  if (is_hybrid(a)) {
    w.set(a + ".rope.dimension_count", gguf::Value::from_u32(uint32_t(float(p.head_dim) * p.partial_rotary)));
    w.set(a + ".rope.dimension_sections", gguf::Value::from_i32s({11, 11, 10, 0}));
    w.set(a + ".full_attention_interval", gguf::Value::from_u32(uint32_t(p.full_attention_interval)));
    w.set(a + ".ssm.conv_kernel", gguf::Value::from_u32(uint32_t(p.linear_conv_kernel)));
    w.set(a + ".ssm.state_size", gguf::Value::from_u32(uint32_t(p.linear_k_head_dim)));
    w.set(a + ".ssm.group_count", gguf::Value::from_u32(uint32_t(p.linear_n_k_head)));
    w.set(a + ".ssm.time_step_rank", gguf::Value::from_u32(uint32_t(p.linear_n_v_head)));
    w.set(a + ".ssm.inner_size", gguf::Value::from_u32(uint32_t(p.linear_n_v_head * p.linear_v_head_dim)));
  }
  if (p.n_expert > 0) {
    w.set(a + ".expert_count", gguf::Value::from_u32(uint32_t(p.n_expert)));
    w.set(a + ".expert_used_count", gguf::Value::from_u32(uint32_t(p.n_expert_used)));
    w.set(a + ".expert_feed_forward_length", gguf::Value::from_u32(uint32_t(p.n_ff_exp)));
    w.set(a + ".expert_shared_feed_forward_length", gguf::Value::from_u32(uint32_t(p.n_ff_shexp)));
  }

  if (a == "bert") {
    BRISK_CHECK(p.n_head_kv == p.n_head && p.head_dim * p.n_head == p.n_embd, "random model: bert needs n_head_kv = n_head "
                "and head_dim * n_head = n_embd");
    w.set(a + ".attention.layer_norm_epsilon", gguf::Value::from_f32(1e-12f));
    w.set(a + ".attention.causal", gguf::Value::from_bool(false));
    w.set(a + ".pooling_type", gguf::Value::from_u32(p.n_cls_out > 0 ? 4 : 1));  // rank / mean
    w.set("tokenizer.ggml.token_type_count", gguf::Value::from_u32(2));
  } else if (p.pooling_type >= 0) {
    w.set(a + ".pooling_type", gguf::Value::from_u32(uint32_t(p.pooling_type)));  // a decoder embedding model
  }
  if (a == "nomic-bert" || a == "modern-bert") {
    BRISK_CHECK(p.n_head_kv == p.n_head && p.head_dim * p.n_head == p.n_embd, "random model: ", a,
                " needs n_head_kv = n_head and head_dim * n_head = n_embd");
    w.set(a + ".attention.layer_norm_epsilon", gguf::Value::from_f32(a == "nomic-bert" ? 1e-12f : 1e-5f));
    w.set(a + ".attention.causal", gguf::Value::from_bool(false));
    w.set(a + ".pooling_type", gguf::Value::from_u32(1));  // mean
    if (a == "nomic-bert") w.set("tokenizer.ggml.token_type_count", gguf::Value::from_u32(2));
    if (a == "modern-bert") {
      w.set(a + ".attention.sliding_window", gguf::Value::from_u32(uint32_t(p.sliding_window)));
      w.set(a + ".attention.sliding_window_pattern", gguf::Value::from_u32(uint32_t(std::max(1, p.full_every))));
      w.set(a + ".rope.freq_base_swa", gguf::Value::from_f32(10000.0f));
      w.set(a + ".hidden_activation", gguf::Value::from_string("gelu"));
    }
  }
  std::vector<Planned> plan;
  if (a == "nomic-bert" || a == "modern-bert") {
    plan = plan_rotary_encoder(p);
  } else if (a == "bert") {
    plan = plan_bert(p);
  } else if (a == "gemma4") {
    const ModelConfig c = gemma4_config(p);
    arch_gemma4().convert.write_metadata(c, w, &b.rope_freqs);
    plan = plan_gemma4(c);
  } else {
    plan = plan_tensors(p);
  }
  std::optional<RecipeChooser> chooser;
  if (!p.recipe.empty()) {
    const auto recipe = quant_recipe_from_name(p.recipe);
    BRISK_CHECK(recipe.has_value(), "random model: unknown recipe '", p.recipe, "' (known: ", quant_recipe_names(), ")");
    std::vector<RecipeTensor> list;
    for (const auto& t : plan) list.push_back({.name = t.name, .ne = t.ne});
    chooser.emplace(*recipe, list);
    w.set("general.file_type", gguf::Value::from_u32(recipe->ftype));
    w.set("general.quantization_version", gguf::Value::from_u32(2));
  }
  if (!p.tokenizer_dir.empty()) {
    const std::string pre = !p.tokenizer_pre.empty() ? p.tokenizer_pre : a == "llama" ? "llama-bpe" : "qwen2";
    tokenizer_to_gguf({.folder = p.tokenizer_dir, .pre = pre, .n_vocab = p.n_vocab}, w);
  }
  // Routers stay F32, as GGUF files keep them (a rounding there flips expert choices).
  b.emit(w, plan, [&](const Planned& t) {
    if (t.name.find("ffn_gate_inp.") != std::string::npos) return QuantType::F32;
    return chooser ? chooser->choose(t.name, QuantType::F32) : p.type;
  });
}

}  // namespace

void random_model_write(const RandomModelParams& p, const std::string& path) {
  gguf::Writer w;
  Builder b(p.seed, p.n_threads, p.distinct_rows);
  random_model_fill(p, w, b);
  w.write(path);
}

std::shared_ptr<const MappedFile> random_model_gguf(const RandomModelParams& p) {
  gguf::Writer w;
  Builder b(p.seed, p.n_threads, p.distinct_rows);
  random_model_fill(p, w, b);
  return w.write_to_memory("random " + p.arch);
}

}  // namespace brisk
