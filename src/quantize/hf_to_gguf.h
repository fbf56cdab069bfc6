// Hugging Face folder (config.json, safetensors, tokenizer.json) -> float32 GGUF named and laid
// out as llama.cpp's converter writes it, for the llama, mistral, qwen2 and qwen3 architectures:
// tensor names through models/name_map, q/k rows of llama/mistral permuted to adjacent-pair
// rope, llama3 rope scaling stored as the rope_freqs.weight factors, mistral written as "llama".
// Gemma 4 goes through hf_to_gguf_gemma4.cpp.
#pragma once
#include <string>

#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace brisk {

struct ModelConfig;
namespace gguf {
class Writer;
}

void hf_to_gguf_f32(const std::string& folder, const std::string& out_path);

// Gemma 4 (hf_to_gguf_gemma4.cpp): model_type gemma4_text, or gemma4 with a text_config, written
// as llama.cpp's gemma4.
bool hf_to_gguf_is_gemma4(const std::string& model_type);
void hf_to_gguf_gemma4_f32(const std::string& folder, nlohmann::json cfg, const std::string& out_path);
// The gemma4.* metadata of a finalized Gemma 4 config (and general.architecture), with the full
// layers' rope_freqs.weight tensor when their rope is proportional: its data lives in
// *rope_freqs, which must outlive w.write().
void gemma4_gguf_metadata(const ModelConfig& c, gguf::Writer& w, std::vector<float>* rope_freqs);

}  // namespace brisk
