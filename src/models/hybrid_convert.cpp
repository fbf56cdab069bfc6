// The Qwen3.5 / Qwen3.5-MoE / Qwen3-Next steps of the Hugging Face -> GGUF conversion
// (quantize/hf_to_gguf.cpp does the generic ones: names through hybrid_hf_to_gguf, per-expert
// tensors stacked, metadata from the config key table), so that the files are interchangeable
// with llama.cpp's (architectures qwen35, qwen35moe, qwen3next):
//  - the MTP block's tensors (mtp.J.*) as blk.{n_layer + J}.*, with {arch}.nextn_predict_layers
//    counted in block_count (qwen35 / qwen35moe; llama.cpp's qwen3next files have none, so the
//    Qwen3-Next converter leaves the block out);
//  - rope.dimension_sections from mrope_section (default 11, 11, 10, 0);
//  - RMSNorm weights stored as 1 + w (not the delta net's gated norm); ssm_a = -exp(A_log); the
//    conv kernel squeezed to {kernel, channels};
//  - Qwen3-Next's fused in_proj_qkvz split into attn_qkv (all q, all k, all v rows) and attn_gate;
//  - Qwen3.5: value heads reordered from grouped (per key head) to tiled when there are more
//    value heads than key heads (llama.cpp broadcasts q / k by tiling): the v rows of attn_qkv,
//    attn_gate, ssm_beta, ssm_alpha, ssm_a, ssm_dt, the conv's v channels and ssm_out's columns;
//  - a fused gate_up_proj expert stack split into the gate and up stacks;
//  - the layer pattern as full_attention_interval, or attention.recurrent_layers when layer_types
//    is not every interval-th layer.
#include <cmath>

#include "core/error.h"
#include "formats/gguf.h"
#include "models/hybrid_decoder.h"

