// The hybrid decoder of Qwen3.5 / Qwen3.6 / Qwen3-Next: a pre-norm decoder whose layers mix
// linear attention and gated full attention,
//   x = embed(ids)
//   per layer: x += mixer(rms_norm(x));  x += mlp(rms_norm(x))
//   logits = output(rms_norm(x))
// where the mixer is the Gated DeltaNet block (models/delta_net.h) on "linear_attention" layers
// and self-attention with a sigmoid output gate, per-head q/k RMS norm and partial rotary
// embedding on the others (layer_types, or every full_attention_interval-th layer), and the MLP
// is dense, or MoE with a shared expert where the layer has a router (models/moe.h). Every
// RMSNorm except the delta net's gated one multiplies by (1 + w) in the Hugging Face weights;
// llama.cpp's converter stores 1 + w, so only HF weights are shifted, once, at load.
// The multi-token-prediction block (HF mtp.*, GGUF blk.{n_layer + j}.nextn.* and that block's
// layer tensors) is loaded and kept for speculative decoding; it is not run.
#pragma once
#include <memory>
#include <string>

#include "models/registry.h"

namespace brisk {

struct HybridSpec {
  bool moe = false;            // layers with a router (blk.N.ffn_gate_inp) get the MoE MLP
  bool kv_tiled_gguf = false;  // GGUF value heads in llama.cpp's tiled order (qwen35, qwen35moe)
};

std::unique_ptr<ArchModel> hybrid_decoder_build(const ModelConfig& cfg, WeightStore& ws, const HybridSpec& spec);
// Checks the layer pattern, head counts and state sizes (errors name the config key), derives
// what GGUF leaves implicit and sizes the MLP buffers.
void hybrid_sanitize(ModelConfig& cfg);
// Hugging Face names (Qwen3_5ForCausalLM, the language model of the conditional-generation
// form, Qwen3NextForCausalLM, MTP tensors) -> llama.cpp's GGUF names; "" drops a tensor.
std::string hybrid_hf_to_gguf(const std::string& hf);
// Whether layer il is a linear-attention layer.
bool hybrid_layer_is_linear(const ModelConfig& cfg, int il);

// The GGUF conversion's hybrid steps (GgufConversion::tensors / keys, models/hybrid_convert.cpp):
// the float tensors of a Hugging Face checkpoint rewritten into llama.cpp's layout, and the keys
// llama.cpp's readers need beyond the config key table's.
void hybrid_convert_tensors(ModelConfig& cfg, ConvertTensors& t);
void hybrid_convert_keys(const ModelConfig& cfg, const std::string& arch, gguf::Writer& w);

}  // namespace brisk
