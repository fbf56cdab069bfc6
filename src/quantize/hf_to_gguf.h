// Hugging Face folder (config.json, safetensors, tokenizer.json) -> float32 GGUF named and laid
// out as llama.cpp's converter writes it, for the llama, mistral, qwen2 and qwen3 architectures:
// tensor names through models/name_map, q/k rows of llama/mistral permuted to adjacent-pair
// rope, llama3 rope scaling stored as the rope_freqs.weight factors, mistral written as "llama".
// Qwen3.5 / Qwen3.5-MoE / Qwen3-Next go through hf_to_gguf_hybrid.cpp.
#pragma once
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace brisk {

void hf_to_gguf_f32(const std::string& folder, const std::string& out_path);

// The hybrid linear-attention families (hf_to_gguf_hybrid.cpp): model_type qwen3_5[_text],
// qwen3_5_moe[_text], qwen3_next, written as llama.cpp's qwen35 / qwen35moe / qwen3next.
bool hf_to_gguf_is_hybrid(const std::string& model_type);
void hf_to_gguf_hybrid_f32(const std::string& folder, const nlohmann::json& cfg, const std::string& out_path);

}  // namespace brisk
