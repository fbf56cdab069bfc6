// Model references -> local paths, for every front end (pull, run, generate, serve).
//
//   hub_resolve_model("Qwen/Qwen3-0.6B-GGUF:Q8_0", opt)
//     -> ".../hub/models--Qwen--Qwen3-0.6B-GGUF/snapshots/<commit>/Qwen3-0.6B-Q8_0.gguf"
//
// A path that exists is returned unchanged. Otherwise the reference (see reference.h) is
// looked up on the Hub and the files it needs are downloaded into the huggingface_hub cache on
// first use; offline (HF_HUB_OFFLINE=1 or opt.offline) and when the Hub cannot be reached the
// cached snapshot of the revision is used. Errors are brisk::Error with a message for users:
// repository not found, gated without a token, no GGUF of that quant (with the available
// ones), network unreachable, disk full, not cached while offline.
#pragma once
#include <string>
#include <vector>

#include "hub/options.h"

namespace brisk {

std::string hub_resolve_model(const std::string& ref, const HubOptions& opt);

// The model `brisk run` uses when given none: small (about 0.6 GB), with a chat template.
inline constexpr const char* kHubDefaultModel = "Qwen/Qwen3-0.6B-GGUF:Q8_0";

struct HubPullResult {
  std::string local_path{};          // what hub_resolve_model returns
  std::string repo_id{};
  std::string revision{};
  std::string commit{};
  std::string format{};              // "gguf", "safetensors" or "file"
  std::string quant{};               // GGUF quant label, "" otherwise
  std::vector<std::string> files{};  // repo-relative paths now in the snapshot
  uint64_t bytes_received = 0;     // downloaded in this call
  size_t files_downloaded = 0;
  bool from_cache = false;         // resolved without asking the Hub
};

// Like hub_resolve_model, with the details (used by `brisk pull`). `allow_cache_fallback`:
// use the cached snapshot when the Hub cannot be reached.
HubPullResult hub_pull(const std::string& ref, const HubOptions& opt, bool allow_cache_fallback);

}  // namespace brisk
