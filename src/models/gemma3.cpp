// Gemma 3 (text) and EmbeddingGemma (Gemma3TextModel with use_bidirectional_attention: every
// layer attends both ways, run as an embedding model): the Gemma decoder
// (models/gemma_decoder.h) with attention scale 1/sqrt(query_pre_attn_scalar), GeGLU (gelu_tanh)
// MLPs, and sliding-window layers (layer_types, or every sliding_window_pattern-th layer full;
// llama.cpp's GGUF convention: pattern 6) that use their own rope base (rope_theta_swa) without
// the full layers' rope scaling. Hugging Face stores RMSNorm weights as w - 1 (the norm
// multiplies by 1 + w); llama.cpp's converter already adds the 1, so only HF weights are
// shifted, once, at load.
#include <cmath>

#include "core/error.h"
#include "formats/gguf.h"
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

void gemma3_sanitize(ModelConfig& cfg) {
  // GGUF carries no activation key; Gemma's MLP is GeGLU with the tanh gelu. llama.cpp's
  // converter writes no sliding-layer rope base either: its loader fixes it at 10000.
  if (cfg.from_gguf) {
    cfg.hidden_act = "gelu_pytorch_tanh";
    if (cfg.rope_theta_swa <= 0.0f) cfg.rope_theta_swa = 10000.0f;
  }
  // use_bidirectional_attention (EmbeddingGemma): an embedding model whose layers attend both
  // ways, the sliding ones within sliding_window / 2 positions either side (runtime/embedder.h).
  BRISK_CHECK(cfg.bidirectional.empty() || cfg.bidirectional == "all", "model config: "
              "use_bidirectional_attention '", cfg.bidirectional, "' is not supported");
  if (cfg.query_pre_attn_scalar > 0.0f) cfg.attn_scale = float(1.0 / std::sqrt(double(cfg.query_pre_attn_scalar)));
  if (cfg.layer_types.empty() && cfg.sliding_window > 0 && cfg.n_layer > 0 && cfg.n_layer <= 65536) {
    const int32_t pattern = cfg.swa_pattern > 0 ? cfg.swa_pattern : 6;
    for (int il = 0; il < cfg.n_layer; ++il)
      cfg.layer_types.push_back((il + 1) % pattern != 0 ? "sliding_attention" : "full_attention");
  }
}

std::unique_ptr<ArchModel> gemma3_build(const ModelConfig& cfg, WeightStore& ws) {
  RopeBuildParams rp{.n_rot = cfg.n_rot, .theta = cfg.rope_theta, .n_ctx_train = cfg.n_ctx_train,
                     .scaling = cfg.rope_scaling, .neox = cfg.rope_neox};
  GemmaSpec spec{.norm_weight_minus_one = true, .rope_full = rope_table_build(rp)};
  rp.theta = cfg.rope_theta_swa > 0.0f ? cfg.rope_theta_swa : cfg.rope_theta;
  rp.scaling = RopeScaling{};  // sliding layers use the plain base
  spec.rope_swa = rope_table_build(rp);
  return gemma_decoder_build(cfg, ws, spec);
}

// The period of the layer pattern (layer il full iff (il + 1) % period == 0; n_layer + 1: no
// full layer), or 0 when the layers follow none.
int32_t gemma_layer_period(const ModelConfig& cfg) {
  for (int32_t period = 1; period <= cfg.n_layer + 1; ++period) {
    bool fits = true;
    for (int il = 0; il < cfg.n_layer && fits; ++il) fits = cfg.sliding(il) == ((il + 1) % period != 0);
    if (fits) return period;
  }
  return 0;
}

// llama.cpp's gemma-embedding: bidirectional, the layer pattern as a period
// ({arch}.attention.sliding_window_pattern, default 6).
void gemma_embedding_check_gguf(const ModelConfig& cfg) {
  BRISK_CHECK(cfg.bidirectional == "all", "convert: a Gemma3TextModel without use_bidirectional_attention has no "
              "GGUF form (llama.cpp's gemma-embedding attends both ways)");
  BRISK_CHECK(cfg.sliding_window == 0 || gemma_layer_period(cfg) > 0, "convert: the sliding / full layers of this "
              "checkpoint follow no period, which GGUF's sliding_window_pattern cannot say");
}

void gemma_embedding_keys(const ModelConfig& cfg, const std::string& arch, gguf::Writer& w) {
  if (cfg.sliding_window > 0)
    w.set(arch + ".attention.sliding_window_pattern", gguf::Value::from_u32(uint32_t(gemma_layer_period(cfg))));
}

// transformers' Gemma3TextConfig
constexpr const char* kGemma3ConfigDefaults = R"({"vocab_size": 262208, "hidden_size": 2304,
    "intermediate_size": 9216, "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
    "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "query_pre_attn_scalar": 256, "sliding_window": 4096,
    "rope_local_base_freq": 10000.0, "sliding_window_pattern": 6})";

}  // namespace

const ArchEntry& arch_gemma3() {
  static const ArchEntry e{
      .name = "gemma3",
      .hf_architectures = {"Gemma3ForCausalLM"},
      .hf_model_types = {"gemma3_text"},
      .gguf_names = {"gemma3"},
      .gguf_rope_neox = true,
      .hf_name_map = &gemma_hf_to_gguf,
      .hf_config_defaults = kGemma3ConfigDefaults,
      .sanitize = &gemma3_sanitize,
      .build = &gemma3_build,
      .convert = {.arch = "gemma3", .norm_shift = 1.0f, .check = &gemma_check_gguf},
  };
  return e;
}

// EmbeddingGemma: the Gemma 3 backbone (Gemma3TextModel) with use_bidirectional_attention, an
// embedding model; GGUF files name it gemma-embedding and imply the bidirectional attention.
const ArchEntry& arch_gemma_embedding() {
  static const ArchEntry e{
      .name = "gemma-embedding",
      .hf_architectures = {"Gemma3TextModel"},
      .hf_model_types = {},
      .gguf_names = {"gemma-embedding"},
      .gguf_rope_neox = true,
      .hf_name_map = &gemma_hf_to_gguf,
      .hf_config_defaults = kGemma3ConfigDefaults,
      .sanitize = [](ModelConfig& cfg) {
        if (cfg.from_gguf) cfg.bidirectional = "all";
        gemma3_sanitize(cfg);
      },
      .build = &gemma3_build,
      .convert = {.arch = "gemma-embedding", .norm_shift = 1.0f, .check = &gemma_embedding_check_gguf,
                  .keys = &gemma_embedding_keys},
  };
  return e;
}

}  // namespace brisk
