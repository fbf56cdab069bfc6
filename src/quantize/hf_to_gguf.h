// Hugging Face folder (config.json, safetensors, tokenizer.json) -> float32 GGUF named and laid
// out as llama.cpp's converter writes it, for the llama, mistral, qwen2 and qwen3 architectures:
// tensor names through models/name_map, q/k rows of llama/mistral permuted to adjacent-pair
// rope, llama3 rope scaling stored as the rope_freqs.weight factors, mistral written as "llama".
#pragma once
#include <string>

namespace brisk {

struct ArchEntry;

void hf_to_gguf_f32(const std::string& folder, const std::string& out_path);
// The same for encoder-decoder speech checkpoints (registry entries whose convert.layout is
// GgufLayout::encoder_decoder; hf_to_gguf_whisper.cpp): hf_to_gguf_f32 hands them over.
void hf_to_gguf_encoder_decoder_f32(const std::string& folder, const std::string& out_path, const ArchEntry& entry);

}  // namespace brisk
