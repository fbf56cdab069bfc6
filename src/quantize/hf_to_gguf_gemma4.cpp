// Gemma 4 (text) Hugging Face folder -> float32 GGUF with llama.cpp's gemma4 names and keys, the
// layout published Gemma 4 GGUFs have: the full layers' head size as attention.key_length and the
// sliding layers' as key_length_swa; per-layer head_count_kv / feed_forward_length arrays where
// layers differ; sliding_window_pattern as one flag per layer; shared_kv_layers; the full layers'
// proportional rope as rope_freqs.weight factors (1 for the rotated pairs, 1e30 for the others)
// over rope.dimension_count = the full head size. K / V tensors that KV-shared layers may carry
// are not written (no layer reads them). Expert stacks stay 3-D (ffn_gate_up_exps, ne
// {n_embd, 2 * n_ff_exp, n_expert}). The model's config goes through the same reading and
// sanitize step as loading (models/gemma4.cpp), so both forms of config.json convert.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/json_file.h"
#include "formats/safetensors.h"
#include "models/config.h"
#include "models/gemma_decoder.h"
#include "models/registry.h"
#include "quantize/hf_to_gguf.h"
#include "quantize/tokenizer_to_gguf.h"

namespace brisk {

bool hf_to_gguf_is_gemma4(const std::string& model_type) { return model_type == "gemma4_text" || model_type == "gemma4"; }

void gemma4_gguf_metadata(const ModelConfig& c, gguf::Writer& w, std::vector<float>* rope_freqs) {
  const std::string a = "gemma4.";
  w.set("general.architecture", gguf::Value::from_string("gemma4"));
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
    const int32_t n_rot = int32_t(std::lround(hd_full * double(c.partial_rotary_full))) & ~1;
    w.set(a + "rope.dimension_count", gguf::Value::from_u32(uint32_t(n_rot)));
  }
}

void hf_to_gguf_gemma4_f32(const std::string& folder, nlohmann::json cfg, const std::string& out_path) {
  namespace fs = std::filesystem;
  if (auto it = cfg.find("text_config"); it != cfg.end() && it->is_object()) {
    const nlohmann::json text = *it;
    cfg.erase("text_config");
    for (const auto& [key, value] : text.items()) cfg[key] = value;
  }
  const ArchEntry& entry = arch_gemma4();
  ModelConfig c;
  c.arch = entry.name;
  c.rope_neox = true;
  config_fill_from_hf(c, cfg);
  const auto ckpt = safetensors::Checkpoint::open(folder, MappedFile::Mode::mmap);
  if (c.n_vocab == 0)
    for (const auto& t : ckpt.tensors())
      if (entry.hf_name_map(t.name) == "token_embd.weight" && t.shape.size() == 2) c.n_vocab = int32_t(t.shape[0]);
  entry.sanitize(c);
  c.finalize();

  gguf::Writer w;
  w.set("general.name", gguf::Value::from_string(fs::path(folder).filename().string()));
  w.set("general.file_type", gguf::Value::from_u32(0));
  std::vector<float> rope_freqs;
  gemma4_gguf_metadata(c, w, &rope_freqs);
  // Gemma's SentencePiece-style BPE tokenizer in llama.cpp's gemma4 form (another kind of
  // tokenizer has no GGUF form here: the file then carries none).
  const fs::path tj = fs::path(folder) / "tokenizer.json";
  if (fs::exists(tj)) {
    const nlohmann::json t = read_json_file(tj.string());
    const bool byte_level = t.contains("decoder") && t["decoder"].is_object() && t["decoder"].value("type", "") == "ByteLevel";
    if (!byte_level) tokenizer_to_gguf({.folder = folder, .pre = "", .n_vocab = c.n_vocab, .model = "gemma4"}, w);
  }
  std::vector<std::unique_ptr<std::vector<float>>> keep;
  for (const auto& t : ckpt.tensors()) {
    const std::string name = entry.hf_name_map(t.name);
    if (name.empty()) continue;
    if (name.rfind("blk.", 0) == 0) {  // K / V of a layer that reads another's cache: unused
      const int il = std::atoi(name.c_str() + 4);
      const bool kv = name.find(".attn_k.") != std::string::npos || name.find(".attn_v.") != std::string::npos ||
                      name.find(".attn_k_norm.") != std::string::npos;
      if (kv && il < c.n_layer && gemma_kv_source(c, il) != il) continue;
    }
    BRISK_CHECK(!t.shape.empty() && t.shape.size() <= 3, "convert: ", t.name, " has ", t.shape.size(), " dims");
    keep.push_back(std::make_unique<std::vector<float>>(safetensors::to_f32(t)));
    w.add_tensor(name, QuantType::F32, std::vector<uint64_t>(t.shape.rbegin(), t.shape.rend()), keep.back()->data(),
                 keep.back()->size() * sizeof(float));
  }
  w.write(out_path);
}

}  // namespace brisk
