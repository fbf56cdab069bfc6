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

#include "core/error.h"
#include "core/log.h"
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
  if (cfg.from_gguf) {
    cfg.hidden_act = "gelu_pytorch_tanh";  // GGUF carries no activation key
    if (cfg.head_dim_swa > 0) {            // key_length is the full layers' head size
      cfg.head_dim_full = cfg.head_dim;
      cfg.head_dim = cfg.head_dim_swa;
    }
    cfg.n_rot_full = cfg.n_rot;  // rope.dimension_count: the full layers' (with rope_freqs)
    cfg.n_rot = cfg.n_rot_swa;   // 0: the whole sliding head
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

}  // namespace

const ArchEntry& arch_gemma4() {
  static const ArchEntry e{
      .name = "gemma4",
      .hf_architectures = {"Gemma4ForCausalLM", "Gemma4ForConditionalGeneration"},
      .hf_model_types = {"gemma4_text", "gemma4"},
      .gguf_names = {"gemma4"},
      .gguf_rope_neox = true,
      .hf_name_map = &gemma_hf_to_gguf,
      .sanitize = &gemma4_sanitize,
      .build = &gemma4_build,
  };
  return e;
}

}  // namespace brisk
