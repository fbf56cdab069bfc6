// Tokenizer of a model's files, or nullptr when the files have none (the model still runs
// from token ids). A tokenizer that is present but broken is an error.
#pragma once
#include <memory>
#include <string>

#include "text/tokenizer.h"

namespace brisk {

namespace gguf { class File; }

std::unique_ptr<Tokenizer> tokenizer_load_gguf(const gguf::File& file);
std::unique_ptr<Tokenizer> tokenizer_load_hf(const std::string& dir);

}  // namespace brisk