namespace brisk {
namespace {

int64_t rows_of(const ConvertTensor& t) {
  int64_t r = 1;
  for (size_t i = 1; i < t.ne.size(); ++i) r *= int64_t(t.ne[i]);
  return r;
}

// Rows of t (each ne[0] floats) in the order `rows`.
ConvertTensor take_rows(const ConvertTensor& t, const std::vector<int64_t>& rows) {
  ConvertTensor out{.ne = {t.ne[0], uint64_t(rows.size())}, .f = {}};
  const size_t w = size_t(t.ne[0]);
  out.f.resize(rows.size() * w);
  for (size_t i = 0; i < rows.size(); ++i)
    std::copy_n(t.f.begin() + long(size_t(rows[i]) * w), w, out.f.begin() + long(i * w));
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

// Row indices [0, total) with the whole heads of [offset, offset + n_head * head) permuted by `heads`.
std::vector<int64_t> head_rows(int64_t offset, const std::vector<int64_t>& heads, int64_t head, int64_t total) {
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < offset; ++r) rows.push_back(r);
  for (int64_t h : heads)
    for (int64_t i = 0; i < head; ++i) rows.push_back(offset + h * head + i);
  for (int64_t r = int64_t(rows.size()); r < total; ++r) rows.push_back(r);
  return rows;
}

std::string strip(const std::string& name, const std::string& suffix) {
  return name.substr(0, name.size() - suffix.size());
}

}  // namespace

void hybrid_convert_tensors(ModelConfig& c, ConvertTensors& tensors) {
  const bool next = c.arch == "qwen3next";
  const int64_t n_k = c.linear_n_k_head, n_v = c.linear_n_v_head, dk = c.linear_k_head_dim, dv = c.linear_v_head_dim;
  const int64_t r = n_v / n_k, key_dim = n_k * dk, value_dim = n_v * dv, conv_dim = 2 * key_dim + value_dim;
  const bool reorder = !next && n_k != n_v;
  const std::vector<int64_t> heads = tiled_heads(n_k, r);
  ConvertTensors out;
  int32_t n_mtp = 0;
  for (auto& [gguf_name, t] : tensors) {
    std::string name = gguf_name;
    // llama.cpp's qwen3next files have no MTP blocks (its loader counts every block as a layer of
    // the stack): the converter leaves them out, as llama.cpp's does.
    if (next && name.starts_with("mtp.")) continue;
    if (name.starts_with("mtp.")) {  // mtp.J.rest -> blk.{n_layer + J}.rest
      const size_t dot = name.find('.', 4);
      BRISK_CHECK(dot != std::string::npos && dot > 4 && dot - 4 <= 2 &&
                      name.find_first_not_of("0123456789", 4) == dot,
                  "convert: tensor ", name, " is not mtp.N.*");
      const int32_t j = std::stoi(name.substr(4, dot - 4));
      n_mtp = std::max(n_mtp, j + 1);
      name = "blk." + std::to_string(c.n_layer + j) + name.substr(dot);
    }
    ConvertTensor x = std::move(t);
    if (name.ends_with("norm.weight") && !name.ends_with("ssm_norm.weight"))
      for (float& v : x.f) v += 1.0f;
    if (name.ends_with(".ssm_a"))
      for (float& v : x.f) v = -std::exp(v);
    if (name.ends_with("ssm_conv1d.weight")) x.ne = {x.ne.front(), x.ne.back()};  // {K, 1, C} -> {K, C}
    if (name.ends_with("ffn_gate_up_exps.weight")) {  // {embd, 2 ff, E}: per expert gate rows, then up rows
      BRISK_CHECK(x.ne.size() == 3 && x.ne[1] % 2 == 0, "convert: ", name, " is not [experts, 2 * ff, embd]");
      const uint64_t ff = x.ne[1] / 2, w = x.ne[0], e = x.ne[2];
      ConvertTensor gate{.ne = {w, ff, e}, .f = {}}, up{.ne = {w, ff, e}, .f = {}};
      for (uint64_t i = 0; i < e; ++i) {
        const auto base = x.f.begin() + long(i * 2 * ff * w);
        gate.f.insert(gate.f.end(), base, base + long(ff * w));
        up.f.insert(up.f.end(), base + long(ff * w), base + long(2 * ff * w));
      }
      const std::string stem = strip(name, "ffn_gate_up_exps.weight");
      out[stem + "ffn_gate_exps.weight"] = std::move(gate);
      out[stem + "ffn_up_exps.weight"] = std::move(up);
      continue;
    }
    if (name.ends_with("ssm_in.weight")) {  // Qwen3-Next: per key head q, k, v (r heads), z (r heads)
      BRISK_CHECK(x.ne.size() == 2 && int64_t(x.ne[1]) == conv_dim + value_dim, "convert: ", name, " has ",
                  rows_of(x), " rows, expected ", conv_dim + value_dim);
      const int64_t per = 2 * dk + 2 * r * dv;
      std::vector<int64_t> qkv, z;
      for (int64_t part = 0; part < 3; ++part)
        for (int64_t g = 0; g < n_k; ++g)
          for (int64_t i = 0; i < (part == 2 ? r * dv : dk); ++i)
            qkv.push_back(g * per + (part == 0 ? 0 : part == 1 ? dk : 2 * dk) + i);
      for (int64_t g = 0; g < n_k; ++g)
        for (int64_t i = 0; i < r * dv; ++i) z.push_back(g * per + 2 * dk + r * dv + i);
      const std::string stem = strip(name, "ssm_in.weight");
      out[stem + "attn_qkv.weight"] = take_rows(x, qkv);
      out[stem + "attn_gate.weight"] = take_rows(x, z);
      continue;
    }
    if (reorder) {
      const int64_t rows = rows_of(x);
      auto check_rows = [&](int64_t need) {
        BRISK_CHECK(rows == need, "convert: ", name, " has ", rows, " rows, expected ", need);
      };
      if (name.ends_with("attn_qkv.weight")) {
        check_rows(conv_dim);
        x = take_rows(x, head_rows(2 * key_dim, heads, dv, rows));
      } else if (name.ends_with("attn_gate.weight")) {
        check_rows(value_dim);
        x = take_rows(x, head_rows(0, heads, dv, rows));
      } else if (name.ends_with("ssm_beta.weight") || name.ends_with("ssm_alpha.weight")) {
        check_rows(n_v);
        x = take_rows(x, head_rows(0, heads, 1, rows));
      } else if (name.ends_with("ssm_conv1d.weight")) {
        check_rows(conv_dim);
        x = take_rows(x, head_rows(2 * key_dim, heads, dv, rows));
      } else if (name.ends_with(".ssm_a") || name.ends_with("ssm_dt.bias")) {
        BRISK_CHECK(int64_t(x.f.size()) == n_v, "convert: ", name, " has ", x.f.size(), " values, expected ", n_v);
        std::vector<float> v(x.f.size());
        for (size_t i = 0; i < heads.size(); ++i) v[i] = x.f[size_t(heads[i])];
        x.f = std::move(v);
      } else if (name.ends_with("ssm_out.weight")) {  // columns: [n_embd rows, value_dim]
        BRISK_CHECK(int64_t(x.ne[0]) == value_dim, "convert: ", name, " has ", x.ne[0], " columns, expected ", value_dim);
        std::vector<float> v(x.f.size());
        const size_t w = size_t(x.ne[0]);
        for (int64_t row = 0; row < rows; ++row)
          for (size_t h = 0; h < heads.size(); ++h)
            std::copy_n(x.f.begin() + long(size_t(row) * w + size_t(heads[h] * dv)), dv,
                        v.begin() + long(size_t(row) * w + h * size_t(dv)));
        x.f = std::move(v);
      }
    }
    out[name] = std::move(x);
  }
  tensors = std::move(out);
  c.n_nextn = n_mtp;  // the MTP blocks the checkpoint holds (the file must have their tensors)
}

void hybrid_convert_keys(const ModelConfig& c, const std::string& a, gguf::Writer& w) {
  auto u32 = [](int64_t v) { return gguf::Value::from_u32(uint32_t(v)); };
  w.set(a + ".block_count", u32(c.n_layer + c.n_nextn));
  if (c.n_nextn > 0) w.set(a + ".nextn_predict_layers", u32(c.n_nextn));
  w.set(a + ".rope.dimension_count", u32(c.n_rot));
  if (c.arch != "qwen3next") {  // llama.cpp's four sections: the checkpoint's, padded with 0, or its default
    std::vector<int32_t> sections = c.rope_sections.empty() ? std::vector<int32_t>{11, 11, 10, 0} : c.rope_sections;
    BRISK_CHECK(sections.size() <= 4, "convert: mrope_section has ", sections.size(), " entries (GGUF holds 4)");
    sections.resize(4, 0);
    w.set(a + ".rope.dimension_sections", gguf::Value::from_i32s(sections));
  }
  w.set(a + ".ssm.conv_kernel", u32(c.linear_conv_kernel));
  w.set(a + ".ssm.state_size", u32(c.linear_k_head_dim));
  w.set(a + ".ssm.group_count", u32(c.linear_n_k_head));
  w.set(a + ".ssm.time_step_rank", u32(c.linear_n_v_head));
  w.set(a + ".ssm.inner_size", u32(int64_t(c.linear_n_v_head) * c.linear_v_head_dim));
  bool interval = c.full_attention_interval > 0;
  for (int il = 0; il < c.n_layer && interval; ++il)
    interval = hybrid_layer_is_linear(c, il) == ((il + 1) % c.full_attention_interval != 0);
  if (interval) {
    w.set(a + ".full_attention_interval", u32(c.full_attention_interval));
  } else {  // llama.cpp's per-layer form (MTP blocks are attention layers)
    std::vector<int32_t> rec;
    for (int il = 0; il < c.n_layer + c.n_nextn; ++il) rec.push_back(il < c.n_layer && hybrid_layer_is_linear(c, il));
    w.set(a + ".attention.recurrent_layers", gguf::Value::from_i32s(rec));
  }
  if (c.n_expert > 0) w.set(a + ".expert_weights_norm", gguf::Value::from_bool(c.norm_topk_prob));
}

}  // namespace brisk
