// The pre-norm dense decoder shared by the Llama family (Llama, Mistral, Qwen2, Qwen3):
//   x = embed(ids)
//   per layer: x += attn(rms_norm(x)); x += mlp(rms_norm(x))
//   logits = output(rms_norm(x))
// The architecture files choose which optional tensors exist (DenseSpec) and fix their
// config; a variant with another block (MoE, sandwich norms) composes the blocks the same way.
#pragma once
#include <memory>

#include "models/blocks.h"
#include "models/registry.h"

namespace brisk {

struct DenseSpec {
  AttentionLoadSpec attention;
  // Layers whose checkpoint has a router (blk.N.ffn_gate_inp) get the MoE MLP (models/moe.h)
  // instead of the dense one.
  bool moe = false;
};

std::unique_ptr<ArchModel> dense_decoder_build(const ModelConfig& cfg, WeightStore& ws, const DenseSpec& spec);

// The rotary table of a model: config rope settings plus GGUF rope_freqs factors when present.
RopeTable model_rope_table(const ModelConfig& cfg, WeightStore& ws);
// The LM head weight: output.weight, or the embedding table when tied / absent.
Weight model_output_weight(const ModelConfig& cfg, const WeightStore& ws);

}  // namespace brisk
