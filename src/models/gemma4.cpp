// Gemma 4 (text): the Gemma decoder (models/gemma_decoder.h) with attention scale 1 (the q/k
// norms carry it), an unweighted V norm, plain RMSNorm gains (no 1 + w), and what the config
// switches on:
//   - sliding and full layers from layer_types (default: every 6th full, the last one always
//     full), full layers with their own head size (global_head_dim) and, when their values are
//     their keys (attention_k_eq_v: no v_proj), their own KV heads (num_global_key_value_heads);
//   - sliding layers' rope: rope_theta_swa over the whole head; full layers' "proportional"
//     rope: the head's first partial_rotary_factor of pairs rotate with theta^(-2i/head_dim),
//     the rest not (GGUF: rope_freqs.weight factors of 1e30 for those);
//   - KV sharing: the last num_kv_shared_layers layers read the cache of the last earlier
//     layer of their kind, with MLPs twice as wide there when use_double_wide_mlp;
//   - per-layer embeddings (hidden_size_per_layer_input), an MoE block beside every MLP
//     (enable_moe_block; router scale and per-expert scale), the per-layer output scale, final
//     logit soft-capping and tied embeddings.
// Hugging Face configs come in the published form (global_head_dim, num_global_key_value_heads
// at the top level) or transformers' per_layer_config form; Gemma4ForConditionalGeneration's
// text_config is read like a Gemma4ForCausalLM config. GGUF files use llama.cpp's gemma4
// names and keys (attention.key_length / key_length_swa, per-layer head_count_kv and
// feed_forward_length arrays, sliding_window_pattern flags, shared_kv_layers).
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "formats/gguf.h"
#include "models/dense_decoder.h"
#include "models/gemma_decoder.h"

