// Settings of the Hub client. Empty fields are filled from the environment the way
// huggingface_hub reads it (see hub_options_from_env), so a cache and token set up for the
// Python tools are used as they are.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace brisk {

enum class HubProgress { automatic, bar, lines, quiet };  // automatic: bar on a terminal

// One file's progress, for callers that report it themselves (the server's pull stream).
struct HubFileProgress {
  std::string file{};      // repo-relative path
  std::string blob{};      // the blob's name in the cache: LFS sha256 or git blob id
  uint64_t total = 0;      // bytes (0 when the Hub gave no size)
  uint64_t completed = 0;  // bytes present so far
};

struct HubOptions {
  std::string endpoint{};        // "": $HF_ENDPOINT, else https://huggingface.co
  std::string token{};           // "": $HF_TOKEN, else the file $HF_TOKEN_PATH or $HF_HOME/token
  std::string cache_dir{};       // "": $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub
  bool offline = false;        // also on when HF_HUB_OFFLINE is set: never use the network
  int32_t n_parallel = 4;      // files downloaded at the same time (shards)
  HubProgress progress = HubProgress::automatic;
  bool verify_cached = false;  // re-hash files already in the cache against the Hub's sha256
  // Called (from the download threads, serialized) when a file starts, as its bytes arrive
  // (at most every 256 KiB) and when it is complete; files already cached are reported once,
  // complete. Returning false stops the download (what is written stays, to be resumed) and
  // the pull fails with "download cancelled". It must not throw.
  std::function<bool(const HubFileProgress&)> on_file_progress{};
};

// Returns `opt` with every empty field filled from the environment; the endpoint loses any
// trailing '/'.
HubOptions hub_options_from_env(HubOptions opt);

}  // namespace brisk
