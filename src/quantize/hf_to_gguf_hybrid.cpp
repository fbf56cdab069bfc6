// Hugging Face Qwen3.5 / Qwen3.5-MoE / Qwen3-Next folders -> float32 GGUF as llama.cpp's converter
// writes them (architectures qwen35, qwen35moe, qwen3next), so that the files are interchangeable:
//  - names through models/hybrid_decoder's map; the MTP block's tensors as blk.{n_layer + j}.*
//    with {arch}.nextn_predict_layers, counted in block_count;
//  - RMSNorm weights stored as 1 + w (not the delta net's gated norm); ssm_a = -exp(A_log); the
//    conv kernel squeezed to {kernel, channels};
//  - Qwen3-Next's fused in_proj_qkvz split into attn_qkv (all q, all k, all v rows) and attn_gate;
//  - Qwen3.5: value heads reordered from grouped (per key head) to tiled when there are more
//    value heads than key heads (llama.cpp broadcasts q / k by tiling): the v rows of attn_qkv,
//    attn_gate, ssm_beta, ssm_alpha, ssm_a, ssm_dt, the conv's v channels and ssm_out's columns;
//  - per-expert tensors stacked into ffn_{gate,up,down}_exps {n_in, n_out, n_expert}, a fused
//    gate_up_proj split into the gate and up stacks;
//  - the layer pattern as full_attention_interval, or attention.recurrent_layers when layer_types
//    is not every interval-th layer.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "models/config.h"
#include "models/hybrid_decoder.h"
#include "quantize/hf_to_gguf.h"
#include "quantize/tokenizer_to_gguf.h"

