// Reads a JSON file (config.json, generation_config.json, tokenizer_config.json, ...).
// Errors name the file and, for syntax errors, the byte position.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace brisk {

nlohmann::json read_json_file(const std::string& path);
// Parses JSON text; `name` is used in error messages.
nlohmann::json parse_json_text(std::string_view text, const std::string& name);

}  // namespace brisk
