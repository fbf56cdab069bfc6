// What `brisk list` and `brisk rm` see of the cache: every models--ORG--NAME folder, its size,
// weight format, GGUF quants, architecture (GGUF general.architecture or config.json
// model_type) and last use (latest access time of its blobs, which brisk updates on each use).
#pragma once
#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

namespace brisk::hub {

struct CachedModel {
  std::string repo_id{};
  std::string path{};                    // the models--org--name folder
  uint64_t size_bytes = 0;             // all complete blobs
  std::string format{};                  // "gguf", "safetensors", "gguf+safetensors" or "other"
  std::vector<std::string> quants{};     // GGUF quant labels present, sorted
  std::string architecture{};            // "" when unknown
  std::time_t last_used = 0;
  std::vector<std::string> revisions{};  // refs/ names
  size_t n_incomplete = 0;             // partial downloads present
};

std::vector<CachedModel> scan_cache(const std::string& cache_dir);

struct RemoveResult {
  std::vector<std::string> removed{};    // repo-relative paths or the repo folder
  uint64_t bytes_freed = 0;
};

// Removes what `ref_text` names from the cache: the whole repo for "org/name", a revision's
// snapshot for "org/name@rev", or the files of one quant / one file (with blobs no snapshot
// uses any more) for "org/name:QUANT" and "org/name/FILE". brisk::Error when nothing matches.
RemoveResult remove_from_cache(const std::string& cache_dir, const std::string& ref_text);

}  // namespace brisk::hub
