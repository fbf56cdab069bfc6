// Architectures known to the engine. Each architecture file defines one ArchEntry (names it
// answers to, its checkpoint quirks, how to build it) and registry.cpp lists them.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "models/config.h"
#include "models/encoder_forward.h"
#include "models/forward.h"
#include "models/weights.h"

namespace brisk {

// A loaded architecture: per-layer weight views and the forward. Read-only after load, shared
// by every Context of the model.
class ArchModel {
 public:
  virtual ~ArchModel() = default;
  // Runs the batch and writes logits for batch.out_rows into arena.logits.
  virtual void forward(const Forward& f) const = 0;
  // Encoder-decoder models: the encoder's shape (nullptr: a decoder-only model) and the
  // encoder pass, which fills the cross-attention caches of f.cross_seq's sequences.
  virtual const EncoderSpec* encoder() const { return nullptr; }
  virtual void encode(const EncoderForward& f) const;
};

struct ArchEntry {
  std::string name;                             // canonical, e.g. "qwen2"
  std::vector<std::string> hf_architectures;    // config.json "architectures", e.g. "Qwen2ForCausalLM"
  std::vector<std::string> hf_model_types;      // config.json "model_type"
  std::vector<std::string> gguf_names;          // GGUF general.architecture
  // GGUF rope pairing: llama.cpp's converter permutes the q/k rows of the Llama family so
  // that GGUF uses adjacent pairs (neox = false); Qwen keeps the HF half-split layout.
  bool gguf_rope_neox = true;
  // Hugging Face parameter name -> GGUF tensor name ("" drops it); nullptr: hf_to_gguf_name.
  std::string (*hf_name_map)(const std::string& hf) = nullptr;
  // Checkpoint quirks and family defaults applied to the config before finalize().
  void (*sanitize)(ModelConfig& cfg) = nullptr;
  std::unique_ptr<ArchModel> (*build)(const ModelConfig& cfg, WeightStore& ws) = nullptr;
};

const std::vector<const ArchEntry*>& arch_registry();
// nullptr when unknown.
const ArchEntry* arch_find_hf(const std::vector<std::string>& architectures, const std::string& model_type);
const ArchEntry* arch_find_gguf(const std::string& name);

// The entries, one per architecture file.
const ArchEntry& arch_llama();
const ArchEntry& arch_mistral();
const ArchEntry& arch_qwen2();
const ArchEntry& arch_qwen3();
const ArchEntry& arch_qwen3moe();
const ArchEntry& arch_gemma3();
const ArchEntry& arch_whisper();

}  // namespace brisk
