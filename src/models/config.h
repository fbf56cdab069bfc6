// The hyperparameters of a decoder model, filled from Hugging Face config.json keys or GGUF
// metadata keys through one declarative table (config.cpp). Architecture files adjust it in
// their sanitize step (e.g. Qwen2's use_sliding_window, defaults that differ per family).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "backend/backend.h"
#include "models/rope_scaling.h"

namespace brisk {

namespace gguf {
class File;
class Writer;
}  // namespace gguf

struct ModelConfig {
  std::string arch;              // registry key: HF model_type or GGUF general.architecture
  std::string name;
  int32_t n_vocab = 0;
  int32_t n_embd = 0;            // hidden size
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;         // 0: n_head
  int32_t head_dim = 0;          // 0: n_embd / n_head
  int32_t n_ff = 0;              // MLP intermediate size
  int32_t n_ctx_train = 0;
  float rms_eps = 1e-6f;
  float rope_theta = 10000.0f;
  float partial_rotary = 1.0f;   // fraction of head_dim rotated (HF)
  int32_t n_rot = 0;             // rotated dims (GGUF rope.dimension_count); 0: derived
  RopeScaling rope_scaling;
  bool rope_neox = true;         // rotation pairing, depends on the weights' source
  int32_t sliding_window = 0;    // 0: none
  bool use_sliding_window = true;  // Qwen2 flag: sliding_window is ignored when false
  bool tie_embeddings = false;
  Activation act = Activation::silu;
  std::string hidden_act = "silu";
  float attn_scale = 0.0f;       // 0: 1/sqrt(head_dim)
  // Where the weights were read from (set by the loader): checkpoint quirks differ, e.g.
  // llama.cpp's converter already folds Gemma's (1 + w) into its RMSNorm weights.
  bool from_gguf = false;
  // Gemma family.
  float rope_theta_swa = 0.0f;   // rope base of sliding-window layers; 0: rope_theta
  int32_t swa_pattern = 0;       // every swa_pattern-th layer is full attention; 0: unset
  std::vector<std::string> layer_types;  // HF "sliding_attention" / "full_attention" per layer
  float query_pre_attn_scalar = 0.0f;    // attention scale 1/sqrt(this); 0: unset
  float attn_softcap = 0.0f;     // tanh soft-capping of attention scores; 0: off
  float final_softcap = 0.0f;    // tanh soft-capping of the output logits; 0: off
  // Mixture of experts (Qwen3-MoE).
  int32_t n_expert = 0;          // experts per MoE layer; 0: dense
  int32_t n_expert_used = 0;     // experts chosen per token (top-k)
  int32_t n_ff_exp = 0;          // intermediate size of one expert
  bool norm_topk_prob = true;    // renormalize the chosen experts' probabilities to sum 1
  // Gemma 4: full-attention layers with their own head size, KV heads and rope; KV sharing;
  // per-layer embeddings; an MoE block beside the dense MLP.
  int32_t head_dim_full = 0;     // head size of full-attention layers (global_head_dim); 0: head_dim
  int32_t head_dim_swa = 0;      // GGUF attention.key_length_swa (key_length is then head_dim_full)
  int32_t n_head_kv_full = 0;    // KV heads of full layers whose values are their keys; 0: n_head_kv
  bool attention_k_eq_v = false; // full-attention layers have no v_proj: values are the keys
  float partial_rotary_full = 1.0f;  // rope_parameters.full_attention.partial_rotary_factor
  int32_t n_rot_full = 0;        // rotated dims of full layers (GGUF rope.dimension_count)
  int32_t n_rot_swa = 0;         // GGUF rope.dimension_count_swa
  int32_t n_kv_shared_layers = 0;  // the last layers read the cache of the last earlier layer of their type
  int32_t n_embd_per_layer = 0;  // hidden_size_per_layer_input: per-layer embeddings; 0: none
  int32_t n_vocab_per_layer = 0; // vocab_size_per_layer_input; 0: n_vocab
  bool double_wide_mlp = false;  // KV-shared layers have MLPs of 2 * n_ff
  bool moe_block = false;        // enable_moe_block: an MoE block beside every layer's dense MLP
  std::string bidirectional;     // use_bidirectional_attention ("", "vision"; "all" is not causal)
  // Per-layer shapes: empty (every layer takes the model-wide value) or [n_layer] with 0 for
  // "the model-wide value"; from HF per_layer_config, GGUF per-layer arrays or a sanitize step.
  // finalize() resolves the zeros.
  std::vector<int32_t> layer_head_dim;   // [n_layer]
  std::vector<int32_t> layer_n_head_kv;  // [n_layer]
  std::vector<int32_t> layer_n_ff;       // [n_layer]
  int32_t n_ff_shexp = 0;        // MLP size of the shared expert beside the routed ones; 0: none
  // Hybrid models with linear-attention layers (Gated DeltaNet: Qwen3.5, Qwen3-Next); layer_types
  // names them "linear_attention", or every full_attention_interval-th layer is full attention.
  int32_t linear_conv_kernel = 0;   // causal conv taps
  int32_t linear_n_k_head = 0;      // query / key heads
  int32_t linear_n_v_head = 0;      // value heads (a multiple of the key heads)
  int32_t linear_k_head_dim = 0;
  int32_t linear_v_head_dim = 0;    // HF key; GGUF gives linear_inner instead
  int32_t linear_inner = 0;         // n_v_head * v_head_dim (GGUF ssm.inner_size)
  int32_t full_attention_interval = -1;  // -1: not given
  std::vector<int32_t> recurrent_layers = {};  // GGUF attention.recurrent_layers: per layer nonzero
  // The multimodal rope's sections (HF mrope_section; GGUF rope.dimension_sections); text
  // positions are equal in every section, so text runs as plain rope and only the converter uses them.
  std::vector<int32_t> rope_sections = {};
                                          // for linear attention (or one value for all)
  int32_t n_nextn = 0;              // multi-token-prediction layers after the stack (GGUF counts
                                    // them in block_count)