namespace brisk {
namespace {

namespace fs = std::filesystem;

struct Tensor {
  std::vector<uint64_t> ne;  // GGUF order
  std::vector<float> data;
  int64_t rows() const {
    int64_t r = 1;
    for (size_t i = 1; i < ne.size(); ++i) r *= int64_t(ne[i]);
    return r;
  }
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Rows of t (each ne[0] floats) in the order `rows`.
Tensor take_rows(const Tensor& t, const std::vector<int64_t>& rows) {
  Tensor out{.ne = {t.ne[0], uint64_t(rows.size())}, .data = {}};
  const size_t w = size_t(t.ne[0]);
  out.data.resize(rows.size() * w);
  for (size_t i = 0; i < rows.size(); ++i)
    std::copy_n(t.data.begin() + long(size_t(rows[i]) * w), w, out.data.begin() + long(i * w));
  return out;
}

// Grouped value-head order (per key head its r value heads) -> tiled (value head i of every key
// head, then the next i). Returns the source index of each destination head.
std::vector<int64_t> tiled_heads(int64_t n_k, int64_t r) {
  std::vector<int64_t> src;
  for (int64_t i = 0; i < r; ++i)
    for (int64_t g = 0; g < n_k; ++g) src.push_back(g * r + i);
  return src;
}

// Row indices [offset, offset + n_head * head) with whole heads permuted by `heads`.
std::vector<int64_t> head_rows(int64_t offset, const std::vector<int64_t>& heads, int64_t head, int64_t total) {
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < offset; ++r) rows.push_back(r);
  for (int64_t h : heads)
    for (int64_t i = 0; i < head; ++i) rows.push_back(offset + h * head + i);
  for (int64_t r = int64_t(rows.size()); r < total; ++r) rows.push_back(r);
  return rows;
}

std::string tokenizer_pre(const std::string& folder) {
  std::ifstream in(fs::path(folder) / "tokenizer.json", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  // Qwen3.5's split keeps combining marks with letters (\p{M}); Qwen2's does not.
  return ss.str().find("\\\\p{L}\\\\p{M}") != std::string::npos ? "qwen35" : "qwen2";
}

}  // namespace

bool hf_to_gguf_is_hybrid(const std::string& model_type) {
  return model_type == "qwen3_5_text" || model_type == "qwen3_5" || model_type == "qwen3_5_moe_text" ||
         model_type == "qwen3_5_moe" || model_type == "qwen3_next";
}

void hf_to_gguf_hybrid_f32(const std::string& folder, const nlohmann::json& cfg_json, const std::string& out_path) {
  const std::string model_type = cfg_json.at("model_type").get<std::string>();
  const bool next = model_type == "qwen3_next";
  const bool moe = next || model_type.find("moe") != std::string::npos;
  const std::string a = next ? "qwen3next" : moe ? "qwen35moe" : "qwen35";
  ModelConfig c;
  c.arch = a;
  config_fill_from_hf(c, cfg_json);
  hybrid_sanitize(c);  // checks the linear-attention keys, derives the layer pattern and n_rot
  if (c.n_head_kv == 0) c.n_head_kv = c.n_head;
  BRISK_CHECK(c.n_head > 0 && c.n_embd > 0 && c.n_layer > 0, folder, "/config.json: missing sizes");
  if (c.head_dim == 0) c.head_dim = c.n_embd / c.n_head;
  if (c.n_rot == 0) c.n_rot = int32_t(std::floor(double(c.head_dim) * double(c.partial_rotary)));
  const int64_t n_k = c.linear_n_k_head, n_v = c.linear_n_v_head, dk = c.linear_k_head_dim, dv = c.linear_v_head_dim;
  const int64_t r = n_v / n_k, key_dim = n_k * dk, value_dim = n_v * dv, conv_dim = 2 * key_dim + value_dim;
  const bool reorder = !next && n_k != n_v;
  const std::vector<int64_t> heads = tiled_heads(n_k, r);

  const auto ckpt = safetensors::Checkpoint::open(folder, MappedFile::Mode::mmap);
  std::map<std::string, Tensor> out;
  std::map<std::string, std::map<int64_t, Tensor>> experts;  // stacked name -> expert -> tensor
  int32_t n_mtp = 0;
  for (const auto& t : ckpt.tensors()) {
    std::string name = hybrid_hf_to_gguf(t.name);
    if (name.empty()) continue;
    if (name.compare(0, 4, "mtp.") == 0) {  // mtp.J.rest -> blk.{n_layer + J}.rest
      const size_t dot = name.find('.', 4);
      const int32_t j = std::stoi(name.substr(4, dot - 4));
      n_mtp = std::max(n_mtp, j + 1);
      name = "blk." + std::to_string(c.n_layer + j) + name.substr(dot);
    }
    Tensor x{.ne = std::vector<uint64_t>(t.shape.rbegin(), t.shape.rend()), .data = safetensors::to_f32(t)};
    if (x.ne.empty()) x.ne = {1};
    // Per-expert tensors: blk.N.ffn_X_exps.E.weight, stacked below.
    if (const size_t p = name.find("_exps."); p != std::string::npos && !ends_with(name, "_exps.weight")) {
      const size_t q = name.find('.', p + 6);
      experts[name.substr(0, p + 5) + ".weight"][std::stoll(name.substr(p + 6, q - p - 6))] = std::move(x);
      continue;
    }
    if (ends_with(name, "norm.weight") && !ends_with(name, "ssm_norm.weight"))
      for (float& v : x.data) v += 1.0f;
    if (ends_with(name, ".ssm_a"))
      for (float& v : x.data) v = -std::exp(v);
    if (ends_with(name, "ssm_conv1d.weight")) x.ne = {x.ne.front(), x.ne.back()};  // {K, 1, C} -> {K, C}
    if (ends_with(name, "ffn_gate_up_exps.weight")) {  // {embd, 2 ff, E}: per expert gate rows, then up rows
      BRISK_CHECK(x.ne.size() == 3 && x.ne[1] % 2 == 0, "convert: ", t.name, " is not [experts, 2 * ff, embd]");
      const uint64_t ff = x.ne[1] / 2, w = x.ne[0], e = x.ne[2];
      Tensor gate{.ne = {w, ff, e}, .data = {}}, up{.ne = {w, ff, e}, .data = {}};
      for (uint64_t i = 0; i < e; ++i) {
        const auto base = x.data.begin() + long(i * 2 * ff * w);
        gate.data.insert(gate.data.end(), base, base + long(ff * w));
        up.data.insert(up.data.end(), base + long(ff * w), base + long(2 * ff * w));
      }
      const std::string stem = name.substr(0, name.size() - std::string("ffn_gate_up_exps.weight").size());
      out[stem + "ffn_gate_exps.weight"] = std::move(gate);
      out[stem + "ffn_up_exps.weight"] = std::move(up);
      continue;
    }
    if (ends_with(name, "ssm_in.weight")) {  // Qwen3-Next: per key head q, k, v (r heads), z (r heads)
      BRISK_CHECK(x.ne.size() == 2 && int64_t(x.ne[1]) == conv_dim + value_dim, "convert: ", t.name, " has ",
                  x.rows(), " rows, expected ", conv_dim + value_dim);
      const int64_t per = 2 * dk + 2 * r * dv;
      std::vector<int64_t> qkv, z;
      for (int64_t part = 0; part < 3; ++part)
        for (int64_t g = 0; g < n_k; ++g)
          for (int64_t i = 0; i < (part == 2 ? r * dv : dk); ++i)
            qkv.push_back(g * per + (part == 0 ? 0 : part == 1 ? dk : 2 * dk) + i);
      for (int64_t g = 0; g < n_k; ++g)
        for (int64_t i = 0; i < r * dv; ++i) z.push_back(g * per + 2 * dk + r * dv + i);
      const std::string stem = name.substr(0, name.size() - std::string("ssm_in.weight").size());
      out[stem + "attn_qkv.weight"] = take_rows(x, qkv);
      out[stem + "attn_gate.weight"] = take_rows(x, z);
      continue;
    }
    if (reorder) {
      const int64_t rows = x.rows();
      if (ends_with(name, "attn_qkv.weight")) x = take_rows(x, head_rows(2 * key_dim, heads, dv, rows));
      else if (ends_with(name, "attn_gate.weight")) x = take_rows(x, head_rows(0, heads, dv, rows));
      else if (ends_with(name, "ssm_beta.weight") || ends_with(name, "ssm_alpha.weight"))
        x = take_rows(x, head_rows(0, heads, 1, rows));
      else if (ends_with(name, "ssm_conv1d.weight")) x = take_rows(x, head_rows(2 * key_dim, heads, dv, rows));
      else if (ends_with(name, ".ssm_a") || ends_with(name, "ssm_dt.bias")) {
        std::vector<float> v(x.data.size());
        for (size_t i = 0; i < heads.size(); ++i) v[i] = x.data[size_t(heads[i])];
        x.data = std::move(v);
      } else if (ends_with(name, "ssm_out.weight")) {  // columns: [n_embd rows, value_dim]
        std::vector<float> v(x.data.size());
        const size_t w = size_t(x.ne[0]);
        for (int64_t row = 0; row < rows; ++row)
          for (size_t h = 0; h < heads.size(); ++h)
            std::copy_n(x.data.begin() + long(size_t(row) * w + size_t(heads[h] * dv)), dv,
                        v.begin() + long(size_t(row) * w + h * size_t(dv)));
        x.data = std::move(v);
      }
    }
    out[name] = std::move(x);
  }
  for (auto& [name, list] : experts) {
    BRISK_CHECK(int32_t(list.size()) == c.n_expert && list.rbegin()->first == c.n_expert - 1, "convert: ", name, " has ",
                list.size(), " experts, the config ", c.n_expert);
    Tensor s{.ne = {list.begin()->second.ne[0], list.begin()->second.ne[1], uint64_t(list.size())}, .data = {}};
    for (auto& [e, t] : list) {
      BRISK_CHECK(t.ne == std::vector<uint64_t>(s.ne.begin(), s.ne.begin() + 2), "convert: expert ", e, " of ", name,
                  " has another shape");
      s.data.insert(s.data.end(), t.data.begin(), t.data.end());
    }
    out[name] = std::move(s);
  }
  if (c.n_vocab == 0)
    if (auto it = out.find("token_embd.weight"); it != out.end()) c.n_vocab = int32_t(it->second.ne[1]);

  gguf::Writer w;
  auto u32 = [](int64_t v) { return gguf::Value::from_u32(uint32_t(v)); };
  w.set("general.architecture", gguf::Value::from_string(a));
  w.set("general.name", gguf::Value::from_string(fs::path(folder).filename().string()));
  w.set("general.file_type", u32(0));
  w.set(a + ".block_count", u32(c.n_layer + n_mtp));
  if (n_mtp > 0) w.set(a + ".nextn_predict_layers", u32(n_mtp));
  w.set(a + ".context_length", u32(c.n_ctx_train > 0 ? c.n_ctx_train : 4096));
  w.set(a + ".embedding_length", u32(c.n_embd));
  w.set(a + ".feed_forward_length", u32(c.n_ff));
  w.set(a + ".attention.head_count", u32(c.n_head));
  w.set(a + ".attention.head_count_kv", u32(c.n_head_kv));
  w.set(a + ".attention.key_length", u32(c.head_dim));
  w.set(a + ".attention.value_length", u32(c.head_dim));
  w.set(a + ".attention.layer_norm_rms_epsilon", gguf::Value::from_f32(c.rms_eps));
  w.set(a + ".rope.freq_base", gguf::Value::from_f32(c.rope_theta));
  w.set(a + ".rope.dimension_count", u32(c.n_rot));
  if (!next) w.set(a + ".rope.dimension_sections", gguf::Value::from_i32s({11, 11, 10, 0}));
  if (c.n_vocab > 0) w.set(a + ".vocab_size", u32(c.n_vocab));
  w.set(a + ".ssm.conv_kernel", u32(c.linear_conv_kernel));
  w.set(a + ".ssm.state_size", u32(dk));
  w.set(a + ".ssm.group_count", u32(n_k));
  w.set(a + ".ssm.time_step_rank", u32(n_v));
  w.set(a + ".ssm.inner_size", u32(value_dim));
  bool interval = c.full_attention_interval > 0;
  for (int il = 0; il < c.n_layer && interval; ++il)
    interval = hybrid_layer_is_linear(c, il) == ((il + 1) % c.full_attention_interval != 0);
  if (interval) {
    w.set(a + ".full_attention_interval", u32(c.full_attention_interval));
  } else {  // llama.cpp's per-layer form (MTP blocks are attention layers)
    std::vector<int32_t> rec;
    for (int il = 0; il < c.n_layer + n_mtp; ++il) rec.push_back(il < c.n_layer && hybrid_layer_is_linear(c, il));
    w.set(a + ".attention.recurrent_layers", gguf::Value::from_i32s(rec));
  }
  if (c.n_expert > 0) {
    w.set(a + ".expert_count", u32(c.n_expert));
    w.set(a + ".expert_used_count", u32(c.n_expert_used));
    w.set(a + ".expert_feed_forward_length", u32(c.n_ff_exp));
    w.set(a + ".expert_weights_norm", gguf::Value::from_bool(c.norm_topk_prob));
  }
  if (c.n_ff_shexp > 0) w.set(a + ".expert_shared_feed_forward_length", u32(c.n_ff_shexp));
  if (fs::exists(fs::path(folder) / "tokenizer.json"))
    tokenizer_to_gguf({.folder = folder, .pre = tokenizer_pre(folder), .n_vocab = c.n_vocab}, w);
  for (auto& [name, t] : out) w.add_tensor(name, QuantType::F32, t.ne, t.data.data(), t.data.size() * 4);
  w.write(out_path);
}

}  // namespace brisk
