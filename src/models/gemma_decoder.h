// The Gemma decoder shared by Gemma 3 and Gemma 4: "sandwich" RMS norms around attention and
// MLP,
//   x = embed(ids) * sqrt(n_embd)
//   per layer: x += post_attn_norm(attn(attn_norm(x)))
//              x += post_ffw_norm(mlp(ffn_norm(x)) [+ moe block])
//              [x += post_norm(proj(act(inp_gate(x)) * per_layer_input[il]))]   (per-layer embeddings)
//              [x *= layer_output_scale]
//   logits = softcap(output(rms_norm(x)))
// with per-head q/k RMS norms, GeGLU MLPs and sliding-window and full-attention layers
// (layer_types), each kind with its own rope and each layer with its own head size and KV
// heads. Gemma 4's additions are options of the same layer, switched on by the config and the
// checkpoint: values that are the keys (no attn_v), an unweighted V norm, layers that read the
// cache of the last earlier layer of their kind (KV sharing), an MoE block beside the MLP, the
// per-layer embeddings and a per-layer output scale. The architecture files (gemma3.cpp,
// gemma4.cpp) fix the config and the rope tables and choose the options.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "models/blocks.h"
#include "models/registry.h"

namespace brisk {

// Hugging Face Gemma 2 / 3 / 4 parameter names -> GGUF (llama.cpp) names: the sandwich norms,
// Gemma 4's per-layer embeddings, output scale and MoE block; the text model of a
// *ForConditionalGeneration checkpoint (model.language_model.*); other towers are dropped.
std::string gemma_hf_to_gguf(const std::string& hf);

struct GemmaSpec {
  // Hugging Face Gemma 2 / 3 store RMSNorm weights as w - 1 (the norm multiplies by 1 + w);
  // GGUF files and Gemma 4 store the gain itself.
  bool norm_weight_minus_one = false;
  bool v_norm = false;       // V RMS-normalized per head without a weight (Gemma 4)
  bool values_are_keys = false;  // full layers without attn_v take their keys as values (Gemma 4
                                 // attention_k_eq_v; in GGUF files the missing tensor says so)
  RopeTable rope_full{};     // rope of the full-attention layers
  RopeTable rope_swa{};      // rope of the sliding-window layers
};

// Layer il's weights come from blk.il.* of ws; optional parts are used where the checkpoint
// has them (and required where the config says so).
std::unique_ptr<ArchModel> gemma_decoder_build(const ModelConfig& cfg, WeightStore& ws, const GemmaSpec& spec);

// What each layer's KV cache holds (ArchModel::kv_layers of the Gemma decoder): its heads, its
// window when it is a sliding layer, and for a KV-shared layer the layer whose cache it reads.
std::vector<LayerKvNeeds> gemma_kv_layers(const ModelConfig& cfg);

// The layer whose cache layer il reads under Gemma 4's KV sharing (cfg.n_kv_shared_layers):
// il itself, or for one of the last n_kv_shared_layers layers the last earlier layer of the
// same kind (sliding or full). Throws when there is none.
int32_t gemma_kv_source(const ModelConfig& cfg, int32_t il);

}  // namespace brisk
