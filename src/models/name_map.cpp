#include "models/name_map.h"

#include <cstring>
#include <utility>

namespace brisk {

namespace {

const std::pair<const char*, const char*> kGlobal[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};

// Per-layer suffix after "model.layers.N." -> suffix after "blk.N.".
const std::pair<const char*, const char*> kLayer[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.bias", "attn_output.bias"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
    {"mlp.gate.weight", "ffn_gate_inp.weight"},  // MoE router
};

// MoE experts: "mlp.experts.E.gate_proj.weight" -> "ffn_gate_exps.E.weight", the per-expert
// slice of GGUF's 3-D blk.N.ffn_gate_exps.weight (models/moe.cpp reads either layout).
std::string expert_name(const std::string& rest) {
  const std::string prefix = "mlp.experts.";
  if (rest.compare(0, prefix.size(), prefix) != 0) return "";
  size_t p = prefix.size(), q = p;
  while (q < rest.size() && rest[q] >= '0' && rest[q] <= '9') ++q;
  if (q == p || q - p > 6 || q >= rest.size() || rest[q] != '.') return "";
  const std::string e = rest.substr(p, q - p);
  const std::string proj = rest.substr(q + 1);
  for (const char* k : {"gate", "up", "down"})
    if (proj == std::string(k) + "_proj.weight") return std::string("ffn_") + k + "_exps." + e + ".weight";
  return "";
}

}  // namespace

std::string hf_backbone_name(const std::string& hf) {
  for (const char* p : {"embed_tokens.", "layers.", "norm."})
    if (hf.rfind(p, 0) == 0) return "model." + hf;
  return hf;
}

std::string hf_to_gguf_name(const std::string& hf_in) {
  const std::string hf = hf_backbone_name(hf_in);
  for (const auto& [from, to] : kGlobal)
    if (hf == from) return to;
  const std::string prefix = "model.layers.";
  if (hf.compare(0, prefix.size(), prefix) != 0) return "";
  size_t p = prefix.size();
  size_t q = p;
  while (q < hf.size() && hf[q] >= '0' && hf[q] <= '9') ++q;
  if (q == p || q - p > 6 || q >= hf.size() || hf[q] != '.') return "";
  const std::string layer = hf.substr(p, q - p);
  const std::string rest = hf.substr(q + 1);
  for (const auto& [from, to] : kLayer)
    if (rest == from) return "blk." + layer + "." + to;
  if (std::string e = expert_name(rest); !e.empty()) return "blk." + layer + "." + e;
  return "";
}

std::string layer_name_map(const std::string& hf, const std::string& prefix, const LayerNameRow* rows, size_t n_rows) {
  if (hf.compare(0, prefix.size(), prefix) != 0) return "";
  size_t q = prefix.size();
  while (q < hf.size() && hf[q] >= '0' && hf[q] <= '9') ++q;
  if (q == prefix.size() || q - prefix.size() > 6 || q >= hf.size() || hf[q] != '.') return "";
  const std::string layer = hf.substr(prefix.size(), q - prefix.size()), rest = hf.substr(q + 1);
  for (size_t i = 0; i < n_rows; ++i) {
    const std::string from = rows[i].hf;
    if (rest.compare(0, from.size(), from) != 0) continue;
    const std::string tail = rest.substr(from.size());
    if (tail != "weight" && tail != "bias") return "";
    return "blk." + layer + "." + rows[i].gguf + tail;
  }
  return "";
}

}  // namespace brisk
