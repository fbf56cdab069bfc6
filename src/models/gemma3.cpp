// Gemma 3 (text): the Gemma decoder (models/gemma_decoder.h) with attention scale
// 1/sqrt(query_pre_attn_scalar), GeGLU (gelu_tanh) MLPs, and sliding-window layers (layer_types,
// or every sliding_window_pattern-th layer full; llama.cpp's GGUF convention: pattern 6) that
// use their own rope base (rope_theta_swa) without the full layers' rope scaling. Hugging Face
// stores RMSNorm weights as w - 1 (the norm multiplies by 1 + w); llama.cpp's converter already
// adds the 1, so only HF weights are shifted, once, at load.
#include <cmath>

#include "core/error.h"
#include "models/dense_decoder.h"
#include "models/gemma_decoder.h"

namespace brisk {

namespace {

// GGUF has no key for Gemma 3's layer pattern: its readers take every sixth layer as full
// attention (cfg.layer_types is filled by sanitize).
void gemma_check_gguf(const ModelConfig& cfg) {
  for (int il = 0; il < cfg.n_layer; ++il) {
    const bool gguf_sliding = cfg.sliding_window > 0 && (il + 1) % 6 != 0;
    BRISK_CHECK(cfg.sliding(il) == gguf_sliding, "convert: gemma3 layer ", il, " is ",
                cfg.sliding(il) ? "sliding" : "full", "-attention, which GGUF cannot say ",
                "(its readers take every sixth layer as full attention)");
  }
}

}  // namespace

const ArchEntry& arch_gemma3() {
  static const ArchEntry e{
      .name = "gemma3",
      .hf_architectures = {"Gemma3ForCausalLM"},
      .hf_model_types = {"gemma3_text"},
      .gguf_names = {"gemma3"},
      .gguf_rope_neox = true,
      .hf_name_map = &gemma_hf_to_gguf,
      .sanitize = [](ModelConfig& cfg) {
        // GGUF carries no activation key; Gemma's MLP is GeGLU with the tanh gelu.
        if (cfg.from_gguf) cfg.hidden_act = "gelu_pytorch_tanh";
        BRISK_CHECK(cfg.bidirectional.empty(), "model config: use_bidirectional_attention (an embedding model "
                    "attending both ways) is not supported for text generation");
        if (cfg.query_pre_attn_scalar > 0.0f)
          cfg.attn_scale = float(1.0 / std::sqrt(double(cfg.query_pre_attn_scalar)));
        if (cfg.layer_types.empty() && cfg.sliding_window > 0 && cfg.n_layer > 0 && cfg.n_layer <= 65536) {
          const int32_t pattern = cfg.swa_pattern > 0 ? cfg.swa_pattern : 6;
          for (int il = 0; il < cfg.n_layer; ++il)
            cfg.layer_types.push_back((il + 1) % pattern != 0 ? "sliding_attention" : "full_attention");
        }
      },
      .build = [](const ModelConfig& cfg, WeightStore& ws) -> std::unique_ptr<ArchModel> {
        RopeBuildParams rp{.n_rot = cfg.n_rot, .theta = cfg.rope_theta, .n_ctx_train = cfg.n_ctx_train,
                           .scaling = cfg.rope_scaling, .neox = cfg.rope_neox};
        GemmaSpec spec{.norm_weight_minus_one = true, .rope_full = rope_table_build(rp)};
        rp.theta = cfg.rope_theta_swa > 0.0f ? cfg.rope_theta_swa : cfg.rope_theta;
        rp.scaling = RopeScaling{};  // sliding layers use the plain base
        spec.rope_swa = rope_table_build(rp);
        return gemma_decoder_build(cfg, ws, spec);
      },
      .convert = {.arch = "gemma3", .norm_shift = 1.0f, .check = &gemma_check_gguf},
  };
  return e;
}

}  // namespace brisk
