// Architectures known to the engine. Each architecture file defines one ArchEntry (names it
// answers to, its checkpoint quirks, how to build it) and registry.cpp lists them.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/config.h"
#include "models/embed_forward.h"
#include "models/encoder_forward.h"
#include "models/forward.h"
#include "models/weights.h"

namespace brisk {

namespace gguf {
class Writer;
}

// What the KV cache of one layer holds (the runtime groups and sizes its caches by it).
struct LayerKvNeeds {
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  int32_t window = 0;   // sliding window of the layer's attention in positions; 0: every position
  int32_t source = -1;  // >= 0: the layer reads that earlier layer's cache and stores none
};

// A loaded architecture: per-layer weight views and the forward. Read-only after load, shared
// by every Context of the model.
class ArchModel {
 public:
  virtual ~ArchModel() = default;
  // Runs the batch and writes logits for batch.out_rows into arena.logits.
  virtual void forward(const Forward& f) const = 0;
  // [n_layer] what each layer's cache holds. Default: every layer n_head_kv x head_dim of the
  // config, within cfg.sliding_window (0: all positions).
  virtual std::vector<LayerKvNeeds> kv_layers(const ModelConfig& cfg) const;
  // Encoder-decoder models: the encoder's shape (nullptr: a decoder-only model) and the
  // encoder pass, which fills the cross-attention caches of f.cross_seq's sequences.
  virtual const EncoderSpec* encoder() const { return nullptr; }
  virtual void encode(const EncoderForward& f) const;
  // Encoder-only models (embeddings, cross-encoders): the shape (nullptr: a generative model)
  // and the packed forward over whole inputs.
  virtual const EmbedSpec* embedder() const { return nullptr; }
  virtual void embed(const EmbedForward& f) const;
  // [n_layer] what each layer keeps per sequence; empty: keys and values in every layer.
  virtual std::vector<LayerState> layer_states() const { return {}; }
  // Widths of extra activation buffers the forward uses (ForwardArena::extra, [n_batch, width]).
  virtual std::vector<int64_t> extra_arena_widths() const { return {}; }
  // Multi-token prediction (speculative decoding): the checkpoint's MTP block as a model of its
  // own, with its config (one full-attention layer); its forward reads batch.embd_in, the
  // target's final-normed hidden state of the position before each token. {} when there is none.
  struct MtpPart {
    const ArchModel* arch = nullptr;
    const ModelConfig* cfg = nullptr;
  };
  virtual MtpPart mtp() const { return {}; }
};

// How hf_to_gguf writes a checkpoint: decoder-only through the shared key table and name map,
// encoder-decoder (speech) through quantize/hf_to_gguf_whisper.cpp's writer (two stacks, 3-D
// convolution weights, the Hugging Face side files kept whole).
enum class GgufLayout { decoder_only, encoder_decoder };

// One float32 tensor on its way into the GGUF file: GGUF shape (innermost first) and values.
struct ConvertTensor {
  std::vector<uint64_t> ne;
  std::vector<float> f;
};
using ConvertTensors = std::map<std::string, ConvertTensor>;  // by GGUF name

// What `brisk quantize` needs to write this architecture's Hugging Face checkpoints as a GGUF
// file the way llama.cpp's converter does (quantize/hf_to_gguf.cpp, docs/adding-a-model.md).
// The rest is derived: metadata from the config key table (models/config.cpp), tensor names
// from hf_name_map, q/k rows permuted to adjacent-pair rope when gguf_rope_neox is false,
// per-expert tensors stacked into 3-D ones, llama3 rope scaling as rope_freqs factors; and the
// written file is read back and must give the same config, so a setting GGUF cannot hold is an
// error rather than a silently different model.
struct GgufConversion {
  std::string arch;         // general.architecture written ("llama" for Mistral); "": not convertible
  float norm_shift = 0.0f;  // added to every *norm.weight (Gemma's HF RMSNorm weights are gain - 1)
  // Checks what the key table cannot: settings that GGUF readers of this architecture infer
  // instead of reading (Gemma 3's sliding-layer pattern); throws naming what cannot be written.
  void (*check)(const ModelConfig& cfg) = nullptr;
  GgufLayout layout = GgufLayout::decoder_only;
  // What only this architecture's GGUF layout needs, nullptr: nothing. `tensors` rewrites the
  // tensors after the generic steps (names mapped, experts stacked) and may update the config
  // from what it found (e.g. blocks kept past the layer stack; Gemma 4 leaves out the K / V of
  // its KV-shared layers, which no layer reads); `keys` adds or replaces keys after the key
  // table's.
  void (*tensors)(ModelConfig& cfg, ConvertTensors& t) = nullptr;
  void (*keys)(const ModelConfig& cfg, const std::string& arch, gguf::Writer& w) = nullptr;
  // Writes the {arch}.* keys in place of the key table (config_write_gguf) where the table
  // cannot say the layout (Gemma 4: per-layer arrays, two head sizes, the full layers' rope as
  // rope_freqs.weight factors); a tensor it adds keeps its data in *rope_freqs, which must
  // outlive the writer's write. The converter then leaves the rope check of the read-back file
  // to this function's own checks.
  void (*write_metadata)(const ModelConfig& cfg, gguf::Writer& w, std::vector<float>* rope_freqs) = nullptr;
  // tokenizer.ggml.model written from tokenizer.json: "gpt2" (byte-level BPE), or "gemma4"
  // (SentencePiece-style BPE; a byte-level tokenizer.json then has no GGUF form and is left out).
  std::string tokenizer = "gpt2";
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
  // The family's config class defaults, as JSON text: keys a config.json leaves out take these
  // values (transformers' config class fills them in the same way); nullptr: none.
  const char* hf_config_defaults = nullptr;
  // Keys the engine runs at one value only, as JSON text: a config.json giving another value is
  // refused naming the key (null: the key must be absent or null); nullptr: none.
  const char* hf_config_fixed = nullptr;
  // Checkpoint quirks and family defaults applied to the config before finalize().
  void (*sanitize)(ModelConfig& cfg) = nullptr;
  std::unique_ptr<ArchModel> (*build)(const ModelConfig& cfg, WeightStore& ws) = nullptr;
  GgufConversion convert{};
};

const std::vector<const ArchEntry*>& arch_registry();
// nullptr when unknown.
const ArchEntry* arch_find_hf(const std::vector<std::string>& architectures, const std::string& model_type);
// The same for a config.json: its "architectures" list and its "model_type" ("" when absent).
const ArchEntry* arch_find_hf_config(const nlohmann::json& config);
const ArchEntry* arch_find_gguf(const std::string& name);
// config.json with the entry's hf_config_defaults for the keys it leaves out (put in
// text_config when it has one, at the top level otherwise); throws naming the key where it
// gives another value to a key of the entry's hf_config_fixed, and for a classification head
// (architectures *ForSequenceClassification / *ForTokenClassification) the entry does not name.
nlohmann::json arch_hf_config_with_defaults(const ArchEntry& entry, const nlohmann::json& config);

// The entries, one per architecture file.
const ArchEntry& arch_llama();
const ArchEntry& arch_mistral();
const ArchEntry& arch_qwen2();
const ArchEntry& arch_qwen3();
const ArchEntry& arch_qwen3moe();
const ArchEntry& arch_gemma3();
const ArchEntry& arch_gemma_embedding();
const ArchEntry& arch_gemma4();
const ArchEntry& arch_whisper();
const ArchEntry& arch_bert();
const ArchEntry& arch_roberta();
const ArchEntry& arch_nomic_bert();
const ArchEntry& arch_modern_bert();
const ArchEntry& arch_qwen35();
const ArchEntry& arch_qwen35moe();
const ArchEntry& arch_qwen3next();

}  // namespace brisk
