// Opens the tokenizer of a model path: a GGUF file (tokenizer.ggml.* metadata) or a folder
// holding tokenizer.json. A tokenizer.json path is accepted as its folder.
#pragma once
#include <memory>
#include <string>

#include "text/tokenizer.h"

namespace brisk {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

}  // namespace brisk
