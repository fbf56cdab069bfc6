// Which files of a repo a reference needs.
//   org/name:QUANT   the GGUF file, or every shard of the sharded set (NAME-00001-of-0000N.gguf),
//                    whose name ends in QUANT (case-insensitive; "-", "." or "/" before it).
//   org/name         a safetensors repo (top-level *.safetensors and config.json present):
//                    the weights (shards named by the index, else model.safetensors, else all
//                    top-level *.safetensors) and the config / tokenizer / template files in
//                    kSafetensorsExtras; never .bin/.pt/.pth. Otherwise a GGUF repo: the only
//                    quant, else the first of kDefaultQuants that exists.
//   org/name/PATH    that file (with its whole shard set when it is a shard).
// mmproj*.gguf (vision projectors) are never picked as the model. Ambiguity is an error that
// lists the choices.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "hub/reference.h"

namespace brisk::hub {

inline constexpr const char* kDefaultQuants[] = {"Q4_K_M", "Q8_0", "Q6_K",  "Q5_K_M", "Q4_K_S",
                                                 "Q5_K_S", "Q4_0", "BF16", "F16",    "F32"};
inline constexpr const char* kSafetensorsExtras[] = {
    "config.json",       "generation_config.json", "tokenizer.json",
    "tokenizer_config.json", "chat_template.jinja", "chat_template.json",
    "special_tokens_map.json", "tokenizer.model"};

struct Selection {
  std::string format{};               // "gguf", "safetensors" or "file"
  std::string quant{};                // GGUF quant label of the choice (uppercase), else ""
  std::vector<std::string> files{};   // repo-relative paths to fetch, sorted
  std::string entry{};                // what the caller loads: a file path, "" = the folder
};

// `paths`: every file of the repo (or of a cached snapshot). `where`: "org/name@rev" for
// messages. brisk::Error when nothing fits or the choice is ambiguous.
Selection select_files(const HubRef& ref, const std::vector<std::string>& paths,
                       const std::string& where);

struct ShardName {
  std::string set{};   // path with "-0000i-of-0000N" removed
  int index = 0;     // 1-based
  int count = 0;
};
std::optional<ShardName> parse_shard_name(const std::string& path);

// The quant label in a GGUF file name ("Qwen3-0.6B-Q4_K_M.gguf" -> "Q4_K_M"), "" when none.
std::string gguf_quant_label(const std::string& path);

}  // namespace brisk::hub