namespace brisk {

namespace {

void gemma4_sanitize(ModelConfig& cfg) {
  BRISK_CHECK(cfg.bidirectional.empty() || cfg.bidirectional == "vision", "model config: use_bidirectional_attention '",
              cfg.bidirectional, "' (text attending both ways) is not supported");
  BRISK_CHECK(cfg.n_layer > 0 && cfg.n_layer <= 65536, "model config: ", cfg.n_layer, " layers out of range");
  BRISK_CHECK(cfg.n_kv_shared_layers >= 0 && cfg.n_kv_shared_layers < cfg.n_layer, "model config: num_kv_shared_layers ",
              cfg.n_kv_shared_layers, " out of range for ", cfg.n_layer, " layers");
  BRISK_CHECK(cfg.n_embd_per_layer >= 0 && cfg.n_embd_per_layer <= 65536, "model config: hidden_size_per_layer_input ",
              cfg.n_embd_per_layer, " out of range");
  cfg.attn_scale = 1.0f;
  cfg.attn_softcap = 0.0f;  // Gemma 4 never soft-caps attention scores (an attn_logit_softcapping key is ignored)
  cfg.norm_topk_prob = true;  // its router always renormalizes the chosen experts' weights
  if (cfg.from_gguf) {
    cfg.hidden_act = "gelu_pytorch_tanh";  // GGUF carries no activation key
    if (cfg.head_dim_swa > 0) {            // key_length is the full layers' head size
      cfg.head_dim_full = cfg.head_dim;
      cfg.head_dim = cfg.head_dim_swa;
    }
    cfg.n_rot_full = cfg.n_rot;  // rope.dimension_count: the full layers' (with rope_freqs)
    cfg.n_rot = cfg.n_rot_swa;   // 0: the whole sliding head
  } else {
    cfg.partial_rotary = 1.0f;   // the sliding layers' default rope rotates the whole head
  }
  if (cfg.layer_types.empty()) {
    for (int il = 0; il < cfg.n_layer; ++il)
      cfg.layer_types.push_back((il + 1) % 6 != 0 ? "sliding_attention" : "full_attention");
  }
  if (int32_t(cfg.layer_types.size()) == cfg.n_layer && cfg.layer_types.back() != "full_attention") {
    log_warn("model config: the last layer of Gemma 4 is a full-attention layer (layer_types says '",
             cfg.layer_types.back(), "')");
    cfg.layer_types.back() = "full_attention";
  }
  const auto full = [&](int il) { return size_t(il) < cfg.layer_types.size() && cfg.layer_types[size_t(il)] == "full_attention"; };
  // The published form's full-layer overrides (per_layer_config and GGUF arrays give their own).
  if (cfg.layer_head_dim.empty() && cfg.head_dim_full > 0)
    for (int il = 0; il < cfg.n_layer; ++il) cfg.layer_head_dim.push_back(full(il) ? cfg.head_dim_full : 0);
  if (cfg.layer_n_head_kv.empty() && cfg.attention_k_eq_v && cfg.n_head_kv_full > 0)
    for (int il = 0; il < cfg.n_layer; ++il) cfg.layer_n_head_kv.push_back(full(il) ? cfg.n_head_kv_full : 0);
  // transformers' per_layer_config form: the full layers' head size (their rope's) is theirs.
  if (cfg.head_dim_full == 0 && !cfg.layer_head_dim.empty())
    for (int il = 0; il < cfg.n_layer; ++il)
      if (full(il) && cfg.layer_head_dim[size_t(il)] > 0) {
        BRISK_CHECK(cfg.head_dim_full == 0 || cfg.head_dim_full == cfg.layer_head_dim[size_t(il)],
                    "model config: full-attention layers of head sizes ", cfg.head_dim_full, " and ",
                    cfg.layer_head_dim[size_t(il)], " (one rope for all of them)");
        cfg.head_dim_full = cfg.layer_head_dim[size_t(il)];
      }
  const int32_t first_shared = cfg.n_layer - cfg.n_kv_shared_layers;
  if (cfg.layer_n_ff.empty() && cfg.double_wide_mlp && cfg.n_kv_shared_layers > 0 && first_shared > 0)
    for (int il = 0; il < cfg.n_layer; ++il) cfg.layer_n_ff.push_back(il >= first_shared ? 2 * cfg.n_ff : 0);
}

std::unique_ptr<ArchModel> gemma4_build(const ModelConfig& cfg, WeightStore& ws) {
  const int32_t hd_full = cfg.head_dim_full > 0 ? cfg.head_dim_full : cfg.head_dim;
  RopeBuildParams full{.n_rot = hd_full, .theta = cfg.rope_theta, .n_ctx_train = cfg.n_ctx_train,
                       .scaling = cfg.rope_scaling, .neox = cfg.rope_neox};
  if (cfg.from_gguf) {
    full.n_rot = cfg.n_rot_full > 0 ? cfg.n_rot_full : hd_full;
    if (const float* f = ws.vector_opt("rope_freqs.weight", full.n_rot / 2)) full.freq_factors.assign(f, f + full.n_rot / 2);
  } else if (cfg.rope_scaling.type == "proportional") {
    full.proportion = cfg.partial_rotary_full;
  } else if (cfg.rope_scaling.type.empty() || cfg.rope_scaling.type == "default") {
    full.n_rot = hd_full;  // transformers' default rope rotates the whole head (no partial factor)
  } else {
    full.n_rot = int32_t(std::lround(hd_full * double(cfg.partial_rotary_full)));
    full.n_rot -= full.n_rot % 2;
  }
  BRISK_CHECK(full.n_rot > 0 && full.n_rot <= hd_full, "model config: full-attention layers rotate ", full.n_rot,
              " dims of ", hd_full);
  GemmaSpec spec{.v_norm = true, .values_are_keys = true, .rope_full = rope_table_build(full)};
  spec.rope_swa = rope_table_build({.n_rot = cfg.n_rot,
                                    .theta = cfg.rope_theta_swa > 0.0f ? cfg.rope_theta_swa : cfg.rope_theta,
                                    .n_ctx_train = cfg.n_ctx_train, .neox = cfg.rope_neox});
  return gemma_decoder_build(cfg, ws, spec);
}

// llama.cpp's gemma4 keys of a finalized config, the layout published Gemma 4 GGUFs have: the
// full layers' head size as attention.key_length and the sliding layers' as key_length_swa;
// per-layer head_count_kv / feed_forward_length arrays where layers differ;
// sliding_window_pattern as one flag per layer; shared_kv_layers; the full layers'
// proportional rope as rope_freqs.weight factors (1 for the rotated pairs, 1e30 for the
// others) over rope.dimension_count = the full head size.
void gemma4_gguf_metadata(const ModelConfig& c, gguf::Writer& w, std::vector<float>* rope_freqs) {
  const std::string a = "gemma4.";
  w.set(a + "block_count", gguf::Value::from_u32(uint32_t(c.n_layer)));
  w.set(a + "context_length", gguf::Value::from_u32(uint32_t(c.n_ctx_train)));
  w.set(a + "embedding_length", gguf::Value::from_u32(uint32_t(c.n_embd)));
  w.set(a + "vocab_size", gguf::Value::from_u32(uint32_t(c.n_vocab)));
  w.set(a + "attention.head_count", gguf::Value::from_u32(uint32_t(c.n_head)));
  w.set(a + "attention.layer_norm_rms_epsilon", gguf::Value::from_f32(c.rms_eps));
  std::vector<int32_t> n_ff, n_kv;
  std::vector<gguf::Value> sliding;
  for (int il = 0; il < c.n_layer; ++il) {
    n_ff.push_back(c.n_ff_of(il));
    n_kv.push_back(c.n_head_kv_of(il));
    sliding.push_back(gguf::Value::from_bool(c.sliding(il)));
  }
  w.set(a + "feed_forward_length",
        c.layer_n_ff.empty() ? gguf::Value::from_u32(uint32_t(c.n_ff)) : gguf::Value::from_i32s(n_ff));
  w.set(a + "attention.head_count_kv",
        c.layer_n_head_kv.empty() ? gguf::Value::from_u32(uint32_t(c.n_head_kv)) : gguf::Value::from_i32s(n_kv));
  gguf::Value pattern;
  pattern.type = gguf::ValueType::ARRAY;
  pattern.data = gguf::Array{.type = gguf::ValueType::BOOL, .items = std::move(sliding)};
  w.set(a + "attention.sliding_window_pattern", std::move(pattern));
  const int32_t hd_full = c.head_dim_full > 0 ? c.head_dim_full : c.head_dim;
  for (const char* k : {"attention.key_length", "attention.value_length"})
    w.set(a + k, gguf::Value::from_u32(uint32_t(hd_full)));
  for (const char* k : {"attention.key_length_swa", "attention.value_length_swa"})
    w.set(a + k, gguf::Value::from_u32(uint32_t(c.head_dim)));
  if (c.sliding_window > 0) w.set(a + "attention.sliding_window", gguf::Value::from_u32(uint32_t(c.sliding_window)));
  w.set(a + "attention.shared_kv_layers", gguf::Value::from_u32(uint32_t(c.n_kv_shared_layers)));
  w.set(a + "embedding_length_per_layer_input", gguf::Value::from_u32(uint32_t(c.n_embd_per_layer)));
  w.set(a + "rope.freq_base", gguf::Value::from_f32(c.rope_theta));
  w.set(a + "rope.freq_base_swa", gguf::Value::from_f32(c.rope_theta_swa > 0.0f ? c.rope_theta_swa : c.rope_theta));
  w.set(a + "rope.dimension_count_swa", gguf::Value::from_u32(uint32_t(c.n_rot)));
  if (c.final_softcap > 0.0f) w.set(a + "final_logit_softcapping", gguf::Value::from_f32(c.final_softcap));
  if (c.n_expert > 0) {
    w.set(a + "expert_count", gguf::Value::from_u32(uint32_t(c.n_expert)));
    w.set(a + "expert_used_count", gguf::Value::from_u32(uint32_t(c.n_expert_used)));
    w.set(a + "expert_feed_forward_length", gguf::Value::from_u32(uint32_t(c.n_ff_exp)));
  }
  // The full layers' rope: proportional as factors over the whole head, or plain partial rotary.
  rope_freqs->clear();
  if (c.rope_scaling.type == "proportional") {
    BRISK_CHECK(c.rope_scaling.factor == 1.0f, "convert: proportional rope with factor ", c.rope_scaling.factor,
                " has no GGUF form");
    w.set(a + "rope.dimension_count", gguf::Value::from_u32(uint32_t(hd_full)));
    const int rotated = int(std::floor(double(c.partial_rotary_full) * hd_full / 2.0));
    rope_freqs->assign(size_t(hd_full / 2), 1e30f);
    for (int i = 0; i < rotated && i < hd_full / 2; ++i) (*rope_freqs)[size_t(i)] = 1.0f;
    w.add_tensor("rope_freqs.weight", QuantType::F32, {uint64_t(rope_freqs->size())}, rope_freqs->data(),
                 rope_freqs->size() * sizeof(float));
  } else {
    BRISK_CHECK(c.rope_scaling.type == "default" || c.rope_scaling.type.empty(), "convert: rope type '",
                c.rope_scaling.type, "' of the full layers has no GGUF form here");
    w.set(a + "rope.dimension_count", gguf::Value::from_u32(uint32_t(hd_full)));  // the whole head
  }
}

// K / V tensors of a layer that reads another layer's cache are not written (no layer reads them).
bool gemma4_keep_tensor(const ModelConfig& c, const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return true;
  const int il = std::atoi(name.c_str() + 4);
  const bool kv = name.find(".attn_k.") != std::string::npos || name.find(".attn_v.") != std::string::npos ||
                  name.find(".attn_k_norm.") != std::string::npos;
  return !kv || il >= c.n_layer || gemma_kv_source(c, il) == il;
}

void gemma4_convert_tensors(ModelConfig& c, ConvertTensors& t) {
  for (auto it = t.begin(); it != t.end();) it = gemma4_keep_tensor(c, it->first) ? std::next(it) : t.erase(it);
}

}  // namespace

const ArchEntry& arch_gemma4() {
  static const ArchEntry e{
      .name = "gemma4",
      .hf_architectures = {"Gemma4ForCausalLM", "Gemma4ForConditionalGeneration"},
      .hf_model_types = {"gemma4_text", "gemma4"},
      .gguf_names = {"gemma4"},
      .gguf_rope_neox = true,
      .hf_name_map = &gemma_hf_to_gguf,
      // transformers' Gemma4TextConfig
      .hf_config_defaults = R"({"vocab_size": 262144, "hidden_size": 2304, "intermediate_size": 9216,
          "num_hidden_layers": 30, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
          "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 131072, "rms_norm_eps": 1e-6,
          "tie_word_embeddings": true, "sliding_window": 512, "vocab_size_per_layer_input": 262144,
          "hidden_size_per_layer_input": 256,
          "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                              "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                                 "rope_theta": 1000000.0}}})",
      .sanitize = &gemma4_sanitize,
      .build = &gemma4_build,
      .convert = {.arch = "gemma4", .tensors = &gemma4_convert_tensors, .write_metadata = &gemma4_gguf_metadata,
                  .tokenizer = "gemma4"},
  };
  return e;
}

}  // namespace brisk