  // Encoder-decoder models (speech): the encoder's shape and the decoder's keys, which the
  // architecture's sanitize step moves into the fields above (n_embd, n_layer, n_head, n_ff,
  // n_ctx_train are the decoder's).
  int32_t d_model = 0;           // width of encoder and decoder
  int32_t n_enc_layer = 0;       // encoder_layers
  int32_t n_enc_head = 0;        // encoder_attention_heads
  int32_t n_enc_ff = 0;          // encoder_ffn_dim
  int32_t n_enc_ctx = 0;         // max_source_positions: encoder output positions per window
  int32_t n_mels = 0;            // num_mel_bins: input features per frame
  int32_t n_dec_layer = 0;       // decoder_layers
  int32_t n_dec_head = 0;        // decoder_attention_heads
  int32_t n_dec_ff = 0;          // decoder_ffn_dim
  int32_t n_dec_ctx = 0;         // max_target_positions
  bool scale_embedding = false;  // token embeddings times sqrt(d_model)
  std::string activation_function;  // MLP activation of encoder-decoder configs ("gelu")
  // Encoder-only (embedding, reranking) models.
  int32_t n_type_vocab = 0;      // type_vocab_size: rows of the token-type embeddings
  float norm_eps = 0.0f;         // layer_norm_eps (0: the architecture's default)
  int32_t pad_token_id = -1;     // RoBERTa positions start at pad_token_id + 1
  std::string position_embedding_type;  // "absolute" (the only kind the BERT family here has)
  int32_t pooling_type = -1;     // GGUF {arch}.pooling_type (llama.cpp: 0 none, 1 mean, 2 cls, 3 last, 4 rank)
  int32_t n_cls_out = 0;         // classification head outputs (num_labels; GGUF: the cls.output rows)
  std::vector<std::string> cls_labels;  // GGUF {arch}.classifier.output_labels: the head's rows' names
  int32_t local_attention = 0;   // ModernBERT: width of the local layers' window (keys within +-local_attention / 2)
  std::string hidden_activation; // GGUF {arch}.hidden_activation: the gated MLP's activation where written

  // Derived values filled by finalize() and checked for consistency.
  void finalize();
  int32_t q_width() const { return n_head * head_dim; }
  int32_t kv_width() const { return n_head_kv * head_dim; }
  // Shapes of layer il (after finalize()).
  int32_t head_dim_of(int il) const { return layer_head_dim.empty() ? head_dim : layer_head_dim[size_t(il)]; }
  int32_t n_head_kv_of(int il) const { return layer_n_head_kv.empty() ? n_head_kv : layer_n_head_kv[size_t(il)]; }
  int32_t n_ff_of(int il) const { return layer_n_ff.empty() ? n_ff : layer_n_ff[size_t(il)]; }
  int32_t q_width_of(int il) const { return n_head * head_dim_of(il); }
  int32_t kv_width_of(int il) const { return n_head_kv_of(il) * head_dim_of(il); }
  // Whether layer il attends within the sliding window (layer_types, else every layer when
  // there is a window).
  bool sliding(int il) const {
    return sliding_window > 0 && (layer_types.empty() || layer_types[size_t(il)] == "sliding_attention");
  }
  // The widest layer (activation buffers are sized by these).
  int32_t max_head_dim() const;
  int32_t max_q_width() const;
  int32_t max_kv_width() const;
  int32_t max_n_ff() const;
};

// Fills the fields named in the key table from config.json (nested keys, alternatives; null
// values are skipped) and per-layer shapes from a transformers `per_layer_config` map; the keys
// of a `text_config` object (multimodal checkpoints) take precedence over the top level's.
void config_fill_from_hf(ModelConfig& c, const nlohmann::json& j);
// Fills the fields from GGUF metadata; `{arch}` in a key is general.architecture. Per-layer
// arrays (head_count_kv, feed_forward_length, sliding_window_pattern) fill the per-layer fields.
void config_fill_from_gguf(ModelConfig& c, const gguf::File& f);
// The inverse, for the converter: sets the `{arch}.*` keys of the table to c's values (`{arch}`
// := arch): the sizes, context length, norm epsilon and rope base always, every other field
// where it differs from a default ModelConfig. Fields without a GGUF key are not written.
void config_write_gguf(const ModelConfig& c, const std::string& arch, gguf::Writer& w);

}  // namespace brisk
