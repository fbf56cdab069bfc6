// What a model path holds, decided by its content rather than its name: a GGUF file (magic
// "GGUF"), a safetensors file (a little-endian u64 header length, then a JSON object), a
// sharded checkpoint's index (a JSON object with "weight_map"), or a folder (a Hugging Face
// checkpoint). Model::load, `brisk inspect` and `brisk quantize` start here, so that a wrong
// file gets an error naming it and saying what it looks like instead.
#pragma once
#include <string>

namespace brisk {

enum class ModelFormat { gguf, safetensors, safetensors_index, folder };

const char* model_format_name(ModelFormat format);

// Throws brisk::Error naming the path when it is missing, unreadable, empty or none of the
// formats above (saying whether it looks like text, with its first bytes).
ModelFormat model_format_detect(const std::string& path);

// The Hugging Face folder of a checkpoint path of format `format` (safetensors, index or
// folder: the folder itself or the one holding the file), checked for config.json, which
// holds the architecture and sizes: throws naming the folder when it is missing.
std::string hf_folder_of(const std::string& path, ModelFormat format);

}  // namespace brisk
